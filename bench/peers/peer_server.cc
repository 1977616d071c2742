#include "peer_server.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <thread>

#include "workloads/memory.h"

namespace depengine::bench::peers {
namespace {

// Protocol values are tab-separated: keep tabs and newlines out of them.
std::string Clean(std::string s) {
  std::replace_if(s.begin(), s.end(), [](char c) { return c == '\t' || c == '\n' || c == '\r'; }, ' ');
  return s;
}

void PrintLine(const std::string& line) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

std::string Number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Runs one repetition with the peak resident set reset before it, and
// formats the result line.
std::string RunOnce(Runner& runner) {
  ResetPeakRss();
  RunResult r;
  try {
    r = runner.Run();
  } catch (const std::exception& e) {
    r = RunResult::Failed(std::string("exception: ") + e.what());
  } catch (...) {
    r = RunResult::Failed("non-standard exception");
  }
  const std::size_t peak = PeakRssBytes();
  std::string line = "@peer result";
  if (!r.ok) {
    line += "\tok=0\terror=" + Clean(r.error.empty() ? "check failed" : r.error);
    return line;
  }
  line += "\tok=1\tseconds=" + Number(r.seconds) + "\tops=" + Number(r.ops);
  if (r.ops > 0 && r.seconds > 0) line += "\tns_per_op=" + Number(r.seconds * 1e9 / r.ops);
  line += "\tpeak_rss=" + Number(static_cast<double>(peak));
  for (const auto& [name, value] : r.figures) {
    line += '\t';
    line += Clean(name);
    line += '=';
    line += Number(value);
  }
  return line;
}

// A whole number in [min, 2^53] written as 1000000 or 1e6; false when
// `text` is anything else (a typo, a fraction, a negative number), so that
// "ops=abc" is an error and not a run of 0 functions whose check passes.
bool ParseCount(const char* text, long long min, long long* out) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (*text == '\0' || *end != '\0' || !std::isfinite(v) || v != std::floor(v) ||
      v < static_cast<double>(min) || v > 9007199254740992.0) {
    return false;
  }
  *out = static_cast<long long>(v);
  return true;
}

// The job parameters some runtime reads, and the least value each takes:
// a misspelt name would otherwise be ignored and the default size run.
long long ParamMinimum(const std::string& name, bool* known) {
  *known = true;
  if (name == "T" || name == "seed") return 0;
  for (const char* size :
       {"ops", "vars", "rounds", "fan", "operators", "pushes", "n", "b", "min_ms"}) {
    if (name == size) return 1;
  }
  *known = false;
  return 0;
}

bool ParseArgs(int argc, char** argv, PeerOptions* o) {
  bool have_workload = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    long long count = 0;
    if (a == "--serve") {
      o->serve = true;
    } else if (a.rfind("--kind=", 0) == 0) {
      o->kind = a.substr(7);
    } else if (a.rfind("--threads=", 0) == 0) {
      if (!ParseCount(a.c_str() + 10, 1, &count) || count > 4096) {
        std::fprintf(stderr, "%s: expected a number of threads from 1 to 4096\n", a.c_str());
        return false;
      }
      o->threads = static_cast<int>(count);
    } else if (a.rfind("--reps=", 0) == 0) {
      if (!ParseCount(a.c_str() + 7, 1, &count) || count > 1000000) {
        std::fprintf(stderr, "%s: expected a number of repetitions from 1 to 1000000\n", a.c_str());
        return false;
      }
      o->reps = static_cast<int>(count);
    } else if (!have_workload && a.find('=') == std::string::npos && a.rfind("--", 0) != 0) {
      o->job.workload = a;
      have_workload = true;
    } else if (const auto eq = a.find('='); eq != std::string::npos && a.rfind("--", 0) != 0) {
      const std::string name = a.substr(0, eq);
      bool known = false;
      const long long min = ParamMinimum(name, &known);
      if (!known) {
        std::fprintf(stderr,
                     "unknown parameter: %s (expected ops, vars, rounds, fan, T, seed, operators, "
                     "pushes, n, b or min_ms)\n",
                     a.c_str());
        return false;
      }
      // Accept 1e6 and 1000000 alike.
      if (!ParseCount(a.c_str() + eq + 1, min, &count)) {
        std::fprintf(stderr, "%s: expected a whole number >= %lld\n", a.c_str(), min);
        return false;
      }
      o->job.params[name] = count;
    } else {
      std::fprintf(stderr, "unknown argument: %s\n", a.c_str());
      return false;
    }
  }
  if (!have_workload) {
    std::fprintf(stderr,
                 "usage: %s [--kind=K] [--threads=P] [--serve | --reps=R] WORKLOAD [name=value...]\n"
                 "  WORKLOAD: W1 W2 W3 W4 W5 W6 MEM (peers-blas: LIM_POTRF LIM_DGEMM)\n",
                 argv[0]);
    return false;
  }
  if (o->threads <= 0) o->threads = DefaultThreads();
  return true;
}

}  // namespace

int DefaultThreads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 2 : static_cast<int>(n);
}

long long Job::Get(const std::string& name, long long fallback) const {
  const auto it = params.find(name);
  return it == params.end() ? fallback : it->second;
}

std::string Job::ToString() const {
  std::string s = workload;
  for (const auto& [k, v] : params) s += " " + k + "=" + std::to_string(v);
  return s;
}

Stopwatch::Stopwatch()
    : start_ns_(std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count()) {}

double Stopwatch::Seconds() const {
  const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::steady_clock::now().time_since_epoch())
                               .count();
  return static_cast<double>(now - start_ns_) * 1e-9;
}

int PeerMain(int argc, char** argv, std::unique_ptr<Peer> (*make_peer)(const PeerOptions& options)) {
  PeerOptions options;
  if (!ParseArgs(argc, argv, &options)) return 2;
  if (options.serve) {
    // Die with the driver, even while stopped (SIGSTOP) between runs.
    const pid_t parent = getppid();
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) return 1;
  }

  std::unique_ptr<Peer> peer;
  std::unique_ptr<Runner> runner;
  std::string why;
  try {
    peer = make_peer(options);
    runner = peer->MakeRunner(options.job, &why);
  } catch (const std::exception& e) {
    why = std::string("setup failed: ") + e.what();
  }
  if (!runner) {
    PrintLine("@peer unsupported\treason=" + Clean(why.empty() ? "not implemented" : why));
    // Runtimes may still hold threads; leave without running their teardown
    // against a half-built state.
    runner.reset();
    peer.reset();
    return options.serve ? 0 : 1;
  }

  std::string hello = "@peer ready";
  for (const auto& [k, v] : peer->Describe()) {
    hello += '\t';
    hello += Clean(k);
    hello += '=';
    hello += Clean(v);
  }
  hello += "\tthreads=" + std::to_string(options.threads);
  hello += "\tjob=" + Clean(options.job.ToString());
  PrintLine(hello);

  if (options.serve) {
    std::string line;
    while (std::getline(std::cin, line)) {
      if (line == "run") {
        PrintLine(RunOnce(*runner));
      } else if (line == "quit") {
        break;
      } else {
        PrintLine("@peer error\treason=unknown request " + Clean(line));
      }
    }
  } else {
    std::fprintf(stderr, "warm-up...\n");
    PrintLine(RunOnce(*runner));
    for (int i = 0; i < options.reps; ++i) PrintLine(RunOnce(*runner));
  }
  runner.reset();
  peer.reset();
  return 0;
}

}  // namespace depengine::bench::peers
