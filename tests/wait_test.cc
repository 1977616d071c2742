// Semantics point 4: WaitForVar(v) returns once every function pushed
// before it that uses v has finished; WaitForAll once every function pushed
// before it has. Both make what those functions wrote visible to the caller.
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "alloc_counter.h"
#include "engine/engine_handle.h"
#include "engine/threaded_engine.h"
#include "engine_fixture.h"

namespace depengine::test {
namespace {

class WaitTest : public EngineTest {};

TEST_P(WaitTest, WaitForVarSeesEveryEarlierWriterFinishedOnAnotherThread) {
  constexpr int kWriters = 30;
  int value = 0;  // plain: written by functions and by the completer thread
  Completer completer;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  PushAsyncIncrementsOnCompleter(engine(), completer, v, &value, kWriters);
  engine().WaitForVar(v);
  EXPECT_EQ(value, kWriters);
}

TEST_P(WaitTest, WaitForVarWaitsForAnEarlierReader) {
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  Hold reader(engine(), {v}, {});
  ASSERT_TRUE(reader.WaitStarted());
  Event returned;
  std::atomic<bool> released{false};
  std::atomic<bool> returned_before_release{false};
  std::thread waiter([&] {
    engine().WaitForVar(v);
    returned_before_release = !released.load();
    returned.Notify();
  });
  ExpectQuiet(returned, "WaitForVar returned while an earlier reader of the var was unfinished");
  released = true;
  reader.Release();
  EXPECT_TRUE(returned.WaitFor());
  waiter.join();
  EXPECT_FALSE(returned_before_release.load());
}

TEST_P(WaitTest, WaitForVarWaitsForAnEarlierWriter) {
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  Hold writer(engine(), {}, {v});
  ASSERT_TRUE(writer.WaitStarted());
  Event returned;
  std::thread waiter([&] {
    engine().WaitForVar(v);
    returned.Notify();
  });
  ExpectQuiet(returned, "WaitForVar returned while an earlier writer of the var was unfinished");
  writer.Release();
  EXPECT_TRUE(returned.WaitFor());
  waiter.join();
}

TEST_P(WaitTest, WaitForVarWaitsForAnEarlierReaderThatIsBlockedOnAnotherVar) {
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  VarHandle u = engine().NewVariable();
  Hold hold_u(engine(), {}, {u});
  ASSERT_TRUE(hold_u.WaitStarted());
  // Reads v, writes u: queued behind the hold on u, so v stays in use.
  engine().PushSync([&](RunContext) {}, Context::CPU(), {v}, {u});
  Event returned;
  std::thread waiter([&] {
    engine().WaitForVar(v);
    returned.Notify();
  });
  ExpectQuiet(returned, "WaitForVar(v) returned while an earlier user of v had not run yet");
  hold_u.Release();
  EXPECT_TRUE(returned.WaitFor());
  waiter.join();
}

TEST_P(WaitTest, WaitForVarDoesNotWaitForFunctionsOnOtherVars) {
  int value = 0;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  VarHandle u = engine().NewVariable();
  Hold hold_u(engine(), {}, {u});
  ASSERT_TRUE(hold_u.WaitStarted());
  engine().PushSync([&](RunContext) {}, Context::CPU(), {}, {u});  // queued behind the hold
  engine().PushSync([&](RunContext) { value = 6; }, Context::CPU(), {}, {v});
  Event returned;
  std::thread waiter([&] {
    engine().WaitForVar(v);
    returned.Notify();
  });
  EXPECT_TRUE(returned.WaitFor()) << "WaitForVar(v) waited for functions that do not use v";
  hold_u.Release();  // before joining, so that a failure above cannot hang the test
  waiter.join();
  EXPECT_EQ(value, 6);
}

TEST_P(WaitTest, WaitForAllWaitsForEveryEarlierFunction) {
  constexpr int kVars = 4;
  int value[kVars] = {};
  DrainGuard drain(engine());
  VarHandle vars[kVars];
  for (auto& v : vars) v = engine().NewVariable();
  std::vector<std::unique_ptr<Hold>> holds;
  for (int i = 0; i < kVars; ++i) {
    holds.push_back(std::make_unique<Hold>(engine(), std::vector<VarHandle>{},
                                           std::vector<VarHandle>{vars[i]}));
    engine().PushSync([&, i](RunContext) { value[i] = i + 1; }, Context::CPU(), {}, {vars[i]});
  }
  Event returned;
  std::thread waiter([&] {
    engine().WaitForAll();
    returned.Notify();
  });
  for (int i = 0; i < kVars; ++i) {
    ExpectQuiet(returned, "WaitForAll returned while an earlier function was unfinished");
    holds[i]->Release();
  }
  EXPECT_TRUE(returned.WaitFor());
  waiter.join();
  for (int i = 0; i < kVars; ++i) EXPECT_EQ(value[i], i + 1);
}

// A function F pushed after a WaitForAll started is not waited for, even
// when F's body finishes one of the functions the WaitForAll waits for (it
// calls that function's callback) and then keeps running: the WaitForAll
// returns once that function is finished, not once F's body returns. (A
// worker kept the count of such a completion with its own, for after F.)
TEST_P(WaitTest, WaitForAllIsNotDelayedByALaterBodyThatFinishesAnEarlierFunction) {
  internal::ThreadedEngine* internals = internal::CoreOf(&engine());
  ASSERT_NE(internals, nullptr);
  DrainGuard drain(engine());
  VarHandle x = engine().NewVariable();
  VarHandle a = engine().NewVariable();
  CallbackOnComplete held = PushAsyncAndHoldItsCallback(engine(), x);
  const std::uint64_t started_before = internals->WaitForAllsStartedForTesting();
  Event returned;
  std::thread waiter([&] {
    engine().WaitForAll();
    returned.Notify();
  });
  // Until the WaitForAll has counted what it waits for: F, pushed next, is
  // not part of it.
  const auto deadline = std::chrono::steady_clock::now() + kTimeout;
  while (internals->WaitForAllsStartedForTesting() == started_before &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_NE(internals->WaitForAllsStartedForTesting(), started_before);
  bool saw_return = false;  // written by F, read after WaitForAll
  engine().PushSync(
      [&](RunContext) {
        held();
        saw_return = returned.WaitFor();
      },
      Context::CPU(), {}, {a});
  waiter.join();
  engine().WaitForAll();
  EXPECT_TRUE(saw_return) << "WaitForAll waited for the body of a function pushed after it started";
}

TEST_P(WaitTest, WaitForAllSeesWorkOfFunctionsWithoutVars) {
  constexpr int kN = 200;
  std::vector<int> slots(kN, 0);  // slot i written by function i only
  DrainGuard drain(engine());
  for (int i = 0; i < kN; ++i) {
    engine().PushSync([&, i](RunContext) { slots[i] = i; }, Context::CPU(), {}, {});
  }
  engine().WaitForAll();
  for (int i = 0; i < kN; ++i) ASSERT_EQ(slots[i], i);
}

TEST_P(WaitTest, WaitsWithNothingPendingReturnAtOnce) {
  VarHandle v = engine().NewVariable();
  engine().WaitForVar(v);
  engine().WaitForAll();
  engine().WaitForAll();
  int value = 0;
  engine().PushSync([&](RunContext) { value = 1; }, Context::CPU(), {}, {v});
  engine().WaitForVar(v);
  engine().WaitForVar(v);
  EXPECT_EQ(value, 1);
}

TEST_P(WaitTest, SeveralThreadsWaitForOneHeldVar) {
  constexpr int kWaiters = 4;
  int value = 0;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  Hold writer(engine(), {}, {v});
  ASSERT_TRUE(writer.WaitStarted());
  engine().PushSync([&](RunContext) { value = 9; }, Context::CPU(), {}, {v});
  Counter returned;
  std::atomic<int> saw_value{0};
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&] {
      engine().WaitForVar(v);
      saw_value += value == 9 ? 1 : 0;
      returned.Add();
    });
  }
  EXPECT_FALSE(returned.WaitAtLeast(1, kQuiet)) << "a waiter returned while the var was held";
  writer.Release();
  EXPECT_TRUE(returned.WaitAtLeast(kWaiters));
  for (auto& t : waiters) t.join();
  EXPECT_EQ(saw_value.load(), kWaiters);
}

