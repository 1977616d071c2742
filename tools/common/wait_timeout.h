// kWaitTimeout: how long a bounded wait in a test or stress program waits
// before it reports failure. Generous, since sanitizer builds run ~10x
// slower on a busy 2-core machine. Its own header so that tests of internal
// pieces (the task queue) need not include the engine's.
#pragma once

#include <chrono>

namespace depengine::support {

inline constexpr std::chrono::milliseconds kWaitTimeout{20'000};

}  // namespace depengine::support
