// Semantics point 3: push calls return at once; every call is safe from
// several threads at once; one thread's pushes keep that thread's program
// order.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <latch>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "engine_fixture.h"
#include "serial_order.h"
#include "test_scale.h"

namespace depengine::test {
namespace {

class ThreadsTest : public EngineTest {};

TEST_P(ThreadsTest, PushReturnsAtOnceWhenTheFunctionMustWait) {
  Event pushed;
  Event ran;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  Hold hold(engine(), {}, {v});
  ASSERT_TRUE(hold.WaitStarted());
  std::thread pusher([&] {
    engine().PushSync([&](RunContext) { ran.Notify(); }, Context::CPU(), {}, {v});
    pushed.Notify();
  });
  EXPECT_TRUE(pushed.WaitFor()) << "PushSync waited for the function's var";
  EXPECT_FALSE(ran.IsSet());
  hold.Release();
  pusher.join();
  EXPECT_TRUE(ran.WaitFor());
}

TEST_P(ThreadsTest, PushReturnsAtOnceWhileTheFunctionRuns) {
  if (!threaded()) GTEST_SKIP() << "the naive engine runs a ready function inside the push";
  Gate gate;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  engine().PushSync(gate.Body(), Context::CPU(), {}, {v});  // returns: we get here
  EXPECT_TRUE(gate.WaitStarted());
  gate.Open();
  engine().WaitForAll();
  EXPECT_FALSE(gate.TimedOut()) << "PushSync returned only after its function gave up waiting";
}

TEST_P(ThreadsTest, PushesFromSeveralThreadsKeepEachThreadsOrder) {
  constexpr int kThreads = 4;
  constexpr int kPushes = 300;
  std::vector<int> own_log[kThreads];               // plain, ordered by own[t]
  std::vector<std::pair<int, int>> shared_log;      // plain, ordered by shared
  long read_sum[kThreads] = {};                     // plain, ordered by own[t]
  long shared_value = 7;                            // written once, read by many
  DrainGuard drain(engine());
  VarHandle own[kThreads];
  for (auto& v : own) v = engine().NewVariable();
  VarHandle shared = engine().NewVariable();
  VarHandle ro = engine().NewVariable();
  engine().PushSync([&](RunContext) { shared_value = 11; }, Context::CPU(), {}, {ro});
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPushes; ++i) {
        engine().PushSync([&, t, i](RunContext) { own_log[t].push_back(i); }, Context::CPU(), {},
                          {own[t]});
        engine().PushSync([&, t, i](RunContext) { shared_log.emplace_back(t, i); }, Context::CPU(),
                          {}, {shared});
        engine().PushSync([&, t](RunContext) { read_sum[t] += shared_value; }, Context::CPU(), {ro},
                          {own[t]});
      }
    });
  }
  for (auto& th : threads) th.join();
  engine().WaitForAll();
  std::vector<int> expected(kPushes);
  for (int i = 0; i < kPushes; ++i) expected[i] = i;
  int next[kThreads] = {};
  for (const auto& [t, i] : shared_log) {
    EXPECT_EQ(i, next[t]) << "thread " << t << "'s pushes on the shared var ran out of order";
    next[t] = i + 1;
  }
  EXPECT_EQ(shared_log.size(), static_cast<std::size_t>(kThreads * kPushes));
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(own_log[t], expected) << "thread " << t;
    EXPECT_EQ(read_sum[t], 11L * kPushes) << "thread " << t;
  }
}

TEST_P(ThreadsTest, PushAfterAnotherThreadsPushReturnedIsOrderedAfterIt) {
  constexpr int kRounds = 200;
  std::vector<int> log;  // plain, ordered by v
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  // Two threads take turns; each push starts only after the other thread's
  // previous push returned, so the log must alternate.
  std::mutex mu;
  std::condition_variable cv;
  int turn = 0;  // guarded by mu
  auto player = [&](int me) {
    for (int r = 0; r < kRounds; ++r) {
      std::unique_lock<std::mutex> lock(mu);
      if (!cv.wait_for(lock, kTimeout, [&] { return turn % 2 == me; })) return;
      engine().PushSync([&, me](RunContext) { log.push_back(me); }, Context::CPU(), {}, {v});
      ++turn;
      cv.notify_all();
    }
  };
  std::thread a(player, 0), b(player, 1);
  a.join();
  b.join();
  engine().WaitForAll();
  ASSERT_EQ(log.size(), static_cast<std::size_t>(2 * kRounds));
  for (std::size_t i = 0; i < log.size(); ++i) ASSERT_EQ(log[i], static_cast<int>(i % 2)) << i;
}

