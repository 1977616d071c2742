// What the files of ThreadedEngine's implementation share (threaded_engine.cc,
// threaded_engine_lifetime.cc, threaded_engine_checks.cc,
// threaded_engine_waits.cc). Private to those files; they are compiled as one
// unity group with the tracker and the ready queue (src/CMakeLists.txt).
#pragma once

#include <string>

#include "common/object_pool.h"
#include "tracker/opr_block.h"
#include "tracker/var.h"

namespace depengine::internal {

// -DDEPENGINE_PROFILER=OFF compiles the recording out, to measure what the
// hooks cost when profiling is off (an A/B against the default build).
#ifdef DEPENGINE_NO_PROFILER
constexpr bool kProfilerBuilt = false;
#else
constexpr bool kProfilerBuilt = true;
#endif

// Vars and operators of every engine come from one pool each.
using VarPool = ObjectPool<Var>;
using OprPool = ObjectPool<Opr>;

// `call`'s name before the problem: the form of every error message.
inline std::string Named(const char* call, const std::string& what) {
  return std::string(call) + ": " + what;
}

}  // namespace depengine::internal
