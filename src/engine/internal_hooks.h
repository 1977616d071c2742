// Engine hooks for depengine_ops (src/operators): what the operator layer
// needs to know from, or ask of, the engine beyond the public API. Not
// installed, not part of the public interface.
#pragma once

#include <cstdint>

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

}  // namespace depengine::internal
