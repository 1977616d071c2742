// depengine_workloads: the workloads of ../shared/WORKLOADS.md run on a
// depengine Engine, each timed and checked.
//
// Each Run* function builds its vars (and operators) untimed, times from just
// before the first push to the return of WaitForAll, checks the result
// against a serial run of the same program (workload_spec.h), then deletes
// what it built, untimed. An exception the engine raises while pushing,
// waiting or deleting becomes a failed check; one from NewVariable or
// NewOperator propagates. Call it from a thread that is not running a
// function of `engine`; the calling thread is the one that pushes.
//
// How the functions are pushed, the same in every workload:
// - a fresh closure per function, inside the timed region, capturing at most
//   16 trivially copyable bytes (a pointer and an index), which every
//   std::function implementation stores without allocating;
// - the var lists are filled per function into vectors reused across pushes
//   (the API takes them by const reference), so the harness allocates nothing
//   per push and the figure is the engine's own cost.
//
// Example:
//   depengine::EngineOptions options;
//   options.kind = depengine::EngineKind::kPooled;
//   auto engine = depengine::CreateEngine(options);
//   depengine::bench::WorkloadResult r = depengine::bench::RunChain(*engine, {});
//   if (r.ok) std::printf("%.1f ns/op\n", r.NanosPerOp());
#pragma once

#include <cstddef>
#include <string>

#include "depengine/engine.h"
#include "workloads/memory.h"
#include "workloads/workload_spec.h"

namespace depengine::bench {

// One timed, checked run of a workload.
struct WorkloadResult {
  bool ok = false;          // the result matched the serial run
  std::string check_error;  // why not, when !ok; then `seconds` means nothing
  double seconds = 0;       // first push to WaitForAll's return
  // The process's CPU time (user + system, every thread: the pusher, the
  // workers, their spinning) over the same region.
  double cpu_seconds = 0;
  std::size_t ops = 0;      // functions (W5: operator pushes) in the timed region
  std::size_t critical_path = 0;  // W4 only: DagCriticalPath of the program run

  double NanosPerOp() const { return ops == 0 ? 0 : seconds * 1e9 / static_cast<double>(ops); }
};

// W1 chain.
WorkloadResult RunChain(Engine& engine, const ChainParams& params);

// W2 parallel.
WorkloadResult RunParallel(Engine& engine, const ParallelParams& params);

// W3 fan.
WorkloadResult RunFan(Engine& engine, const FanParams& params);

// W4 random DAG. The DAG is drawn and its serial result computed outside the
// timed region; result.critical_path is its critical path.
WorkloadResult RunRandomDag(Engine& engine, const RandomDagParams& params);

// W4 on a DAG drawn already (MakeRandomDag), for callers that run it many
// times; `expected` is SerialRandomDag(dag).
WorkloadResult RunRandomDag(Engine& engine, const RandomDag& dag, int spin_us,
                            const std::vector<std::uint64_t>& expected);

// What W4's functions read and write: each closure holds a pointer to it
// and its function's index, so it must outlive the functions.
struct RandomDagState {
  const DagOp* ops;
  std::uint64_t* values;  // one per var
  int spin_us;
};

// Pushes W4's functions on `vars` (one per var of `dag`), in order; for
// runners that time the pushes their own way (RunRandomDag and
// RunRandomDagPushedAhead below, bench/experiments/w4_pusher_share.cc).
void PushRandomDag(Engine& engine, const RandomDag& dag, const std::vector<VarHandle>& vars,
                   const RandomDagState* state);

// W4 with every function pushed before the clock starts: an async function
// that writes every var holds them while all of `dag` is pushed, and the
// timed region runs from its release to WaitForAll's return. What it
// leaves out of the wall is the pushing and what the pusher's lines cost the
// workers while they run; RunRandomDag's wall over this one is that share.
// A diagnostic beside the workload (WORKLOADS.md times from the first push),
// checked like RunRandomDag, and also failed when a function ran before the
// release.
WorkloadResult RunRandomDagPushedAhead(Engine& engine, const RandomDag& dag, int spin_us,
                                       const std::vector<std::uint64_t>& expected);

// W4's bodies alone: the same functions' bodies (spin `spin_us`, then the
// mix) on `threads` plain threads, thread t running functions t, t + threads,
// ..., with no engine and no order between them. Returns the wall seconds
// from releasing the threads to the last one's end: what this machine lets
// any engine reach on the workload (the rest of an engine's wall is its own
// cost and the order it must keep). The values are scratch (the functions
// race on them, through relaxed atomics) and not checked.
double RunRandomDagBodiesOnly(const RandomDag& dag, int spin_us, int threads);

// W4's efficiency: the ideal wall (ops * T / workers) over the measured one.
inline double RandomDagEfficiency(const WorkloadResult& r, int spin_us, int workers) {
  if (r.seconds <= 0 || workers <= 0) return 0;
  return static_cast<double>(r.ops) * spin_us * 1e-6 / workers / r.seconds;
}

// W5 operator reuse: NewOperator once per operator (untimed), then Push.
WorkloadResult RunOperatorReuse(Engine& engine, const OperatorReuseParams& params);

// The memory a pending function costs on `engine`.
struct PendingMemoryResult {
  bool ok = false;          // every pending function ran once released
  std::string check_error;  // why not, when !ok
  std::size_t ops = 0;      // functions pending at once
  long long rss_growth_bytes = 0;  // resident set after pushing them minus before

  double BytesPerOp() const {
    return ops == 0 ? 0 : static_cast<double>(rss_growth_bytes) / static_cast<double>(ops);
  }
};

// Pushes an async function that holds one var, waits until it runs, reads
// the resident set, pushes params.ops functions mutating that var (all
// pending), reads the resident set again, then releases the var and waits
// for all of them.
// Call it in a fresh process, before anything else pushes: the engine's
// object pools and malloc keep freed memory for reuse, so memory a previous
// workload freed would be reused and not counted. `engine` must not bound
// in-flight functions below params.ops (EngineOptions::max_in_flight), or
// the pushes would wait for a var that only this thread can release.
PendingMemoryResult MeasurePendingOpMemory(Engine& engine, const PendingMemoryParams& params);

}  // namespace depengine::bench
