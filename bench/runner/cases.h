// The rows of depengine-bench's table: each workload of WORKLOADS.md at its
// sizes, ready to run on any engine.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "workloads/workloads.h"

namespace depengine::bench {

// One workload at fixed sizes. Cases share nothing mutable: `run` may be
// called any number of times, on any engine.
struct BenchCase {
  std::string id;        // "W4.T10": what --only and --probe name
  std::string workload;  // "W4": what --only also accepts
  std::string title;     // "W4 random DAG, T=10 us"
  std::size_t ops = 0;   // functions (W5: pushes) per run
  int spin_us = 0;       // W4's T; efficiency is reported when > 0
  std::size_t critical_path = 0;  // W4 only
  std::size_t max_in_flight = 0;  // EngineOptions::max_in_flight of the engines it runs on
  std::function<WorkloadResult(Engine&)> run;
  // W4 with T > 0: the bodies alone on this many threads, no engine
  // (RunRandomDagBodiesOnly); returns wall seconds. Empty for other cases.
  std::function<double(int threads)> bodies_only;
  // W4 with T > 0: the same run with every function pushed before the clock
  // starts (RunRandomDagPushedAhead), for --pushed-ahead. Empty otherwise.
  std::function<WorkloadResult(Engine&)> pushed_ahead;
};

// The engine column of the bodies_only row.
inline constexpr const char* kBodiesOnlyEngine = "bodies alone, no engine";

// Appended to the engine column of a pushed_ahead row.
inline constexpr const char* kPushedAheadSuffix = ", pushed ahead";

// Whether a case is wanted, by id and workload (BenchOptions::Selected).
using CaseFilter = std::function<bool(const std::string& id, const std::string& workload)>;

// The wanted cases among W1, W2, W3, W4 (T = 0, 1, 10) and W5 (1 and 4,096
// operators), and BP: W1 and W2 again on engines with max_in_flight =
// kBoundedInFlight (what backpressure costs, and the memory it saves).
// Every size is multiplied by n_scale (W2's ops stay a multiple of its
// vars). Only wanted cases are built (W4's DAGs take memory).
std::vector<BenchCase> MakeBenchCases(double n_scale, const CaseFilter& wanted);

inline constexpr std::size_t kBoundedInFlight = 1024;

// Every name --only accepts: each case id MakeBenchCases makes (W1, W4.T10,
// W5.x4096, BP.W1, ...), each workload (W1-W5, BP) and kPendingMemoryId.
const std::vector<std::string>& BenchCaseNames();

// The memory row: functions pending at once behind one blocked var.
inline constexpr const char* kPendingMemoryId = "MEM";
PendingMemoryParams PendingMemorySize(double n_scale);

}  // namespace depengine::bench
