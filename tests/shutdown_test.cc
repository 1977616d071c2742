// Semantics point 9: destroying an engine finishes all pushed work, then
// joins its threads; nothing leaks (the ASan build runs LeakSanitizer over
// every test).
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "engine_fixture.h"

namespace depengine::test {
namespace {

class ShutdownTest : public EngineTest {};

TEST_P(ShutdownTest, DestroyingTheEngineRunsEveryQueuedFunction) {
  constexpr int kChain = 500;
  constexpr int kBlocked = 50;
  long chain = 0;             // plain, ordered by var c
  std::atomic<int> blocked_ran{0};
  Event destroying;
  VarHandle c = engine().NewVariable();
  VarHandle held = engine().NewVariable();
  auto hold = std::make_unique<Hold>(engine(), std::vector<VarHandle>{}, std::vector<VarHandle>{held});
  for (int i = 0; i < kChain; ++i) {
    engine().PushSync([&](RunContext) { ++chain; }, Context::CPU(), {}, {c});
  }
  for (int i = 0; i < kBlocked; ++i) {
    engine().PushSync([&](RunContext) { ++blocked_ran; }, Context::CPU(), {held}, {});
  }
  std::thread releaser([&] {
    destroying.WaitFor();
    hold->Release();
  });
  destroying.Notify();
  engine_.reset();  // must wait for the hold, released by the other thread
  releaser.join();
  EXPECT_EQ(chain, kChain);
  EXPECT_EQ(blocked_ran.load(), kBlocked);
}

TEST_P(ShutdownTest, DestroyingTheEngineWhileTheLastCallbackIsStillReturning) {
  // The last function is finished by a callback on another thread while the
  // engine is being destroyed: the destructor must not free the engine
  // while that callback still runs engine code (ThreadSanitizer and
  // AddressSanitizer see it when it does). Repeated to hit the window.
  for (int round = 0; round < 300; ++round) {
    auto e = CreateEngine(Options());
    VarHandle v = e->NewVariable();
    std::mutex mu;
    CallbackOnComplete kept;  // guarded by mu
    Event handed;
    e->PushAsync(
        [&](RunContext, CallbackOnComplete cb) {
          std::lock_guard<std::mutex> lock(mu);
          kept = cb;
          handed.Notify();
        },
        Context::CPU(), {}, {v});
    ASSERT_TRUE(handed.WaitFor());
    Event go;
    std::thread finisher([&] {
      go.WaitFor();
      CallbackOnComplete cb;
      {
        std::lock_guard<std::mutex> lock(mu);
        cb = kept;
      }
      cb();
    });
    go.Notify();
    // Not synchronization: in some rounds give the callback time to finish
    // first, so that the destructor finds no work left and frees the engine
    // at once; nothing but the engine orders the callback before that free.
    if (round % 3 != 0) std::this_thread::sleep_for(std::chrono::microseconds(round % 3 == 1 ? 50 : 500));
    e.reset();  // returns once the function is finished
    finisher.join();
  }
}

TEST_P(ShutdownTest, DestroyingTheEngineWaitsForAsyncFunctionsCompletedLater) {
  constexpr int kAsync = 30;
  int value = 0;  // plain, ordered by v
  int after = -1;
  Event destroying;
  Completer completer;
  VarHandle v = engine().NewVariable();
  for (int i = 0; i < kAsync; ++i) {
    engine().PushAsync(
        [&](RunContext, CallbackOnComplete cb) {
          completer.Post([&, cb] {
            destroying.WaitFor();
            ++value;
            cb();
          });
        },
        Context::CPU(), {}, {v});
  }
  engine().PushSync([&](RunContext) { after = value; }, Context::CPU(), {v}, {});
  destroying.Notify();
  engine_.reset();
  EXPECT_EQ(after, kAsync);
}

TEST_P(ShutdownTest, FunctionsPushedByFunctionsDuringShutdownRun) {
  constexpr int kDepth = 100;
  std::atomic<int> ran{0};
  VarHandle v = engine().NewVariable();
  Engine* e = engine_.get();
  std::function<void(int)> push_next = [&](int depth) {
    e->PushSync(
        [&, depth](RunContext) {
          ++ran;
          if (depth + 1 < kDepth) push_next(depth + 1);
        },
        Context::CPU(), {}, {v});
  };
  push_next(0);
  engine_.reset();
  EXPECT_EQ(ran.load(), kDepth);
}

TEST_P(ShutdownTest, AsyncFunctionsPushedByFunctionsDuringShutdownFinishBeforeItReturns) {
  // Each function of the chain pushes the next, then hands its callback to
  // another thread: the chain goes on after the destructor began, and its
  // last functions are neither running nor queued whenever the callback
  // thread is between two calls. The destructor must wait for what was
  // pushed while it waited, not only for what was pushed before it began
  // (a pool that drains its queue before it stops is no such wait).
  constexpr int kDepth = 100;
  std::atomic<int> finished{0};
  Completer completer;
  VarHandle v = engine().NewVariable();
  Engine* e = engine_.get();
  std::function<void(int)> push_next = [&](int depth) {
    e->PushAsync(
        [&, depth](RunContext, CallbackOnComplete cb) {
          if (depth + 1 < kDepth) push_next(depth + 1);
          completer.Post([&finished, cb] {
            ++finished;
            cb();
          });
        },
        Context::CPU(), {}, {v});
  };
  push_next(0);
  engine_.reset();
  EXPECT_EQ(finished.load(), kDepth);
}

TEST_P(ShutdownTest, LiveVarsAndOperatorsAreFreedWithTheEngine) {
  auto sentinel = std::make_shared<int>(0);
  for (int i = 0; i < 20; ++i) {
    VarHandle v = engine().NewVariable();
    VarHandle u = engine().NewVariable();
    OprHandle op = engine().NewOperator([sentinel](RunContext, CallbackOnComplete cb) { cb(); },
                                        {u}, {v});
    engine().Push(op, Context::CPU());
    engine().PushSync([sentinel](RunContext) {}, Context::CPU(), {v}, {u});
  }
  engine_.reset();
  EXPECT_EQ(sentinel.use_count(), 1) << "a closure outlived its engine";
}

TEST_P(ShutdownTest, UnreportedFailuresDoNotStopShutdown) {
  VarHandle v = engine().NewVariable();
  for (int i = 0; i < 10; ++i) {
    engine().PushSync([](RunContext) { throw std::runtime_error("never waited for"); },
                      Context::CPU(), {}, {v});
  }
  engine().NotifyShutdown();
  int after = 0;
  engine().PushSync([&](RunContext) { after = 1; }, Context::CPU(), {}, {});
  engine_.reset();  // neither throws nor terminates
  EXPECT_EQ(after, 1) << "work pushed after NotifyShutdown was dropped";
}

TEST_P(ShutdownTest, EnginesOfEveryKindLiveSideBySide) {
  std::vector<std::unique_ptr<Engine>> engines;
  for (const EngineParam& p : AllEngineParams()) {
    EngineOptions o;
    o.kind = p.kind;
    o.cpu_worker_threads = p.workers;
    engines.push_back(CreateEngine(o));
  }
  engines.push_back(std::move(engine_));
  std::vector<long> sums(engines.size(), 0);  // slot i ordered by engine i's var
  std::vector<VarHandle> vars;
  for (auto& e : engines) vars.push_back(e->NewVariable());
  for (int i = 1; i <= 200; ++i) {
    for (std::size_t k = 0; k < engines.size(); ++k) {
      engines[k]->PushSync([&sums, k, i](RunContext) { sums[k] += i; }, Context::CPU(), {},
                           {vars[k]});
    }
  }
  // Destroy in an order unrelated to creation.
  for (std::size_t k : {3u, 0u, 5u, 1u, 4u, 2u}) {
    if (k < engines.size()) engines[k].reset();
  }
  for (std::size_t k = 0; k < sums.size(); ++k) EXPECT_EQ(sums[k], 200L * 201 / 2) << "engine " << k;
}

TEST_P(ShutdownTest, CreatingAndDestroyingEnginesRepeatedly) {
  for (int round = 0; round < 20; ++round) {
    auto e = CreateEngine(Options());
    std::atomic<int> ran{0};
    VarHandle v = e->NewVariable();
    for (int i = 0; i < 20; ++i) {
      e->PushSync([&](RunContext) { ++ran; }, Context::CPU(), {}, i % 2 == 0 ? std::vector<VarHandle>{v}
                                                                          : std::vector<VarHandle>{});
    }
    e.reset();
    ASSERT_EQ(ran.load(), 20) << "round " << round;
  }
}

DEPENGINE_INSTANTIATE_ALL_ENGINES(ShutdownTest);

}  // namespace
}  // namespace depengine::test
