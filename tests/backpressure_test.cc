// Semantics point 10: EngineOptions::max_in_flight bounds the functions
// pushed but not finished; a push from outside the engine that would exceed
// it waits until enough finish. Deletions are queued ahead of normal work.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "engine_fixture.h"

namespace depengine::test {
namespace {

using ::testing::ElementsAreArray;

class BackpressureTest : public EngineTest {
 protected:
  std::unique_ptr<Engine> MakeEngine(std::size_t max_in_flight) {
    EngineOptions o = Options();
    o.max_in_flight = max_in_flight;
    return CreateEngine(o);
  }
};

// Async functions that stay in flight until the test completes them; counts
// how many are in flight at once, measured inside the functions.
class InFlight {
 public:
  AsyncFn Fn() {
    return [this](RunContext, CallbackOnComplete cb) {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.push_back(cb);
      max_pending_ = std::max(max_pending_, static_cast<int>(pending_.size()));
      ++started_;
      cv_.notify_all();
    };
  }
  // Waits until exactly `n` are pending (bounded).
  bool WaitPending(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kTimeout, [&] { return static_cast<int>(pending_.size()) >= n; });
  }
  int Started() {
    std::lock_guard<std::mutex> lock(mu_);
    return started_;
  }
  // Waits until at least `n` started; false after `timeout`.
  bool WaitStarted(int n, std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return started_ >= n; });
  }
  int MaxPending() {
    std::lock_guard<std::mutex> lock(mu_);
    return max_pending_;
  }
  // Completes the oldest pending function.
  void CompleteOne() {
    CallbackOnComplete cb;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (pending_.empty()) return;
      cb = pending_.front();
      pending_.pop_front();
    }
    cb();
  }
  // Completes `total` functions pushed by others one at a time, checking
  // before each that no more than `max` beyond those completed have started.
  void CompleteWithinBound(int max, int total, const char* who) {
    for (int done = 0; done < total; ++done) {
      ASSERT_TRUE(WaitPending(std::min(max, total - done))) << "after " << done << " completions";
      EXPECT_FALSE(WaitStarted(done + max + 1, kQuiet)) << who << " exceeded max_in_flight";
      CompleteOne();
    }
  }
  void CompleteAll() {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (pending_.empty()) return;
      }
      CompleteOne();
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<CallbackOnComplete> pending_;  // guarded by mu_
  int max_pending_ = 0;                     // guarded by mu_
  int started_ = 0;                         // guarded by mu_
};

TEST_P(BackpressureTest, PushWaitsWhileMaxInFlightFunctionsAreUnfinished) {
  constexpr int kMax = 4;
  constexpr int kTotal = 12;
  InFlight fns;
  auto e = MakeEngine(kMax);
  Counter returned;
  std::thread pusher([&] {
    for (int i = 0; i < kTotal; ++i) {
      e->PushAsync(fns.Fn(), Context::CPU(), {}, {});
      returned.Add();
    }
  });
  for (int done = 0; done < kTotal; ++done) {
    const int expect_pending = std::min(kMax, kTotal - done);
    ASSERT_TRUE(fns.WaitPending(expect_pending)) << "after " << done << " completions";
    if (done + kMax < kTotal) {
      // The engine is full: the next push must wait until we finish one.
      ASSERT_TRUE(returned.WaitAtLeast(done + kMax));
      EXPECT_FALSE(returned.WaitAtLeast(done + kMax + 1, kQuiet))
          << "a push returned although max_in_flight functions were unfinished";
      EXPECT_EQ(fns.Started(), done + kMax) << "a push exceeded max_in_flight";
    }
    fns.CompleteOne();
  }
  pusher.join();
  fns.CompleteAll();
  e->WaitForAll();
  EXPECT_EQ(fns.Started(), kTotal);
  EXPECT_LE(fns.MaxPending(), kMax);
}

