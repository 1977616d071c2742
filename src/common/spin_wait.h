// SpinUntil: waits for a condition by spinning, for at most a short time,
// before the caller blocks. A blocked thread costs a system call to wake and
// then the scheduler's latency (1-20 us on the 2-vCPU VMs this was measured
// on); a wait for a function that is about to finish is shorter than that.
#pragma once

#include <chrono>
#include <thread>

#include "common/mutex.h"

namespace depengine::internal {

// How long a waiter spins before it blocks: about the cost of blocking and
// being woken, so that a wait that blocks after all wastes at most as much
// again (docs/design.md, "Waiting: spin, then block").
inline constexpr std::chrono::nanoseconds kWaitSpin{20'000};

// Spins until pred() is true (returns true) or `budget` has passed (returns
// false). pred() is called every few pauses and must be cheap: a load.
template <class Pred>
bool SpinUntil(Pred pred, std::chrono::nanoseconds budget = kWaitSpin) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (int round = 1;; ++round) {
    for (int i = 0; i < 32; ++i) {
      if (pred()) return true;
      SpinLock::Pause();
    }
    if (std::chrono::steady_clock::now() >= deadline) return pred();
    // With more threads than cores, the thread this one waits for may need
    // this core.
    if (round % 8 == 0) std::this_thread::yield();
  }
}

}  // namespace depengine::internal
