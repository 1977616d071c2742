#include "runner/bench_options.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "runner/cases.h"

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

// An int in [min, INT_MAX]: a value strtol cannot hold, or one that does
// not fit an int, is rejected rather than wrapped (--reps=4294967297 would
// otherwise run once, and --reps=3000000000 not at all).
int ParseInt(const std::string& flag, const std::string& value, int min) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno == ERANGE || v < min ||
      v > std::numeric_limits<int>::max()) {
    throw std::invalid_argument(flag + "=" + value + ": expected an integer from " +
                                std::to_string(min) + " to " +
                                std::to_string(std::numeric_limits<int>::max()));
  }
  return static_cast<int>(v);
}

// A flag that takes no value must not be given one.
void NoValue(const std::string& flag, std::size_t eq) {
  if (eq != std::string::npos) throw std::invalid_argument(flag + " takes no value");
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
      NoValue(flag, eq);
      o.help = true;
    } else if (flag == "--workers") {
      o.workers = ParseInt(flag, value, 1);
    } else if (flag == "--reps") {
      o.reps = ParseInt(flag, value, 1);
    } else if (flag == "--n-scale") {
      char* end = nullptr;
      o.n_scale = std::strtod(value.c_str(), &end);
      // Every size is llround(size * X): X must keep it finite and
      // representable (inf or 1e300 would make the sizes undefined).
      if (value.empty() || *end != '\0' || !std::isfinite(o.n_scale) || !(o.n_scale > 0) ||
          o.n_scale > kMaxNScale) {
        throw std::invalid_argument("--n-scale=" + value +
                                    ": expected a number > 0 and at most 1e9");
      }
    } else if (flag == "--only") {
      o.only = SplitCommas(value);
      if (o.only.empty()) {
        throw std::invalid_argument("--only: name at least one workload or case (see --help)");
      }
      const std::vector<std::string>& known = BenchCaseNames();
      for (const std::string& id : o.only) {
        if (std::find(known.begin(), known.end(), id) == known.end()) {
          throw std::invalid_argument("--only: unknown workload or case '" + id + "' (see --help)");
        }
      }
    } else if (flag == "--engines") {
      o.engines.clear();
      for (const std::string& name : SplitCommas(value)) {
        const EngineKind kind = ParseEngine(name);
        if (std::find(o.engines.begin(), o.engines.end(), kind) != o.engines.end()) {
          throw std::invalid_argument("--engines: '" + name + "' names an engine already listed");
        }
        o.engines.push_back(kind);
      }
      if (o.engines.empty()) throw std::invalid_argument("--engines: name at least one engine");
    } else if (flag == "--json") {
      if (value.empty()) throw std::invalid_argument("--json: expected a path");
      o.json_path = value;
    } else if (flag == "--run-timeout") {
      o.run_timeout_s = ParseInt(flag, value, 1);
    } else if (flag == "--profile") {
      if (value.empty()) throw std::invalid_argument("--profile: expected a directory");
      o.profile_dir = value;
    } else if (flag == "--no-memory") {
      NoValue(flag, eq);
      o.memory = false;
    } else if (flag == "--pushed-ahead") {
      NoValue(flag, eq);
      o.pushed_ahead = true;
    } else if (flag == "--probe") {
      o.probe_case = value;
    } else {
      throw std::invalid_argument("unknown flag '" + arg + "' (see --help)");
    }
  }
  // MEM is a memory figure: with --no-memory, or with --profile (which
  // profiles the timed cases), an --only that names nothing else would run
  // nothing and pass.
  if (!o.only.empty() && std::all_of(o.only.begin(), o.only.end(), [](const std::string& id) {
        return id == kPendingMemoryId;
      })) {
    if (!o.memory) throw std::invalid_argument("--only=MEM with --no-memory selects nothing");
    if (!o.profile_dir.empty()) {
      throw std::invalid_argument(
          "--only=MEM with --profile selects nothing (MEM is not profiled)");
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
  --n-scale=X      multiply every workload's size by X, 0 < X <= 1e9 (e.g. 0.01
                   to try it out)
  --json=PATH      also write the results as JSON
  --no-memory      skip the memory figures (peak RSS, bytes per pending op),
                   which run each case once more in a fresh child process
  --pushed-ahead   W4 with T > 0: also run each engine with every function
                   pushed before the clock starts (behind an async function
                   that holds every var, released when the clock starts):
                   the gap to the engine's own row is the pusher's share
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
