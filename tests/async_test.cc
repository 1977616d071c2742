// Semantics point 2: an async function is finished when its callback is
// called, from any thread, at any later time; no worker thread blocks
// waiting for it.
#include <atomic>
#include <vector>

#include "engine_fixture.h"

namespace depengine::test {
namespace {

using ::testing::ElementsAreArray;

class AsyncTest : public EngineTest {};

TEST_P(AsyncTest, CallbackFromAnotherThreadAfterALaterFunctionRanFinishesIt) {
  // A (async, writes v) hands its callback to another thread, which calls it
  // only after B, pushed later and independent, has run. With one worker, B
  // can only run if the worker did not block on A. C reads v: it runs after
  // the callback and sees what the other thread wrote before calling it.
  int value = 0;  // plain: written by the completer thread, read by C
  int c_saw = -1;
  Event b_ran;
  std::atomic<bool> b_ran_before_callback{false};
  Completer completer;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  VarHandle u = engine().NewVariable();
  engine().PushAsync(
      [&](RunContext, CallbackOnComplete cb) {
        completer.Post([&, cb] {
          b_ran_before_callback = b_ran.WaitFor();
          value = 7;
          cb();
        });
      },
      Context::CPU(), {}, {v});
  engine().PushSync([&](RunContext) { b_ran.Notify(); }, Context::CPU(), {}, {u});
  engine().PushSync([&](RunContext) { c_saw = value; }, Context::CPU(), {v}, {});
  engine().WaitForAll();
  EXPECT_TRUE(b_ran_before_callback.load())
      << "a later independent function could not run while an async function was unfinished";
  EXPECT_EQ(c_saw, 7);
}

TEST_P(AsyncTest, ManyUnfinishedAsyncFunctionsDoNotOccupyWorkers) {
  // Every async function waits (on another thread) until all of them have
  // started: impossible if each occupied a worker until its callback.
  constexpr int kN = 40;
  Counter started;
  std::atomic<int> all_started_seen{0};
  Completer completer;
  DrainGuard drain(engine());
  std::vector<VarHandle> vars;
  for (int i = 0; i < kN; ++i) vars.push_back(engine().NewVariable());
  for (int i = 0; i < kN; ++i) {
    engine().PushAsync(
        [&](RunContext, CallbackOnComplete cb) {
          started.Add();
          completer.Post([&, cb] {
            all_started_seen += started.WaitAtLeast(kN) ? 1 : 0;
            cb();
          });
        },
        Context::CPU(), {}, {vars[i]});
  }
  engine().WaitForAll();
  EXPECT_EQ(all_started_seen.load(), kN);
}

TEST_P(AsyncTest, CallbackCalledInsideTheFunctionFinishesIt) {
  std::vector<int> log;  // plain
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  for (int i = 0; i < 50; ++i) {
    if (i % 2 == 0) {
      engine().PushAsync(
          [&, i](RunContext, CallbackOnComplete cb) {
            log.push_back(i);
            cb();
          },
          Context::CPU(), {}, {v});
    } else {
      engine().PushSync([&, i](RunContext) { log.push_back(i); }, Context::CPU(), {}, {v});
    }
  }
  engine().WaitForVar(v);
  std::vector<int> expected(50);
  for (int i = 0; i < 50; ++i) expected[i] = i;
  EXPECT_THAT(log, ElementsAreArray(expected));
}

TEST_P(AsyncTest, ChainOfAsyncWritersCompletedElsewhereRunsInOrder) {
  // Each async writer of v is finished by the completer thread; the next
  // one may start only after that. The log (plain) is appended both in the
  // function and on the completer thread before the callback.
  constexpr int kN = 100;
  std::vector<int> log;
  Completer completer;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  for (int i = 0; i < kN; ++i) {
    engine().PushAsync(
        [&, i](RunContext, CallbackOnComplete cb) {
          log.push_back(2 * i);
          completer.Post([&, i, cb] {
            log.push_back(2 * i + 1);
            cb();
          });
        },
        Context::CPU(), {}, {v});
  }
  engine().WaitForVar(v);
  std::vector<int> expected(2 * kN);
  for (int i = 0; i < 2 * kN; ++i) expected[i] = i;
  EXPECT_THAT(log, ElementsAreArray(expected));
}

TEST_P(AsyncTest, CallbacksCalledInReverseOrderReleaseEachVarIndependently) {
  constexpr int kN = 20;
  int value[kN] = {};
  int seen[kN] = {};
  std::vector<CallbackOnComplete> callbacks(kN);  // slot i written by function i
  Counter started;
  DrainGuard drain(engine());
  std::vector<VarHandle> vars;
  for (int i = 0; i < kN; ++i) vars.push_back(engine().NewVariable());
  for (int i = 0; i < kN; ++i) {
    engine().PushAsync(
        [&, i](RunContext, CallbackOnComplete cb) {
          callbacks[i] = cb;
          started.Add();
        },
        Context::CPU(), {}, {vars[i]});
    engine().PushSync([&, i](RunContext) { seen[i] = value[i]; }, Context::CPU(), {vars[i]}, {});
  }
  ASSERT_TRUE(started.WaitAtLeast(kN));
  std::thread other([&] {
    for (int i = kN - 1; i >= 0; --i) {
      value[i] = 100 + i;
      callbacks[i]();
    }
  });
  other.join();
  engine().WaitForAll();
  for (int i = 0; i < kN; ++i) EXPECT_EQ(seen[i], 100 + i) << "var " << i;
}

TEST_P(AsyncTest, CopyOfTheCallbackFinishesTheFunction) {
  Event successor_ran;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  engine().PushAsync(
      [&](RunContext, CallbackOnComplete cb) {
        std::function<void()> later = [copy = cb] { copy(); };
        later();
      },
      Context::CPU(), {}, {v});
  engine().PushSync([&](RunContext) { successor_ran.Notify(); }, Context::CPU(), {v}, {});
  EXPECT_TRUE(successor_ran.WaitFor());
}

TEST_P(AsyncTest, AsyncFunctionReceivesItsRunContext) {
  RunContext seen{Context::GPU(3), reinterpret_cast<void*>(0x1)};
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  engine().PushAsync(
      [&](RunContext rctx, CallbackOnComplete cb) {
        seen = rctx;
        cb();
      },
      Context::CPU(1), {}, {v});
  engine().WaitForVar(v);
  EXPECT_TRUE(seen.ctx == Context::CPU(1));
  EXPECT_EQ(seen.stream, nullptr);
}

struct SeedCallbackState {
  Engine* engine = nullptr;
  int calls = 0;
};

void SeedCallback(Engine* engine, void* param) {
  auto* s = static_cast<SeedCallbackState*>(param);
  s->engine = engine;
  ++s->calls;
}

TEST_P(AsyncTest, CreateCallbackCallsTheSeedFormFunction) {
  SeedCallbackState state;
  CallbackOnComplete cb = engine().CreateCallback(&SeedCallback, &state);
  cb();
  EXPECT_EQ(state.calls, 1);
  EXPECT_EQ(state.engine, &engine());
}

DEPENGINE_INSTANTIATE_ALL_ENGINES(AsyncTest);

}  // namespace
}  // namespace depengine::test
