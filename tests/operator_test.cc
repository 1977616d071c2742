// Semantics point 5, operators: NewOperator + Push reuse one prebuilt
// operator with no per-push allocation of closures or var lists;
// DeleteOperator takes effect after the operator's pending pushes finish.
#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "alloc_counter.h"
#include "engine_fixture.h"

namespace depengine::test {
namespace {

using ::testing::AnyOf;
using ::testing::Contains;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::Not;

class OperatorTest : public EngineTest {};

TEST_P(OperatorTest, EachPushRunsTheOperatorOnceOrderedWithOtherFunctions) {
  std::vector<int> log;  // plain, ordered by v
  int op_runs = 0;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  OprHandle op = engine().NewOperator(
      [&](RunContext, CallbackOnComplete cb) {
        log.push_back(-1);
        ++op_runs;
        cb();
      },
      {}, {v}, FnProperty::kNormal, "append");
  std::vector<int> expected;
  for (int i = 0; i < 50; ++i) {
    engine().Push(op, Context::CPU());
    expected.push_back(-1);
    engine().PushSync([&, i](RunContext) { log.push_back(i); }, Context::CPU(), {}, {v});
    expected.push_back(i);
  }
  engine().WaitForVar(v);
  EXPECT_THAT(log, ElementsAreArray(expected));
  EXPECT_EQ(op_runs, 50);
  engine().DeleteOperator(op);
}

TEST_P(OperatorTest, OperatorReadsAndWritesItsVarsLikePushAsync) {
  // op: b = a + b. Interleaved with writes of a.
  long a_value = 0, b_value = 0;  // plain
  DrainGuard drain(engine());
  VarHandle a = engine().NewVariable();
  VarHandle b = engine().NewVariable();
  OprHandle op = engine().NewOperator(
      [&](RunContext, CallbackOnComplete cb) {
        b_value += a_value;
        cb();
      },
      {a}, {b});
  long serial_a = 0, serial_b = 0;
  for (int i = 1; i <= 40; ++i) {
    engine().PushSync([&, i](RunContext) { a_value = i; }, Context::CPU(), {}, {a});
    serial_a = i;
    engine().Push(op, Context::CPU());
    serial_b += serial_a;
  }
  engine().WaitForVar(b);
  EXPECT_EQ(b_value, serial_b);
  engine().DeleteOperator(op);
}

// More vars than an operator keeps beside its push counter (two): the rest
// live in a separate list, and every one of them must order the pushes.
TEST_P(OperatorTest, OperatorWithManyVarsOrdersEveryOne) {
  long in[3] = {0, 0, 0};  // read by the operator
  long sum = 0, copy = 0;  // written by it
  DrainGuard drain(engine());
  std::vector<VarHandle> reads = {engine().NewVariable(), engine().NewVariable(),
                                  engine().NewVariable()};
  std::vector<VarHandle> writes = {engine().NewVariable(), engine().NewVariable()};
  // Listed twice and out of order: NewOperator merges and sorts them.
  OprHandle op = engine().NewOperator(
      [&](RunContext, CallbackOnComplete cb) {
        sum += in[0] + in[1] + in[2];
        copy = sum;
        cb();
      },
      {reads[2], reads[0], reads[1], reads[0]}, {writes[1], writes[0]});
  long serial = 0;
  std::vector<long> seen;
  for (int i = 1; i <= 30; ++i) {
    for (int k = 0; k < 3; ++k) {
      // The writer takes a while, so a push that skipped the var would
      // read the old value.
      engine().PushSync(
          [&, i, k](RunContext) {
            const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
            while (std::chrono::steady_clock::now() < until) {
            }
            in[k] = i * (k + 1) * 1000 + k;
          },
          Context::CPU(), {}, {reads[static_cast<std::size_t>(k)]});
    }
    engine().Push(op, Context::CPU());
    serial += i * 1000 + 0 + i * 2000 + 1 + i * 3000 + 2;
    engine().PushSync([&](RunContext) { seen.push_back(copy == sum ? sum : -1); }, Context::CPU(),
                      writes, {});
  }
  engine().WaitForAll();
  EXPECT_EQ(sum, serial);
  ASSERT_EQ(seen.size(), 30u);
  EXPECT_EQ(seen.back(), serial);
  EXPECT_THAT(seen, Not(Contains(-1)));
  engine().DeleteOperator(op);
}

TEST_P(OperatorTest, OperatorReceivesThePushContextAndMayCompleteElsewhere) {
  std::vector<Context> seen;  // plain, ordered by v
  Completer completer;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  OprHandle op = engine().NewOperator(
      [&](RunContext r, CallbackOnComplete cb) {
        seen.push_back(r.ctx);
        completer.Post([cb] { cb(); });
      },
      {}, {v});
  engine().Push(op, Context::CPU(0));
  engine().Push(op, Context::CPU(1), 3);
  engine().Push(op, Context::CPUPinned(0), -3, true);
  engine().WaitForVar(v);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_TRUE(seen[0] == Context::CPU(0));
  EXPECT_TRUE(seen[1] == Context::CPU(1));
  EXPECT_TRUE(seen[2] == Context::CPUPinned(0));
  engine().DeleteOperator(op);
}

TEST_P(OperatorTest, DeleteOperatorTakesEffectAfterItsPendingPushesFinish) {
  std::atomic<int> runs{0};
  auto sentinel = std::make_shared<int>(0);  // captured by the operator's closure
  {
    DrainGuard drain(engine());
    VarHandle v = engine().NewVariable();
    OprHandle op = engine().NewOperator(
        [&runs, sentinel](RunContext, CallbackOnComplete cb) {
          ++runs;
          cb();
        },
        {}, {v});
    Hold hold(engine(), {}, {v});
    ASSERT_TRUE(hold.WaitStarted());
    for (int i = 0; i < 3; ++i) engine().Push(op, Context::CPU());
    engine().DeleteOperator(op);
    EXPECT_THAT(MessageOf<std::logic_error>([&] { engine().Push(op, Context::CPU()); }),
                HasSubstr("deleted"));
    EXPECT_EQ(runs.load(), 0);
    hold.Release();
    engine().WaitForAll();
    EXPECT_EQ(runs.load(), 3) << "DeleteOperator dropped pushes made before it";
  }
  engine_.reset();
  EXPECT_EQ(sentinel.use_count(), 1) << "the deleted operator's closure was never destroyed";
}

// A worker that runs out of work frees the deleted operators whose last
// push it finished, destroying their closures there. A destructor that
// calls a held callback readies that function's successors on the worker;
// a kAsync one runs at once, and its own successor must still run, not be
// kept as the next function of a worker that is about to wait for work.
TEST_P(OperatorTest, SuccessorReadiedByAClosureDestroyedOnAWorkerThatRanOutOfWorkRuns) {
  if (!threaded()) GTEST_SKIP() << "the naive engine has no workers";
  DrainGuard drain(engine());
  VarHandle x = engine().NewVariable();
  VarHandle y = engine().NewVariable();
  VarHandle z = engine().NewVariable();
  VarHandle a = engine().NewVariable();
  CallbackOnComplete held = PushAsyncAndHoldItsCallback(engine(), x);
  engine().PushSync([](RunContext) {}, Context::CPU(), {x}, {y}, FnProperty::kAsync);
  Event successor_ran;
  engine().PushSync([&](RunContext) { successor_ran.Notify(); }, Context::CPU(), {y}, {z});
  // Calls `held` when the operator's closure is destroyed.
  struct CallOnDestroy {
    explicit CallOnDestroy(CallbackOnComplete* cb) : cb(cb) {}
    CallOnDestroy(const CallOnDestroy&) = delete;
    CallOnDestroy& operator=(const CallOnDestroy&) = delete;
    ~CallOnDestroy() { (*cb)(); }
    CallbackOnComplete* cb;
  };
  Hold hold(engine(), {}, {a});
  ASSERT_TRUE(hold.WaitStarted());
  OprHandle op = engine().NewOperator(
      [guard = std::make_shared<CallOnDestroy>(&held)](RunContext, CallbackOnComplete cb) { cb(); },
      {}, {a});
  engine().Push(op, Context::CPU());
  engine().DeleteOperator(op);  // the worker that finishes the push frees the closure
  hold.Release();
  const bool ran = successor_ran.WaitFor();
  EXPECT_TRUE(ran) << "the successor stayed with a worker that went to wait for work";
  // Unsticks a stranded successor (a new push wakes its worker), so that a
  // failure does not also hang the drain.
  if (!ran) engine().PushSync([](RunContext) {}, Context::CPU(), {}, {});
  engine().WaitForAll();
}

TEST_P(OperatorTest, PushAfterDeleteOperatorIsRejectedWhileTheLastPushFinishes) {
  // The rejected Push races with the operator's last pending push finishing
  // on a worker (which frees the operator): the rejection must not read the
  // freed operator, and its message names the operator or says it is gone.
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  for (int round = 0; round < 300; ++round) {
    OprHandle op = engine().NewOperator([](RunContext, CallbackOnComplete cb) { cb(); }, {}, {v},
                                        FnProperty::kNormal, "doomed_op");
    engine().Push(op, Context::CPU());
    engine().DeleteOperator(op);
    const std::string message = MessageOf<std::logic_error>([&] { engine().Push(op, Context::CPU()); });
    EXPECT_THAT(message, AnyOf(HasSubstr("'doomed_op'"), HasSubstr("deleted or belongs to another")))
        << "round " << round;
    engine().WaitForAll();
  }
}

TEST_P(OperatorTest, DeletedOperatorsAreFreedByTheTimeWaitForAllReturns) {
  // Operators pushed round robin from several threads (each finished push
  // counted on a worker, in batches), deleted with pushes still pending or
  // with none at all: once WaitForAll returns, every deleted operator's
  // closure is gone, with the engine still alive.
  constexpr int kOperators = 8;
  constexpr int kThreads = 3;
  constexpr int kRounds = 200;
  auto sentinel = std::make_shared<int>(0);
  std::atomic<int> runs{0};
  DrainGuard drain(engine());
  std::vector<VarHandle> vars;
  std::vector<OprHandle> ops;
  for (int k = 0; k < kOperators; ++k) {
    vars.push_back(engine().NewVariable());
    ops.push_back(engine().NewOperator(
        [&runs, sentinel](RunContext, CallbackOnComplete cb) {
          runs.fetch_add(1, std::memory_order_relaxed);
          cb();
        },
        {}, {vars.back()}));
  }
  OprHandle never_pushed =
      engine().NewOperator([sentinel](RunContext, CallbackOnComplete cb) { cb(); }, {vars[0]}, {});
  engine().DeleteOperator(never_pushed);
  {
    Hold hold(engine(), {}, {vars[0]});  // keeps operator 0's pushes pending
    ASSERT_TRUE(hold.WaitStarted());
    std::vector<std::thread> pushers;
    for (int t = 0; t < kThreads; ++t) {
      pushers.emplace_back([&] {
        for (int r = 0; r < kRounds; ++r) {
          for (OprHandle op : ops) engine().Push(op, Context::CPU());
        }
      });
    }
    for (std::thread& t : pushers) t.join();
    for (OprHandle op : ops) engine().DeleteOperator(op);
    hold.Release();
  }
  engine().WaitForAll();
  EXPECT_EQ(runs.load(), kOperators * kThreads * kRounds);
  EXPECT_EQ(sentinel.use_count(), 1) << "a deleted operator outlived WaitForAll";
  for (VarHandle v : vars) engine().DeleteVariable([](RunContext) {}, Context::CPU(), v);
}

// A Push refused after it was counted (here: one of the operator's vars was
// deleted) must still count as finished, or DeleteOperator never frees the
// operator while the engine lives.
TEST_P(OperatorTest, RefusedPushDoesNotKeepADeletedOperatorAlive) {
  auto sentinel = std::make_shared<int>(0);
  DrainGuard drain(engine());
  VarHandle kept = engine().NewVariable();
  VarHandle doomed = engine().NewVariable();
  OprHandle op = engine().NewOperator([sentinel](RunContext, CallbackOnComplete cb) { cb(); },
                                      {kept}, {doomed});
  engine().Push(op, Context::CPU());
  engine().DeleteVariable([](RunContext) {}, Context::CPU(), doomed);
  engine().WaitForAll();
  EXPECT_THAT(MessageOf<std::invalid_argument>([&] { engine().Push(op, Context::CPU()); }),
              HasSubstr("deleted"));
  engine().DeleteOperator(op);
  engine().WaitForAll();
  EXPECT_EQ(sentinel.use_count(), 1) << "a refused push kept the deleted operator alive";
  engine().DeleteVariable([](RunContext) {}, Context::CPU(), kept);
}

// Delete, then create: the new operator must not take the deleted one's
// handle, or Push on the stale handle would run the new operator and
// DeleteOperator would delete it (black-box report, tenth session).
TEST_P(OperatorTest, DeletedOperatorsHandleStaysStaleWhenNewOperatorsAreCreated) {
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  int runs_a = 0, runs_b = 0;
  OprHandle a =
      engine().NewOperator([&](RunContext, CallbackOnComplete cb) { ++runs_a, cb(); }, {}, {v});
  engine().Push(a, Context::CPU());
  engine().WaitForAll();
  engine().DeleteOperator(a);
  engine().WaitForAll();  // a is freed now
  OprHandle b =
      engine().NewOperator([&](RunContext, CallbackOnComplete cb) { ++runs_b, cb(); }, {}, {v});
  EXPECT_NE(a, b);
  EXPECT_THROW(engine().Push(a, Context::CPU()), std::logic_error);
  EXPECT_THROW(engine().DeleteOperator(a), std::logic_error);
  engine().Push(b, Context::CPU());
  engine().WaitForAll();
  EXPECT_EQ(runs_a, 1);
  EXPECT_EQ(runs_b, 1);
  engine().DeleteOperator(b);
  engine().DeleteVariable([](RunContext) {}, Context::CPU(), v);
}

TEST_P(OperatorTest, OperatorsNeverDeletedAreFreedWithTheEngine) {
  auto sentinel = std::make_shared<int>(0);
  VarHandle v = engine().NewVariable();
  OprHandle pushed = engine().NewOperator(
      [sentinel](RunContext, CallbackOnComplete cb) { cb(); }, {}, {v});
  engine().NewOperator([sentinel](RunContext, CallbackOnComplete cb) { cb(); }, {v}, {});
  engine().Push(pushed, Context::CPU());
  engine().WaitForAll();
  engine_.reset();
  EXPECT_EQ(sentinel.use_count(), 1) << "an operator's closure outlived its engine";
}

TEST_P(OperatorTest, FailingOperatorFailsItsWrittenVars) {
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  OprHandle op = engine().NewOperator(
      [](RunContext, CallbackOnComplete cb) { cb(std::make_exception_ptr(std::runtime_error("op failed"))); },
      {}, {v});
  engine().Push(op, Context::CPU());
  EXPECT_THAT(MessageOf<std::runtime_error>([&] { engine().WaitForVar(v); }), HasSubstr("op failed"));
  engine().DeleteOperator(op);
}

TEST_P(OperatorTest, PushAllocatesNothingPerPush) {
  if (!AllocationCountingAvailable()) {
    GTEST_SKIP() << "sanitizer builds own operator new: allocations are counted in other builds";
  }
  // Rounds of kBatch pushes, each drained: after the warm-up rounds the
  // engine's object pools hold enough blocks, so a steady program of pushes
  // should allocate nothing.
  constexpr int kBatch = 500;
  constexpr int kWarmupRounds = 6;
  constexpr int kRounds = 20;
  long runs = 0;  // plain, ordered by v
  VarHandle v = engine().NewVariable();
  VarHandle r = engine().NewVariable();
  VarHandle r2 = engine().NewVariable();
  OprHandle op = engine().NewOperator(
      [&](RunContext, CallbackOnComplete cb) {
        ++runs;
        cb();
      },
      {r, r2}, {v});
  for (int round = 0; round < kWarmupRounds; ++round) {
    for (int i = 0; i < kBatch; ++i) engine().Push(op, Context::CPU());
    engine().WaitForAll();
  }
  long during_pushes = 0;
  for (int round = 0; round < kRounds; ++round) {
    StartCountingAllocations();
    for (int i = 0; i < kBatch; ++i) engine().Push(op, Context::CPU());
    during_pushes += StopCountingAllocations();
    engine().WaitForAll();
  }
  EXPECT_EQ(runs, static_cast<long>(kBatch) * (kWarmupRounds + kRounds));
  // A closure or var list per push would show up as at least one allocation
  // per push; an object pool growing now and then is allowed.
  EXPECT_LT(during_pushes, kBatch * kRounds / 20)
      << during_pushes << " allocations during " << kBatch * kRounds
      << " pushes of a prebuilt operator";
  engine().DeleteOperator(op);
}

DEPENGINE_INSTANTIATE_ALL_ENGINES(OperatorTest);

}  // namespace
}  // namespace depengine::test
