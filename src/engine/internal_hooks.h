// Engine hooks for depengine_ops (src/operators): what the operator layer
// needs to know from, or ask of, the engine beyond the public API. Not
// installed, not part of the public interface.
#pragma once

#include <cstdint>
#include <vector>

#include "depengine/engine.h"

namespace depengine::internal {

// The function body the calling thread is running: 0 when the thread is not
// inside the body of a function run by an engine (engines built by
// CreateEngine), else a value unique to this execution of the body, the same
// for every call made during it (including after a function of another
// engine ran nested inside it, on the same thread). A body run again (a
// prebuilt operator pushed again) gets a new value. Costs a thread-local
// load or two.
std::uint64_t RunningFunctionId();

// Marks `var`, a var of `engine`, as guarding scratch state (a random
// generator, temporary space) rather than a result: a function that fails
// while writing it does not mark it failed, so later users of the var are
// not skipped (the failure still reaches the function's other written vars
// and WaitForAll). Call it before the var's first push. No effect on an
// engine not built by CreateEngine; std::invalid_argument for a null,
// deleted or foreign var.
void MarkScratchVar(Engine* engine, VarHandle var);

// Whether some var of `engine` may hold a failure (an upper bound: false
// means none does). One atomic load; false for an engine not built by
// CreateEngine.
bool MayHaveFailedVars(Engine* engine);

// Pushes a function on `ctx` that writes `vars`, is never skipped for a
// failed var, and clears the failure of each of them when it runs: after
// every earlier function that uses them, before every later one. What it
// clears is neither delivered nor dropped from the engine's log, so
// WaitForAll still rethrows a failure that no WaitForVar delivered. For
// vars no caller can wait on (the operator layer's internal buffers), so
// that a failure that was passed on to the arrays the user sees does not
// also stay behind in them for ever. Validates like PushSync; no effect on
// an engine not built by CreateEngine.
void PushClearFailures(Engine* engine, Context ctx, const std::vector<VarHandle>& vars);

}  // namespace depengine::internal
