// The measurement loop of depengine-bench.
#pragma once

#include <ostream>
#include <vector>

#include "runner/bench_options.h"
#include "runner/report.h"

namespace depengine::bench {

// Runs every selected case on every selected engine: one warm-up round, then
// options.reps timed rounds, each round running the engines one after the
// other (A B C A B C ...) so that drift of the machine hits all alike. Every
// run gets a fresh engine, made and destroyed outside the timed region, so no
// engine's idle workers compete with another's. A failed check ends that
// engine's runs of the case. Then, when options.memory, each (case, engine)
// once more in a child process for its memory figures, and the MEM rows.
// Writes progress to `progress`; returns one row per (case, engine).
std::vector<ReportRow> RunInterleaved(const BenchOptions& options, std::ostream& progress);

}  // namespace depengine::bench