// A program that pushes and waits, step after step, allocates nothing per
// WaitForVar once the engine's pools are warm: the waiter function's closure
// fits in std::function's own storage, its var list is kept by the thread,
// and its event lives on the waiting thread's stack. (Checked: capturing
// three pointers instead of one, or building the var list per call, fails
// this with one allocation per wait.)
TEST_P(WaitTest, WaitForVarOnABusyVarAllocatesNothing) {
  constexpr int kWarmupRounds = 50;
  constexpr int kRounds = 200;
  VarHandle v = engine().NewVariable();
  const std::vector<VarHandle> writes = {v};
  long runs = 0;  // plain: ordered by v
  // The body outlasts the push-to-WaitForVar gap by far, so that the wait
  // nearly always finds v busy and takes the waiter path.
  auto step = [&] {
    engine().PushSync(
        [&runs](RunContext) {
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          ++runs;
        },
        Context::CPU(), {}, writes);
    engine().WaitForVar(v);
  };
  for (int i = 0; i < kWarmupRounds; ++i) step();
  StartCountingAllocations();
  for (int i = 0; i < kRounds; ++i) step();
  const long allocations = StopCountingAllocations();
  EXPECT_EQ(runs, kWarmupRounds + kRounds);
  // An object pool growing now and then is allowed; one allocation per wait
  // is not. Sanitizer builds own operator new: there the program runs (under
  // their checks) but allocations are not counted.
  if (AllocationCountingAvailable()) {
    EXPECT_LT(allocations, kRounds / 20)
        << allocations << " allocations in " << kRounds << " rounds of PushSync + WaitForVar";
  }
}

