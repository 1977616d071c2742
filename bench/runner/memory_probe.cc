#include "runner/memory_probe.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "runner/cases.h"
#include "runner/watchdog.h"
#include "workloads/workloads.h"

extern char** environ;

namespace depengine::bench {
namespace {

// The child's one line of output, parsed by ParseProbeLine.
constexpr const char* kProbeTag = "depengine-probe";

void PrintProbeLine(const MemoryFigures& f) {
  if (f.ok) {
    std::printf("%s ok=1 peak_rss_bytes=%zu bytes_per_pending_op=%.3f\n", kProbeTag, f.peak_rss_bytes,
                f.bytes_per_pending_op);
  } else {
    std::string error = f.error;
    std::replace(error.begin(), error.end(), '\n', ' ');
    std::printf("%s ok=0 error=%s\n", kProbeTag, error.c_str());
  }
  std::fflush(stdout);
}

MemoryFigures ParseProbeLine(const std::string& output) {
  MemoryFigures f;
  const std::size_t at = output.find(kProbeTag);
  if (at == std::string::npos) {
    f.error = "memory probe printed no result";
    return f;
  }
  std::string line = output.substr(at + std::strlen(kProbeTag));
  line = line.substr(0, line.find('\n'));
  if (const std::size_t e = line.find(" error="); e != std::string::npos) {
    f.error = "memory probe: " + line.substr(e + 7);
    return f;
  }
  std::istringstream in(line);
  std::string field;
  while (in >> field) {
    const std::size_t eq = field.find('=');
    const std::string key = field.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : field.substr(eq + 1);
    if (key == "ok") f.ok = value == "1";
    if (key == "peak_rss_bytes") f.peak_rss_bytes = std::stoull(value);
    if (key == "bytes_per_pending_op") f.bytes_per_pending_op = std::stod(value);
  }
  if (!f.ok) f.error = "memory probe: malformed result '" + line + "'";
  return f;
}

// Runs this executable with `args`; returns its stdout and exit status.
bool RunSelf(const std::vector<std::string>& args, std::string* output, int* status, std::string* error) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[1]);
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (rc != 0) {
    close(pipe_fds[0]);
    *error = std::string("posix_spawn: ") + std::strerror(rc);
    return false;
  }
  char buf[4096];
  ssize_t n;
  while ((n = read(pipe_fds[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) output->append(buf, static_cast<std::size_t>(n));
  }
  close(pipe_fds[0]);
  while (waitpid(pid, status, 0) < 0 && errno == EINTR) {
  }
  return true;
}

EngineOptions ProbeEngineOptions(EngineKind kind, int workers) {
  EngineOptions o;
  o.kind = kind;
  o.cpu_worker_threads = workers;
  return o;
}

}  // namespace

MemoryFigures ProbeInChild(const std::string& case_id, EngineKind kind, const BenchOptions& options) {
  char scale[64];
  std::snprintf(scale, sizeof scale, "%.17g", options.n_scale);
  const std::vector<std::string> args = {
      "depengine-bench", "--probe=" + case_id, std::string("--engines=") + EngineFlagName(kind),
      "--workers=" + std::to_string(options.workers), std::string("--n-scale=") + scale,
      "--run-timeout=" + std::to_string(options.run_timeout_s)};
  std::string output;
  std::string error;
  int status = 0;
  if (!RunSelf(args, &output, &status, &error)) {
    MemoryFigures f;
    f.error = error;
    return f;
  }
  MemoryFigures f = ParseProbeLine(output);
  if (f.ok && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    f.ok = false;
    f.error = "memory probe exited abnormally (status " + std::to_string(status) + ")";
  }
  if (!f.ok && !WIFEXITED(status)) {
    f.error += " (killed by signal " + std::to_string(WTERMSIG(status)) + ")";
  }
  return f;
}

namespace {

// Runs the probed case once; the figures except the peak.
MemoryFigures ProbeOnce(const BenchOptions& options) {
  MemoryFigures f;
  const EngineOptions engine_options = ProbeEngineOptions(options.engines.at(0), options.workers);
  if (options.probe_case == kPendingMemoryId) {
    const PendingMemoryParams params = PendingMemorySize(options.n_scale);
    auto engine = CreateEngine(engine_options);
    const PendingMemoryResult r = MeasurePendingOpMemory(*engine, params);
    engine.reset();
    f.ok = r.ok;
    f.error = r.check_error;
    f.bytes_per_pending_op = r.BytesPerOp();
  } else {
    std::vector<BenchCase> cases = MakeBenchCases(
        options.n_scale, [&](const std::string& id, const std::string&) { return id == options.probe_case; });
    if (cases.empty()) {
      f.error = "unknown case '" + options.probe_case + "'";
    } else {
      EngineOptions case_options = engine_options;
      case_options.max_in_flight = cases[0].max_in_flight;
      auto engine = CreateEngine(case_options);
      const WorkloadResult r = cases[0].run(*engine);
      engine.reset();
      f.ok = r.ok;
      f.error = r.check_error;
    }
  }
  return f;
}

}  // namespace

int RunProbe(const BenchOptions& options) {
  MemoryFigures f;
  Watchdog watchdog(std::chrono::seconds(options.run_timeout_s));
  try {
    WatchdogScope watch(watchdog, "memory probe of " + options.probe_case + " on " +
                                      EngineKindName(options.engines.at(0)));
    f = ProbeOnce(options);
  } catch (const std::exception& e) {
    f.ok = false;
    f.error = e.what();
  }
  f.peak_rss_bytes = PeakRssBytes();
  PrintProbeLine(f);
  return f.ok ? 0 : 1;
}

}  // namespace depengine::bench