TEST_P(ThreadsTest, ConcurrentPushesOnSharedVarsInOppositeOrderNeverDeadlock) {
  constexpr int kPushes = 1500;
  long ab = 0, bc = 0, ca = 0;  // plain: each pair guarded by writing both vars
  DrainGuard drain(engine());
  VarHandle a = engine().NewVariable();
  VarHandle b = engine().NewVariable();
  VarHandle c = engine().NewVariable();
  auto pusher = [&](std::vector<VarHandle> writes, long* counter) {
    for (int i = 0; i < kPushes; ++i) {
      engine().PushSync([counter](RunContext) { ++*counter; }, Context::CPU(), {}, writes);
    }
  };
  std::thread t1(pusher, std::vector<VarHandle>{a, b}, &ab);
  std::thread t2(pusher, std::vector<VarHandle>{b, c}, &bc);
  std::thread t3(pusher, std::vector<VarHandle>{c, a}, &ca);
  std::thread t4(pusher, std::vector<VarHandle>{b, a}, &ab);  // same counter: a and b serialize
  t1.join();
  t2.join();
  t3.join();
  t4.join();
  engine().WaitForAll();
  EXPECT_EQ(ab, 2L * kPushes);
  EXPECT_EQ(bc, kPushes);
  EXPECT_EQ(ca, kPushes);
}

TEST_P(ThreadsTest, EveryCallFromSeveralThreadsAtOnce) {
  // Each thread creates vars and operators, pushes, waits and deletes, while
  // the others do the same and sometimes call WaitForAll.
  constexpr int kThreads = 4;
  constexpr int kRounds = 150;
  std::atomic<int> wrong{0};
  std::atomic<int> deletes{0};
  std::atomic<int> operator_runs{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        VarHandle v = engine().NewVariable();
        VarHandle u = engine().NewVariable();
        auto value = std::make_shared<int>(0);
        engine().PushSync([value](RunContext) { *value = 1; }, Context::CPU(), {}, {v});
        engine().PushAsync(
            [value](RunContext, CallbackOnComplete cb) {
              *value *= 10;
              cb();
            },
            Context::CPU(), {}, {v});
        OprHandle op = engine().NewOperator(
            [value, &operator_runs](RunContext, CallbackOnComplete cb) {
              *value += 5;
              ++operator_runs;
              cb();
            },
            {u}, {v});
        engine().Push(op, Context::CPU());
        engine().DeleteOperator(op);
        engine().WaitForVar(v);
        if (*value != 15) ++wrong;
        if (r % 25 == t) engine().WaitForAll();
        engine().DeleteVariable([&](RunContext) { ++deletes; }, Context::CPU(), v);
        engine().DeleteVariable([&](RunContext) { ++deletes; }, Context::CPU(), u);
      }
    });
  }
  for (auto& th : threads) th.join();
  engine().WaitForAll();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(operator_runs.load(), kThreads * kRounds);
  EXPECT_EQ(deletes.load(), 2 * kThreads * kRounds);
}