TEST_P(BackpressureTest, FastPusherNeverGetsMoreThanMaxInFlightAhead) {
  constexpr std::size_t kMax = 64;
  constexpr int kPushes = 20000;
  std::atomic<long> finished{0};
  long chain = 0;  // plain, ordered by v
  long max_ahead = 0;
  auto e = MakeEngine(kMax);
  VarHandle v = e->NewVariable();
  for (int i = 1; i <= kPushes; ++i) {
    e->PushSync(
        [&](RunContext) {
          ++chain;
          ++finished;
        },
        Context::CPU(), {}, {v});
    // `finished` counts a function before the engine does, so i - finished
    // never exceeds the engine's own in-flight count.
    max_ahead = std::max(max_ahead, i - finished.load());
  }
  e->WaitForAll();
  EXPECT_EQ(chain, kPushes);
  EXPECT_LE(max_ahead, static_cast<long>(kMax));
}

TEST_P(BackpressureTest, SeveralPushersTogetherStayWithinTheBound) {
  constexpr int kMax = 2;
  constexpr int kPushers = 3;
  constexpr int kPerPusher = 4;
  constexpr int kTotal = kPushers * kPerPusher;
  InFlight fns;
  auto e = MakeEngine(kMax);
  std::vector<std::thread> pushers;
  for (int p = 0; p < kPushers; ++p) {
    pushers.emplace_back([&] {
      for (int i = 0; i < kPerPusher; ++i) e->PushAsync(fns.Fn(), Context::CPU(), {}, {});
    });
  }
  fns.CompleteWithinBound(kMax, kTotal, "pushers together");
  for (auto& t : pushers) t.join();
  fns.CompleteAll();
  e->WaitForAll();
  EXPECT_EQ(fns.Started(), kTotal);
  EXPECT_LE(fns.MaxPending(), kMax) << "more than max_in_flight functions were in flight";
}

// A worker tells a waiting pusher about its completions in batches (see
// engine/in_flight_limiter.h). Here the one worker finishes one function,
// which frees room, and then runs a function that blocks until the waiting
// pusher gets that room: the pusher must learn of the completion although
// the worker neither finishes a batch nor runs dry.
TEST_P(BackpressureTest, AWaitingPusherSeesACompletionWhoseWorkerStaysBusy) {
  if (!threaded()) GTEST_SKIP() << "the naive engine runs each function at push: nothing waits";
  constexpr std::size_t kMax = 16;  // a batch is kMax / 4 releases
  EngineOptions o = Options();
  o.max_in_flight = kMax;
  o.cpu_worker_threads = 1;
  auto e = CreateEngine(o);
  Event release_first;
  Event pusher_got_room;
  std::atomic<bool> second_saw_room{false};
  e->PushSync([&](RunContext) { release_first.WaitFor(); }, Context::CPU(), {}, {});
  e->PushSync([&](RunContext) { second_saw_room = pusher_got_room.WaitFor(); }, Context::CPU(), {},
              {});
  for (std::size_t i = 2; i < kMax; ++i) e->PushSync([](RunContext) {}, Context::CPU(), {}, {});
  std::thread pusher([&] {
    e->PushSync([](RunContext) {}, Context::CPU(), {}, {});
    pusher_got_room.Notify();
  });
  EXPECT_FALSE(pusher_got_room.WaitFor(kQuiet)) << "a push exceeded max_in_flight";
  release_first.Notify();  // frees one unit; the worker then blocks in the second function
  EXPECT_TRUE(pusher_got_room.WaitFor()) << "the pusher never learned that a function finished";
  pusher.join();
  e->WaitForAll();
  EXPECT_TRUE(second_saw_room.load());
}

