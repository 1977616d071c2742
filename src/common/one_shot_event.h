// OneShotEvent: one thread waits until another sets the event, once. The
// waiter spins for a short while before it blocks, because the waits this
// serves (WaitForVar on a function that is about to finish) are often
// shorter than waking a blocked thread takes; Set() then makes no system
// call. The waiter may destroy the event as soon as Wait() returns: Set()
// touches the event after the waiter can have seen it set only through the
// mutex, which the waiter must take again before it returns.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "common/spin_wait.h"

namespace depengine::internal {

class OneShotEvent {
 public:
  // Wakes the waiter; what this thread wrote before is visible to it after
  // Wait() returns. At most once.
  void Set() {
    int expected = kPending;
    // release: pairs with Wait()'s acquire loads. If the waiter is still
    // spinning (or about to lock mu_ and find the state moved), nothing
    // else is needed.
    if (state_.compare_exchange_strong(expected, kSet, std::memory_order_release,
                                       std::memory_order_relaxed)) {
      return;
    }
    // kSleeping: the waiter stored it under mu_ and waits on cv_, or is
    // about to; it returns only after it takes mu_ again and sees kSet.
    std::lock_guard<std::mutex> lock(mu_);
    state_.store(kSet, std::memory_order_release);
    cv_.notify_one();  // under the lock: the waiter cannot vanish first
  }

  // For tests: whether Wait() has given up spinning and blocked.
  bool WaiterBlockedForTesting() const {
    return state_.load(std::memory_order_acquire) == kSleeping;
  }

  // Returns once Set() was called.
  void Wait() {
    if (SpinUntil([&] { return state_.load(std::memory_order_acquire) == kSet; })) return;
    std::unique_lock<std::mutex> lock(mu_);
    int expected = kPending;
    // acquire on failure: the state is kSet, and Set()'s writes are ours.
    // (acquire on success too, which costs nothing on x86: GCC's
    // -Winvalid-memory-model still rejects a failure order stronger than
    // the success order, which C++17 allows, in the sanitizer builds.)
    if (!state_.compare_exchange_strong(expected, kSleeping, std::memory_order_acquire,
                                        std::memory_order_acquire)) {
      return;
    }
    cv_.wait(lock, [&] { return state_.load(std::memory_order_acquire) == kSet; });
  }

 private:
  enum : int { kPending, kSleeping, kSet };

  // kPending -> kSet (Set while the waiter spins), or kPending -> kSleeping
  // (Wait, under mu_) -> kSet (Set, under mu_).
  std::atomic<int> state_{kPending};
  std::mutex mu_;  // orders kSleeping and the final kSet with cv_
  std::condition_variable cv_;
};

}  // namespace depengine::internal
