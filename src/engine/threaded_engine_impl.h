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

// The engine's lists of live vars and of live operators are intrusive,
// through each object's live_prev and live_next; the caller holds the
// engine's live_mu_, which guards both.
template <class T>
void LinkLive(T* x, T*& head) {
  x->live_prev = nullptr;
  x->live_next = head;
  if (head != nullptr) head->live_prev = x;
  head = x;
}
template <class T>
void UnlinkLive(T* x, T*& head) {
  if (x->live_prev != nullptr) x->live_prev->live_next = x->live_next;
  if (x->live_next != nullptr) x->live_next->live_prev = x->live_prev;
  if (head == x) head = x->live_next;
}

// `call`'s name before the problem: the form of every error message.
inline std::string Named(const char* call, const std::string& what) {
  return std::string(call) + ": " + what;
}

}  // namespace depengine::internal