// A long wait blocks after a bounded spin (kWaitSpin, 20 us), so it costs
// its thread little CPU. WaitForAll must come to block (counted among the
// engine's blocked waiters; an unbounded spin never does, and fails this
// whatever the machine's load). WaitForVar's event is checked the same way
// in spin_wait_test. Both must also use far less CPU than the 200 ms they
// wait here (a spin that yields uses little CPU on a busy machine, so that
// alone would not catch an unbounded spin).
TEST_P(WaitTest, ALongWaitBlocksAfterABoundedSpin) {
  constexpr auto kHeldFor = std::chrono::milliseconds(200);
  constexpr double kMaxCpuSeconds = 0.05;
  internal::ThreadedEngine* internals = internal::CoreOf(&engine());
  ASSERT_NE(internals, nullptr);
  auto thread_cpu_seconds = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
  };
  VarHandle v = engine().NewVariable();
  for (const bool wait_for_all : {false, true}) {
    Hold hold(engine(), {}, {v});
    ASSERT_TRUE(hold.WaitStarted());
    double cpu_seconds = -1;  // written by the waiter, read after join
    std::thread waiter([&] {
      const double start = thread_cpu_seconds();
      if (wait_for_all) {
        engine().WaitForAll();
      } else {
        engine().WaitForVar(v);
      }
      cpu_seconds = thread_cpu_seconds() - start;
    });
    if (wait_for_all) {
      const auto deadline = std::chrono::steady_clock::now() + support::kWaitTimeout;
      while (internals->BlockedWaitForAllsForTesting() == 0 &&
             std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      EXPECT_EQ(internals->BlockedWaitForAllsForTesting(), 1) << "WaitForAll never blocked";
    }
    std::this_thread::sleep_for(kHeldFor);
    hold.Release();
    waiter.join();
    EXPECT_LT(cpu_seconds, kMaxCpuSeconds)
        << (wait_for_all ? "WaitForAll" : "WaitForVar") << " used " << cpu_seconds
        << " s of CPU in a wait of about " << kHeldFor.count() << " ms";
  }
}

DEPENGINE_INSTANTIATE_ALL_ENGINES(WaitTest);

}  // namespace
}  // namespace depengine::test
