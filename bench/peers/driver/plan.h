// What depengine-peers runs: the engines, and the jobs (a workload at one
// size) each engine runs, in order.
#pragma once

#include <string>
#include <vector>

namespace depengine::bench::peers {

// An engine: one peer executable (with its arguments) per engine.
struct Engine {
  std::string name;     // "depengine-perdevice", "omp-gcc", "starpu", ...
  std::string label;    // column title: "depengine per-device"
  std::string exe;      // executable's file name, found next to depengine-peers
  std::vector<std::string> args;  // before the workload: "--kind=pooled"
  bool depengine = false;  // one of depengine's engine kinds
  bool limit = false;      // a W6 limit (peers-blas), not an engine
};

// The engine every ratio is taken against: depengine's per-device engine
// (issue 2's configuration).
inline constexpr const char* kReferenceEngine = "depengine-perdevice";

// One engine's part in a job.
struct Participant {
  std::string engine;                 // Engine::name
  std::string workload;               // what the peer runs: "W1", "LIM_POTRF", ...
  std::vector<std::string> params;    // "ops=1000000", ...
  // The row of the tables it reports into: "" for the job's own, else the
  // id of one of JobSpec::extra_rows.
  std::string row;
};

// A workload at one size, run by several engines, interleaved.
struct JobSpec {
  std::string id;        // "W1", "W4.T10", "W6.b128", "scale.W1.1e7"
  std::string group;     // "table", "w6", "memory", "scale"
  std::string title;     // "W1 chain"
  std::string params;    // "N = 1,000,000", for the tables
  std::string figure;    // result field compared: ns_per_op, efficiency, gflops, bytes_per_op
  bool higher_is_better = false;
  std::string series;    // scaling curve this point belongs to ("W1", "W2"), or ""
  double x = 0;          // its x on that curve (N or K)
  double ops = 0;        // functions per run, to estimate a run's time from ns/op
  int warmup = 1;
  int reps = 5;
  bool fresh_process_per_rep = false;  // MEM: a new process per repetition, no warm-up
  std::string target;    // issue 4's target for depengine / best peer, as text
  std::vector<Participant> participants;
  // Rows measured in the same interleaving as this job's: only depengine
  // runs a different program for them (W5's prebuilt operators); every other
  // engine's figure is its run of this job's program, which for a peer is
  // the same program (no peer has an operator to push again: OpenMP and
  // oneTBB push a task, StarPU inserts a task of a prebuilt codelet). Their
  // participants are those in `participants` with `row` set to their id.
  std::vector<JobSpec> extra_rows;
};

struct PlanOptions {
  int reps = 5;
  int warmup = 1;
  int mem_reps = 3;
  double scale = 1.0;  // multiplies every size (--quick: 0.01)
  std::vector<std::string> groups = {"table", "w6", "memory", "scale"};
  std::vector<std::string> only;  // job ids or workloads; empty: all
};

// Every engine depengine-peers knows, in column order.
std::vector<Engine> AllEngines();

// The jobs, in the order they run, for the engines in `engines` (the ones
// that were built).
std::vector<JobSpec> MakePlan(const PlanOptions& options, const std::vector<Engine>& engines);

}  // namespace depengine::bench::peers