TEST_P(BackpressureTest, PushesFromInsideFunctionsAreNotHeldBack) {
  constexpr int kChildren = 20;
  std::atomic<int> children{0};
  Event parent_pushed_all;
  auto e = MakeEngine(2);
  VarHandle v = e->NewVariable();
  e->PushSync(
      [&](RunContext) {
        for (int i = 0; i < kChildren; ++i) {
          e->PushSync([&](RunContext) { ++children; }, Context::CPU(), {}, {});
        }
        parent_pushed_all.Notify();
      },
      Context::CPU(), {}, {v});
  EXPECT_TRUE(parent_pushed_all.WaitFor())
      << "a push from inside a function waited for backpressure (it could deadlock)";
  e->WaitForAll();
  EXPECT_EQ(children.load(), kChildren);
}

// Only this engine's own threads skip the wait: a function running on
// another engine is a pusher from outside like any thread.
TEST_P(BackpressureTest, PushesFromAnotherEnginesFunctionsAreHeldBack) {
  constexpr int kBound = 3;
  constexpr int kPushes = 10;
  InFlight fns;
  auto e = MakeEngine(kBound);
  EngineOptions other_options;
  other_options.kind = EngineKind::kPooled;
  other_options.cpu_worker_threads = 1;
  auto other = CreateEngine(other_options);
  other->PushSync(
      [&](RunContext) {
        for (int i = 0; i < kPushes; ++i) e->PushAsync(fns.Fn(), Context::CPU(), {}, {});
      },
      Context::CPU(), {}, {});
  fns.CompleteWithinBound(kBound, kPushes, "a push from another engine's function");
  other->WaitForAll();
  fns.CompleteAll();
  e->WaitForAll();
  EXPECT_EQ(fns.Started(), kPushes);
  EXPECT_LE(fns.MaxPending(), kBound);
}

TEST_P(BackpressureTest, DeleteVariableIsNotHeldBackWhenTheEngineIsFull) {
  InFlight fns;
  Event deleted;
  auto e = MakeEngine(2);
  VarHandle doomed = e->NewVariable();
  e->PushAsync(fns.Fn(), Context::CPU(), {}, {});
  e->PushAsync(fns.Fn(), Context::CPU(), {}, {});
  ASSERT_TRUE(fns.WaitPending(2));
  std::thread deleter([&] {
    e->DeleteVariable([&](RunContext) { deleted.Notify(); }, Context::CPU(), doomed);
  });
  EXPECT_TRUE(deleted.WaitFor()) << "DeleteVariable waited for backpressure: memory cannot come back";
  fns.CompleteAll();
  deleter.join();
  e->WaitForAll();
}

// A closure may hold an object whose destructor pushes (a buffer handed
// back through the engine, say). When an async function is finished by a
// thread outside the engine calling its callback, that thread destroys the
// closure, and its push may wait for room. The finished function's room
// must be back by then: with max_in_flight = 1 the push waited for its own
// caller, and the callback never returned.
TEST_P(BackpressureTest, AClosureDestroyedByTheCallbacksCallerMayPushWhenTheEngineIsFull) {
  struct State {
    Event pushed_ran;
  };
  // Pushes when the last copy of the closure that holds it goes.
  struct PushOnDestroy {
    PushOnDestroy(Engine* e, VarHandle v, std::shared_ptr<State> s)
        : engine(e), var(v), state(std::move(s)) {}
    PushOnDestroy(const PushOnDestroy&) = delete;
    PushOnDestroy& operator=(const PushOnDestroy&) = delete;
    Engine* engine;
    VarHandle var;
    std::shared_ptr<State> state;
    ~PushOnDestroy() {
      engine->PushSync([s = state](RunContext) { s->pushed_ran.Notify(); }, Context::CPU(), {},
                       {var});
    }
  };
  auto e = MakeEngine(1);
  auto state = std::make_shared<State>();
  VarHandle a = e->NewVariable();
  VarHandle v = e->NewVariable();
  if (!CallbackCallerDestroysTheClosure(e, a, std::make_shared<PushOnDestroy>(e.get(), v, state))) {
    ADD_FAILURE() << "the callback's caller waited for room its own function held";
    return;
  }
  EXPECT_TRUE(state->pushed_ran.WaitFor());
  e->WaitForAll();
}

