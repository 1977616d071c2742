#include "runner/bench_options.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace depengine::bench {
namespace {

std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

long ParseInt(const std::string& flag, const std::string& value, long min) {
  char* end = nullptr;
  const long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || v < min) {
    throw std::invalid_argument(flag + "=" + value + ": expected an integer >= " + std::to_string(min));
  }
  return v;
}

EngineKind ParseEngine(const std::string& name) {
  if (name == "naive" || name == "NaiveEngine") return EngineKind::kNaive;
  if (name == "pooled" || name == "ThreadedEnginePooled" || name == "ThreadedEngine") {
    return EngineKind::kPooled;
  }
  if (name == "per-device" || name == "ThreadedEnginePerDevice") return EngineKind::kPerDevice;
  throw std::invalid_argument("--engines: unknown engine '" + name +
                              "': expected naive, pooled or per-device");
}

}  // namespace

const char* EngineFlagName(EngineKind kind) {
  switch (kind) {
    case EngineKind::kNaive:
      return "naive";
    case EngineKind::kPooled:
      return "pooled";
    case EngineKind::kPerDevice:
      return "per-device";
  }
  return "unknown";
}

bool BenchOptions::Selected(const std::string& case_id, const std::string& workload) const {
  if (only.empty()) return true;
  return std::any_of(only.begin(), only.end(),
                     [&](const std::string& s) { return s == case_id || s == workload; });
}

BenchOptions ParseBenchOptions(int argc, char** argv) {
  BenchOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::size_t eq = arg.find('=');
    const std::string flag = arg.substr(0, eq);
    const std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (flag == "--help" || flag == "-h") {
      o.help = true;
    } else if (flag == "--workers") {
      o.workers = static_cast<int>(ParseInt(flag, value, 1));
    } else if (flag == "--reps") {
      o.reps = static_cast<int>(ParseInt(flag, value, 1));
    } else if (flag == "--n-scale") {
      char* end = nullptr;
      o.n_scale = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !(o.n_scale > 0)) {
        throw std::invalid_argument("--n-scale=" + value + ": expected a number > 0");
      }
    } else if (flag == "--only") {
      o.only = SplitCommas(value);
    } else if (flag == "--engines") {
      o.engines.clear();
      for (const std::string& name : SplitCommas(value)) o.engines.push_back(ParseEngine(name));
      if (o.engines.empty()) throw std::invalid_argument("--engines: name at least one engine");
    } else if (flag == "--json") {
      if (value.empty()) throw std::invalid_argument("--json: expected a path");
      o.json_path = value;
    } else if (flag == "--run-timeout") {
      o.run_timeout_s = static_cast<int>(ParseInt(flag, value, 1));
    } else if (flag == "--profile") {
      if (value.empty()) throw std::invalid_argument("--profile: expected a directory");
      o.profile_dir = value;
    } else if (flag == "--no-memory") {
      o.memory = false;
    } else if (flag == "--probe") {
      o.probe_case = value;
    } else {
      throw std::invalid_argument("unknown flag '" + arg + "' (see --help)");
    }
  }
  if (o.workers == 0) o.workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return o;
}

std::string BenchUsage() {
  return R"(depengine-bench: runs the workloads W1-W5 of WORKLOADS.md on each depengine
engine kind, checks every result and prints a Markdown table.

Flags:
  --workers=N      CPU worker threads per engine (default: every core)
  --reps=N         timed repetitions after one warm-up (default 5); the
                   engines' repetitions are interleaved (A B C A B C ...)
  --only=IDS       comma-separated workloads (W1,W2,W3,W4,W5,BP,MEM) or cases
                   (W4.T0,W4.T1,W4.T10,W5.x1,W5.x4096,BP.W1,BP.W2)
  --engines=LIST   comma-separated: naive,pooled,per-device (default: all)
  --n-scale=X      multiply every workload's size by X (e.g. 0.01 to try it out)
  --json=PATH      also write the results as JSON
  --no-memory      skip the memory figures (peak RSS, bytes per pending op),
                   which run each case once more in a fresh child process
  --profile=DIR    instead of timing, run each selected case once per engine
                   at a size small enough to read (n-scale x 0.002) with the
                   profiler on, and write DIR/<case>.<engine>.trace.json
                   (open in ui.perfetto.dev), .stats.md, .stats.json and
                   .graph.dot (render: dot -Tsvg FILE -o FILE.svg)
  --run-timeout=S  fail (exit 1) when one run takes longer than S seconds,
                   e.g. an engine that hangs (default 300)
Exit status: 0 when every check passed, 1 when one failed, 2 on bad flags.
)";
}

}  // namespace depengine::bench
