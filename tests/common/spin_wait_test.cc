// The waits behind WaitForVar and WaitForAll (common/spin_wait.h,
// common/one_shot_event.h): a waiter spins for at most kWaitSpin, then
// blocks; the event wakes it either way, and may be destroyed by the waiter
// as soon as Wait() returns.
#include "common/spin_wait.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "common/one_shot_event.h"
#include "wait_timeout.h"

namespace depengine::internal {
namespace {

using std::chrono::steady_clock;

// Polls `pred` until it holds or kWaitTimeout passes.
template <class Pred>
bool EventuallyTrue(Pred pred) {
  const auto deadline = steady_clock::now() + support::kWaitTimeout;
  while (!pred()) {
    if (steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

TEST(SpinUntilTest, ReturnsTrueOnceTheConditionHolds) {
  std::atomic<bool> flag{false};
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    flag.store(true, std::memory_order_release);
  });
  // A budget far above the setter's delay: the spin must see the flag.
  EXPECT_TRUE(
      SpinUntil([&] { return flag.load(std::memory_order_acquire); }, std::chrono::seconds(10)));
  setter.join();
}

TEST(SpinUntilTest, GivesUpAfterItsBudget) {
  const auto budget = std::chrono::milliseconds(2);
  const auto start = steady_clock::now();
  EXPECT_FALSE(SpinUntil([] { return false; }, budget));
  EXPECT_GE(steady_clock::now() - start, budget);
}

TEST(OneShotEventTest, WaitAfterSetReturnsAtOnce) {
  OneShotEvent event;
  event.Set();
  event.Wait();
  EXPECT_FALSE(event.WaiterBlockedForTesting());
}

// The setter's writes before Set() are the waiter's after Wait() (a data
// race under ThreadSanitizer otherwise), whether Set() comes while the
// waiter spins or after it blocked.
TEST(OneShotEventTest, TheSettersWritesAreVisibleToTheWaiter) {
  for (const std::chrono::nanoseconds delay : {std::chrono::nanoseconds(0), 5 * kWaitSpin}) {
    OneShotEvent event;
    int payload = 0;
    std::thread setter([&] {
      std::this_thread::sleep_for(delay);
      payload = 42;
      event.Set();
    });
    event.Wait();
    EXPECT_EQ(payload, 42);
    setter.join();
  }
}

// A waiter that outlasted its spin blocks, and Set() must wake it (without
// the notify this hangs, and fails at kWaitTimeout).
TEST(OneShotEventTest, SetWakesAWaiterThatBlocked) {
  auto event = std::make_shared<OneShotEvent>();
  auto returned = std::make_shared<std::atomic<bool>>(false);
  std::thread waiter([event, returned] {
    event->Wait();
    returned->store(true, std::memory_order_release);
  });
  ASSERT_TRUE(EventuallyTrue([&] { return event->WaiterBlockedForTesting(); }))
      << "the waiter never blocked";
  EXPECT_FALSE(returned->load(std::memory_order_acquire));
  event->Set();
  const bool woke = EventuallyTrue([&] { return returned->load(std::memory_order_acquire); });
  if (!woke) {
    waiter.detach();  // still blocked: it owns shares of what it uses
    FAIL() << "Set() did not wake a blocked waiter";
  }
  waiter.join();
}

// The waiter destroys the event as soon as Wait() returns, while the setter
// may still be inside Set(): AddressSanitizer reports a Set() that touches
// the event after the waiter could have seen it set. Half the rounds set
// while the waiter spins, half after it blocked.
TEST(OneShotEventTest, TheWaiterMayDestroyTheEventWhenWaitReturns) {
  constexpr int kRounds = 2000;
  for (int round = 0; round < kRounds; ++round) {
    auto* event = new OneShotEvent;
    const bool late = round % 2 == 1;
    std::thread waiter([event] {
      event->Wait();
      delete event;
    });
    if (late) {
      ASSERT_TRUE(EventuallyTrue([&] { return event->WaiterBlockedForTesting(); }));
    }
    event->Set();
    waiter.join();
  }
}

}  // namespace
}  // namespace depengine::internal