// A deleted operator whose last push finishes on a worker is freed by that
// worker between functions (when it hands back its batch of finished
// pushes), so its closure's destructor runs there, inside no function. A
// push from that destructor must not wait for room either: the worker it
// would block may be the one that has to run what frees the room. Here the
// room is full when the destructor pushes (a held function and one queued
// behind it), and the destructor's push must go through.
TEST_P(BackpressureTest, AClosureOfADeletedOperatorFreedOnAWorkerMayPushWhenTheEngineIsFull) {
  if (!threaded()) GTEST_SKIP() << "the naive engine has no workers";
  struct State {
    Engine* engine;
    VarHandle var;
    Event go;          // lets the operator's one push finish
    Event room_taken;  // the main thread's push got the operator's room
    Event pushed_ran;  // the destructor's push ran
  };
  struct PushOnDestroy {
    explicit PushOnDestroy(std::shared_ptr<State> s) : state(std::move(s)) {}
    PushOnDestroy(const PushOnDestroy&) = delete;
    PushOnDestroy& operator=(const PushOnDestroy&) = delete;
    std::shared_ptr<State> state;
    ~PushOnDestroy() {
      state->room_taken.WaitFor();
      state->engine->PushSync([s = state](RunContext) { s->pushed_ran.Notify(); }, Context::CPU(),
                              {}, {state->var});
    }
  };
  auto e = MakeEngine(2);
  auto state = std::make_shared<State>();
  state->engine = e.get();
  state->var = e->NewVariable();
  VarHandle held = e->NewVariable();
  VarHandle a = e->NewVariable();
  Hold hold(*e, {}, {held});  // one unit of room, until the end
  OprHandle op = e->NewOperator(
      [s = state, holder = std::make_shared<PushOnDestroy>(state)](RunContext,
                                                                   CallbackOnComplete cb) {
        s->go.WaitFor();
        cb();
      },
      {}, {a});
  e->Push(op, Context::CPU());  // the other unit
  e->DeleteOperator(op);        // takes effect when that push finishes, on a worker
  state->go.Notify();
  // Waits for the operator's room, then queues behind the held var: the
  // room stays full until the hold is released.
  e->PushSync([](RunContext) {}, Context::CPU(), {}, {held});
  state->room_taken.Notify();
  EXPECT_TRUE(state->pushed_ran.WaitFor())
      << "a push from a closure destroyed on a worker waited for room that worker had to free";
  hold.Release();
  e->WaitForAll();
}

TEST_P(BackpressureTest, DeletionsRunAheadOfQueuedNormalWork) {
  if (!threaded()) GTEST_SKIP() << "the naive engine runs each function at push: nothing queues";
  std::mutex mu;
  std::vector<char> order;  // guarded by mu
  Counter ran;
  auto record = [&](char c) {
    {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(c);
    }
    ran.Add();
  };
  std::vector<std::unique_ptr<Gate>> gates;
  for (int i = 0; i < workers(); ++i) {
    gates.push_back(std::make_unique<Gate>());
    engine().PushSync(gates.back()->Body(), Context::CPU(), {}, {});
  }
  for (auto& g : gates) ASSERT_TRUE(g->WaitStarted());
  VarHandle doomed = engine().NewVariable();
  for (int i = 0; i < 5; ++i) {
    engine().PushSync([&](RunContext) { record('n'); }, Context::CPU(), {}, {}, FnProperty::kNormal,
                      kMaxPriority);
  }
  engine().DeleteVariable([&](RunContext) { record('d'); }, Context::CPU(), doomed);
  gates[0]->Open();
  EXPECT_TRUE(ran.WaitAtLeast(6));
  for (auto& g : gates) g->Open();
  engine().WaitForAll();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_THAT(order, ElementsAreArray({'d', 'n', 'n', 'n', 'n', 'n'}))
      << "a deletion waited behind normal work, even of the highest priority";
}

DEPENGINE_INSTANTIATE_ALL_ENGINES(BackpressureTest);

}  // namespace
}  // namespace depengine::test
