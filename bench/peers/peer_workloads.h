// What every peer runner shares about W1-W5 and MEM: reading the sizes from
// the driver's job, W4's precomputed program, the checks, and the figures.
// The programs themselves come from workloads/workload_spec.h, the same
// definitions depengine's runner uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/counter_array.h"
#include "peer_server.h"
#include "workloads/workload_spec.h"

namespace depengine::bench::peers {

// Sizes from a job ("ops=", "vars=", ...), WORKLOADS.md's where not given.
ChainParams ChainFromJob(const Job& job);                  // W1: ops
ParallelParams ParallelFromJob(const Job& job);            // W2: vars, ops
FanParams FanFromJob(const Job& job);                      // W3: rounds, fan
RandomDagParams DagFromJob(const Job& job);                // W4: vars, ops, T, seed
OperatorReuseParams ReuseFromJob(const Job& job);          // W5: operators, pushes
PendingMemoryParams PendingFromJob(const Job& job);        // MEM: ops

// Whether the job's sizes make sense; sets *why when not.
bool ValidJob(const Job& job, std::string* why);

// W4's program, drawn once per process (outside every timed region), with
// the serial run's answer and its critical path.
struct PreparedDag {
  explicit PreparedDag(const RandomDagParams& params);
  RandomDagParams params;
  RandomDag dag;
  std::vector<std::uint64_t> expected;
  std::size_t critical_path = 0;
};

// W4's figures beside seconds: efficiency = (N T / P) / wall when T > 0, the
// critical path, and the best efficiency the critical path allows.
void AddDagFigures(RunResult& r, const PreparedDag& dag, int threads);

// The checks. Each returns "" when the values are right, else what is wrong.
std::string CheckCounter(const char* workload, std::uint64_t counter, std::uint64_t expected);
// W2 and W5: count[k] must be the number of ops that mutate var k when
// `ops` ops go round robin over count.size() vars.
std::string CheckRoundRobin(const char* workload, const CounterArray& count, std::size_t ops);
std::string CheckFan(std::uint64_t x, const std::vector<std::uint64_t>& ys, const FanValues& expected);
std::string CheckDag(const std::vector<std::uint64_t>& values, const std::vector<std::uint64_t>& expected);

// A finished run: ok with `seconds` and `ops` when `error` is "", else failed.
RunResult Finish(const std::string& error, double seconds, double ops);

// MEM's figure from the resident set before and after pushing `ops` pending
// functions.
RunResult FinishPending(const std::string& error, std::size_t rss_before, std::size_t rss_after,
                        std::size_t ops);

}  // namespace depengine::bench::peers
