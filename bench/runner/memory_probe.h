// Memory figures, each measured in a fresh child process of depengine-bench.
//
// Why a child: peak RSS only grows over a process's life, and the engine's
// object pools and malloc keep freed memory for reuse, so in the parent a
// workload would inherit the memory of every run before it and the pending-op
// figure would read close to zero. The child runs one case once on one engine
// and reports its figures on stdout.
#pragma once

#include <cstddef>
#include <string>

#include "depengine/engine.h"
#include "runner/bench_options.h"

namespace depengine::bench {

struct MemoryFigures {
  bool ok = false;
  std::string error;               // why not, when !ok
  std::size_t peak_rss_bytes = 0;  // the child's peak resident set (VmHWM)
  double bytes_per_pending_op = 0; // the MEM case only
};

// Runs case `case_id` (or kPendingMemoryId) once on `kind` in a child
// process: this executable with --probe, the same workers and n-scale.
MemoryFigures ProbeInChild(const std::string& case_id, EngineKind kind, const BenchOptions& options);

// The child's side: runs options.probe_case once on options.engines[0] and
// prints one result line for ProbeInChild. Returns the exit status.
int RunProbe(const BenchOptions& options);

}  // namespace depengine::bench
