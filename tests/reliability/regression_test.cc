// Regression tests for engine bugs found by the reliability work (sanitizers,
// fuzzer, misuse catalogue). Each names the bug it guards against; see
// docs/reliability.md, "Bugs found".
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

#include "depengine/engine.h"
#include "reliability_util.h"

namespace depengine::reliability {
namespace {

class ReliabilityRegression : public ::testing::TestWithParam<EngineConfig> {};

// Bug 1 (found by ThreadSanitizer on the first smoke test; fixed): a finishing
// worker recycled a one-shot block and then read its embedded Opr's
// `prebuilt` flag, racing with the pusher that reused the block. Fails only
// under -DDEPENGINE_SANITIZE=thread (a data race report); a long chain of
// one-shot pushes recycles blocks between threads as fast as possible.
TEST_P(ReliabilityRegression, RecycledBlockIsNotReadAfterRecycle) {
  auto engine = MakeEngine(GetParam());
  VarHandle v = engine->NewVariable();
  long counter = 0;
  const int n = Scaled(50000, 2000);
  for (int i = 0; i < n; ++i) {
    engine->PushSync([&](RunContext) { ++counter; }, Context::CPU(), {}, {v});
  }
  engine->WaitForAll();
  EXPECT_EQ(counter, n);
  engine->DeleteVariable(nullptr, Context::CPU(), v);
  engine->WaitForAll();
}

// Bug 2 (misuse catalogue; fixed): NewOperator accepted a var whose DeleteVariable
// is pending, although engine.h says any use of a var after DeleteVariable
// raises std::invalid_argument. The operator then holds a pointer to a var
// that is freed (and may be reused by NewVariable) when the deletion runs.
TEST_P(ReliabilityRegression, NewOperatorRejectsVarPendingDeletion) {
  auto engine = MakeEngine(GetParam());
  VarHandle blocker = engine->NewVariable();
  VarHandle v = engine->NewVariable();
  {
    Hold gate(*engine, {}, {blocker});
    engine->PushSync([](RunContext) {}, Context::CPU(), {blocker}, {v});
    engine->DeleteVariable(nullptr, Context::CPU(), v);  // pending behind the gate
    OprHandle op = nullptr;
    EXPECT_THROW_NAMING(std::invalid_argument,
                        op = engine->NewOperator([](RunContext, CallbackOnComplete cb) { cb(); },
                                                 {v}, {}),
                        "NewOperator", "deleted");
    if (op != nullptr) engine->DeleteOperator(op);
  }
  engine->WaitForAll();
}

// Bug 5 (found by ThreadSanitizer, in this test, the fault-injection
// engine loop and the fuzzer's destroy-in-flight programs): the engine is
// freed while a foreign thread's callback call is still inside it. The
// callback's Complete() -> FinishPending() -> SubtractPending() decrements
// the pending count, which lets Drain() in the destructor return, and only
// then reads idle_waiters_ / throttle_waiters_ and locks idle_mu_ to notify:
// by then ~ThreadedEngine may have run. TSan reports the race on every run;
// ASan would report a heap-use-after-free when the window is hit.
// Fails only under -DDEPENGINE_SANITIZE=thread (or as a rare crash).
TEST_P(ReliabilityRegression, EngineDestroyedWhileForeignCallbackReturns) {
  const int rounds = Scaled(300, 30);
  for (int i = 0; i < rounds; ++i) {
    auto engine = MakeEngine(GetParam());
    VarHandle v = engine->NewVariable();
    std::atomic<bool> handed{false};
    CallbackOnComplete cb;
    engine->PushAsync(
        [&](RunContext, CallbackOnComplete c) {
          cb = c;
          handed.store(true);
        },
        Context::CPU(), {}, {v});
    while (!handed.load()) std::this_thread::yield();
    std::thread foreign([cb] { cb(); });
    engine.reset();  // waits for the callback, then frees the engine
    foreign.join();
  }
}

// Bug 3 (found by the fuzzer; fixed): WaitForVar(v) returned while a
// function pushed before it that reads v was still running. engine.h
// promises it returns once every earlier function that uses v finished.
// WaitForVar queued a *read* of v, which shared the var with the running
// readers instead of waiting for them (it now queues a write).
TEST_P(ReliabilityRegression, WaitForVarWaitsForRunningReaders) {
  auto engine = MakeEngine(GetParam());
  VarHandle v = engine->NewVariable();
  std::atomic<bool> reader_done{false};
  std::promise<CallbackOnComplete> handed;
  std::thread finisher([&, fut = handed.get_future()]() mutable {
    CallbackOnComplete cb = fut.get();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    reader_done.store(true);
    cb();
  });
  engine->PushAsync([&](RunContext, CallbackOnComplete cb) { handed.set_value(cb); },
                    Context::CPU(), {v}, {});
  engine->WaitForVar(v);
  EXPECT_TRUE(reader_done.load()) << "WaitForVar returned while an earlier reader of the var ran";
  finisher.join();
  engine->WaitForAll();
}

// Bug 3, second symptom (found by the fuzzer; fixed): a reader pushed before
// WaitForVar(v) on a failed v can run instead of being skipped. The wait's
// read op is granted together with the earlier reader when the failed writer
// finishes; if it runs first it takes (clears) v's failure, and the earlier
// reader then finds no failure and runs on the failed writer's data.
TEST_P(ReliabilityRegression, ReaderBeforeWaitForVarOfFailedVarIsSkipped) {
  const int rounds = Scaled(200, 50);
  int ran = 0;
  for (int i = 0; i < rounds; ++i) {
    auto engine = MakeEngine(GetParam());
    VarHandle v = engine->NewVariable();
    std::atomic<int> reader_ran{0};
    engine->PushSync([](RunContext) { throw std::runtime_error("writer failed"); },
                     Context::CPU(), {}, {v});
    engine->PushSync([&](RunContext) { reader_ran.fetch_add(1); }, Context::CPU(), {v}, {});
    EXPECT_THROW(engine->WaitForVar(v), std::runtime_error);
    engine->WaitForAll();
    ran += reader_ran.load();
  }
  EXPECT_EQ(ran, 0) << "a reader of a failed var ran (in " << ran << " of " << rounds
                    << " rounds) instead of being skipped";
}

INSTANTIATE_TEST_SUITE_P(AllEngines, ReliabilityRegression,
                         ::testing::ValuesIn(AllEngineConfigs()), ConfigName);

}  // namespace
}  // namespace depengine::reliability
