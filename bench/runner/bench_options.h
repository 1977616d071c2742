// The command line of depengine-bench.
#pragma once

#include <string>
#include <vector>

#include "depengine/engine.h"

namespace depengine::bench {

struct BenchOptions {
  int workers = 0;         // CPU worker threads per engine; 0 = every core
  int reps = 5;            // timed repetitions, after one warm-up
  double n_scale = 1.0;    // multiplies every workload's size (W2 stays a multiple of K)
  std::vector<std::string> only;  // case ids or workload ids (W1..W5, MEM); empty = all
  std::vector<EngineKind> engines = {EngineKind::kNaive, EngineKind::kPooled,
                                     EngineKind::kPerDevice};
  std::string json_path;   // also write the results here, when set
  std::string profile_dir; // --profile: write traces, stats and graphs here instead of timing
  bool memory = true;      // measure peak RSS and bytes per pending op (child processes)
  bool pushed_ahead = false;  // W4 with T > 0 also with every function pushed first
  int run_timeout_s = 300; // a run taking longer is reported as a hang (see watchdog.h)
  bool help = false;

  // Internal: run one case once on engines[0] in this (fresh) process and
  // print its memory figures for the parent (see memory_probe.h).
  std::string probe_case;

  // Whether a case with this id and workload is selected by --only.
  bool Selected(const std::string& case_id, const std::string& workload) const;
};

// The largest --n-scale: every size times it stays far below 2^53, so that
// llround gives it exactly.
inline constexpr double kMaxNScale = 1e9;

// Parses argv. Raises std::invalid_argument naming the bad flag: an unknown
// flag; a value out of range (an integer flag outside [its minimum,
// INT_MAX], --n-scale not in (0, kMaxNScale]); an --only entry that is no
// workload or case id (BenchCaseNames); an empty --only or --engines; an
// engine named twice; a value given to --help, --no-memory or --pushed-ahead; --only=MEM
// (alone) with --no-memory or --profile, which would select nothing.
BenchOptions ParseBenchOptions(int argc, char** argv);

// The --help text.
std::string BenchUsage();

// "naive", "pooled" or "per-device", as --engines spells them.
const char* EngineFlagName(EngineKind kind);

}  // namespace depengine::bench