TEST_P(ThreadsTest, WaitForAllFromSeveralThreadsSeesEachThreadsEarlierPushes) {
  constexpr int kThreads = 3;
  constexpr int kRounds = 40;
  constexpr int kPerRound = 10;
  std::atomic<int> done[kThreads] = {};
  std::atomic<int> early{0};
  std::vector<std::thread> threads;
  DrainGuard drain(engine());
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      VarHandle v = engine().NewVariable();
      for (int r = 0; r < kRounds; ++r) {
        for (int i = 0; i < kPerRound; ++i) {
          engine().PushSync([&, t](RunContext) { ++done[t]; }, Context::CPU(), {}, {v});
        }
        engine().WaitForAll();
        if (done[t].load() != (r + 1) * kPerRound) ++early;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(early.load(), 0) << "WaitForAll returned before a function pushed before it finished";
}

// Pushes from several threads on shared vars, with random read and write
// sets, must run as some serial program would: one that interleaves the
// threads' pushes, each thread's in its own order (SerialOrderLog, in
// tools/common/serial_order.h, says how that is checked).
//
// With one var per function, a use granted out of its var's order shows as
// a cycle (checked by hand: a read let past a waiting write gave thousands
// of functions on cycles). With several, the same bug mostly deadlocks
// instead, and ctest's timeout fails the test.
class SerializableTest : public ThreadsTest {
 protected:
  void CheckSerializable(int max_vars_per_function) {
    constexpr int kThreads = 4;
    constexpr int kVars = 6;
    const int pushes = support::Scaled(4000, 200);
    const int total = kThreads * pushes;
    support::SerialOrderLog log(kVars, total);
    std::vector<std::atomic<int>> runs(static_cast<std::size_t>(total));
    std::vector<std::vector<int>> pushed(kThreads);  // each thread's functions, in push order
    DrainGuard drain(engine());
    VarHandle vars[kVars];
    for (auto& v : vars) v = engine().NewVariable();

    struct VarUse {
      int var;
      bool write;
    };
    std::latch start(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937 rng(static_cast<unsigned>(1234 + t));
        start.arrive_and_wait();  // all push at once
        for (int i = 0; i < pushes; ++i) {
          if (i % 64 == 63) std::this_thread::yield();  // let the pushers interleave on 2 cores
          const int fn = t * pushes + i;
          std::vector<VarUse> uses;
          const int n = 1 + static_cast<int>(rng() % static_cast<unsigned>(max_vars_per_function));
          while (static_cast<int>(uses.size()) < n) {
            const int v = static_cast<int>(rng() % kVars);
            if (std::none_of(uses.begin(), uses.end(), [v](const VarUse& u) { return u.var == v; })) {
              uses.push_back({v, rng() % 2 == 0});
            }
          }
          std::vector<VarHandle> reads, writes;
          for (const VarUse& u : uses) (u.write ? writes : reads).push_back(vars[u.var]);
          auto body = [&log, &runs, fn, uses] {
            for (const VarUse& u : uses) log.Start(u.var, fn, u.write);
            std::this_thread::yield();  // let conflicting uses overlap, if the engine allowed it
            for (const VarUse& u : uses) log.Finish(u.var, u.write);
            runs[static_cast<std::size_t>(fn)].fetch_add(1);
          };
          if (i % 3 == 0) {
            engine().PushAsync([body](RunContext, CallbackOnComplete done) { body(); done(); },
                               Context::CPU(), reads, writes);
          } else {
            engine().PushSync([body](RunContext) { body(); }, Context::CPU(), reads, writes);
          }
          pushed[static_cast<std::size_t>(t)].push_back(fn);
        }
      });
    }
    for (auto& th : threads) th.join();
    engine().WaitForAll();

    for (int fn = 0; fn < total; ++fn) {
      ASSERT_EQ(runs[static_cast<std::size_t>(fn)].load(), 1) << "function " << fn << " ran that often";
    }
    EXPECT_EQ(log.overlaps(), 0) << "conflicting uses of a var ran at the same time";
    const int on_cycles = log.FunctionsOnCycles(pushed);
    EXPECT_EQ(on_cycles, 0) << on_cycles
                            << " functions lie on or behind a cycle: no serial program of the "
                               "threads' pushes runs them in the order they ran";
  }
};

TEST_P(SerializableTest, PushesOfOneVarFromSeveralThreads) { CheckSerializable(1); }

TEST_P(SerializableTest, PushesOfSeveralVarsFromSeveralThreads) { CheckSerializable(3); }

DEPENGINE_INSTANTIATE_ALL_ENGINES(SerializableTest);
DEPENGINE_INSTANTIATE_ALL_ENGINES(ThreadsTest);

}  // namespace
}  // namespace depengine::test
