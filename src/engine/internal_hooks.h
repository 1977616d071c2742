// Engine hooks for depengine_ops (src/operators): what the operator layer
// needs to know from, or ask of, the engine beyond the public API. Not
// installed, not part of the public interface.
#pragma once

#include <cstdint>

namespace depengine::internal {

// The function body the calling thread is running: 0 when the thread is not
// inside the body of a function run by an engine (engines built by
// CreateEngine), else a value unique to this execution of the body, the same
// for every call made during it (including after a function of another
// engine ran nested inside it, on the same thread). A body run again (a
// prebuilt operator pushed again) gets a new value. Costs a thread-local
// load or two.
std::uint64_t RunningFunctionId();

}  // namespace depengine::internal
