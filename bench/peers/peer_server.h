// The process every peer runner is: one runtime (depengine, OpenMP, StarPU,
// oneTBB, or the BLAS limits), one workload, run on request.
//
// depengine-peers (driver.cc) starts one such process per engine and job and
// talks to it over a pipe, one line each way:
//
//   peer  -> driver   "@peer ready\tengine=tbb\truntime=oneTBB 2021.8\t..."
//   driver -> peer    "run"
//   peer  -> driver   "@peer result\tok=1\tseconds=0.21\tops=1000000\t..."
//   driver -> peer    "quit" (or end of input)
//
// A runtime that cannot run the job answers "@peer unsupported\treason=..."
// instead of "ready". A run whose check fails answers "ok=0\terror=..." and
// no figure: the driver then reports nothing for it.
//
// Without --serve the process runs the job itself (1 warm-up, then --reps
// timed runs) and prints one result line per run: handy for a quick look,
//   peers-tbb W1 ops=10000
// Parameters are whole numbers (1000000 or 1e6) with known names: ops,
// vars, rounds, fan, operators, pushes, n, b, min_ms (each >= 1), T and seed
// (>= 0); --threads is 1 to 4096, --reps 1 to 10^6. Anything else is
// rejected with a message and exit status 2.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace depengine::bench::peers {

// The workers every runtime gets unless --threads says otherwise: this
// machine's cores (2 on the machine the figures were taken on).
int DefaultThreads();

// A workload as the driver names it: "W1" .. "W6", "MEM", or a limit
// ("LIM_POTRF", "LIM_DGEMM"), and its integer parameters ("ops=1000000").
struct Job {
  std::string workload;
  std::map<std::string, long long> params;

  // The parameter `name`, or `fallback` when the driver did not give it.
  long long Get(const std::string& name, long long fallback) const;
  // "W1 ops=1000000".
  std::string ToString() const;
};

// How the process was started.
struct PeerOptions {
  std::string kind;   // --kind=...: which variant of the runtime (depengine: naive|pooled|perdevice)
  int threads = 0;    // --threads=...: worker threads (DefaultThreads() when 0)
  bool serve = false; // --serve: answer the driver's requests on stdin
  int reps = 5;       // without --serve: timed runs after one warm-up
  Job job;
};

// One timed run. `seconds` covers the timed region only: from just before
// the first push to the return of the runtime's wait-for-all.
struct RunResult {
  bool ok = false;
  std::string error;  // why the check failed, when !ok
  double seconds = 0;
  double ops = 0;     // functions in the timed region
  // Figures beyond seconds and ops, by name: "efficiency", "gflops",
  // "bytes_per_op", "critical_path", ...
  std::vector<std::pair<std::string, double>> figures;

  void Add(std::string name, double value) { figures.emplace_back(std::move(name), value); }
  static RunResult Failed(std::string why) {
    RunResult r;
    r.error = std::move(why);
    return r;
  }
};

// One job on one runtime. The constructor does what a program would do once
// up front (create vars, draw W4's DAG, build the matrix); Run() does one
// timed, checked repetition and may be called any number of times.
class Runner {
 public:
  virtual ~Runner() = default;
  virtual RunResult Run() = 0;
};

// One runtime, started once per process.
class Peer {
 public:
  virtual ~Peer() = default;
  // What the driver prints about this runtime, as (key, value) pairs:
  // "engine" (the short name: "tbb"), "runtime" (name and version),
  // "detail" (how the workloads use it), and anything else worth recording
  // ("scheduler" for StarPU).
  virtual std::vector<std::pair<std::string, std::string>> Describe() const = 0;
  // A runner for `job`, or nullptr with `*why` set when this runtime has no
  // implementation of it.
  virtual std::unique_ptr<Runner> MakeRunner(const Job& job, std::string* why) = 0;
};

// Parses the command line, builds the peer with `make_peer`, and serves or
// runs the job. The return value is the process's exit status.
int PeerMain(int argc, char** argv,
             std::unique_ptr<Peer> (*make_peer)(const PeerOptions& options));

// Stopwatch on the steady clock, for the timed regions.
class Stopwatch {
 public:
  Stopwatch();
  double Seconds() const;

 private:
  std::int64_t start_ns_;
};

}  // namespace depengine::bench::peers
