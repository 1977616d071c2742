// Finishing an async GPU function when its stream's work is done.
#pragma once

#include "depengine/engine.h"

namespace depengine {

// Call from an async function on a GPU, after queuing its work on
// `rctx.stream`: `done` is called once everything queued on that stream so
// far has run, with a std::runtime_error naming the CUDA error if the stream
// reported one (a kernel's fault, say), which fails the function's vars.
//
// `done` is called on a thread of depengine's own, never on CUDA's callback
// thread: the engine may run successors on the thread that calls `done`
// (the naive engine always, kAsync functions on any engine), and those may
// call CUDA, which CUDA forbids on its callback thread. Returns at once.
// With no stream (a CPU function, or a simulated GPU), calls `done` now.
// Throws std::runtime_error, without calling `done`, when CUDA refuses the
// stream callback: thrown out of the function's body, it fails the function.
void CompleteWhenStreamDone(const RunContext& rctx, CallbackOnComplete done);

}  // namespace depengine
