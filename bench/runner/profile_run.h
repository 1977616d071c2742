// depengine-bench --profile=DIR: one small, profiled run of each selected
// case on each selected engine, written as a trace, statistics and a graph.
#pragma once

#include <ostream>

#include "runner/bench_options.h"

namespace depengine::bench {

// Returns the process exit status (0 when every run passed its check).
int RunProfiled(const BenchOptions& options, std::ostream& out);

}  // namespace depengine::bench
