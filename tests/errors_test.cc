// Semantics point 7, the error model:
// - an exception that escapes a function, or is passed to its callback,
//   marks every var the function writes as failed;
// - a later function that uses a failed var is skipped and passes the
//   failure on to the vars it writes;
// - WaitForVar(v) rethrows v's failure and clears it from v;
// - WaitForAll rethrows the first failure raised since the previous
//   WaitForAll that no WaitForVar delivered, and clears every var;
// - a throwing function never terminates the process; workers keep running.
#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine_fixture.h"

namespace depengine::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// An exception that carries an id, so tests can tell failures apart.
class TestError : public std::runtime_error {
 public:
  explicit TestError(int id) : std::runtime_error("test error " + std::to_string(id)), id_(id) {}
  int id() const { return id_; }

 private:
  int id_;
};

// The id of the TestError that `f` throws; 0 if it throws nothing, -1 for
// any other exception.
template <class F>
int ErrorIdOf(F&& f) {
  try {
    f();
  } catch (const TestError& e) {
    return e.id();
  } catch (...) {
    return -1;
  }
  return 0;
}

class ErrorsTest : public EngineTest {
 protected:
  int WaitVar(VarHandle v) {
    return ErrorIdOf([&] { engine().WaitForVar(v); });
  }
  int WaitAll() {
    return ErrorIdOf([&] { engine().WaitForAll(); });
  }
  void PushThrow(const std::vector<VarHandle>& reads, const std::vector<VarHandle>& writes,
                 int id) {
    engine().PushSync([id](RunContext) { throw TestError(id); }, Context::CPU(), reads, writes);
  }
};

TEST_P(ErrorsTest, WaitForVarRethrowsTheFailureOfAWrittenVarOnceThenTheVarIsUsable) {
  DrainGuard drain(engine());
  VarHandle r = engine().NewVariable();
  VarHandle w1 = engine().NewVariable();
  VarHandle w2 = engine().NewVariable();
  PushThrow({r}, {w1, w2}, 1);
  EXPECT_EQ(WaitVar(w1), 1);
  EXPECT_EQ(WaitVar(w1), 0) << "WaitForVar did not clear the failure it delivered";
  EXPECT_EQ(WaitVar(r), 0) << "a var the failed function only read was marked failed";
  EXPECT_EQ(WaitVar(w2), 1) << "every var the failed function writes must be failed";
  EXPECT_EQ(WaitAll(), 0) << "WaitForAll repeated a failure that WaitForVar delivered";

  int value = 0;
  engine().PushSync([&](RunContext) { value = 3; }, Context::CPU(), {}, {w1});
  engine().PushSync([&](RunContext) { value += 1; }, Context::CPU(), {w2}, {w1});
  EXPECT_EQ(WaitVar(w1), 0);
  EXPECT_EQ(value, 4);
}

TEST_P(ErrorsTest, FunctionsUsingAFailedVarAreSkippedAndPassTheFailureOn) {
  std::atomic<int> skipped_ran{0};
  bool independent_ran = false;
  DrainGuard drain(engine());
  VarHandle a = engine().NewVariable();
  VarHandle b = engine().NewVariable();
  VarHandle c = engine().NewVariable();
  VarHandle x = engine().NewVariable();
  VarHandle d = engine().NewVariable();
  PushThrow({}, {a}, 2);
  // Reads the failed a: skipped; b and c become failed.
  engine().PushSync([&](RunContext) { ++skipped_ran; }, Context::CPU(), {a, x}, {b, c});
  // Writes the failed b (a use too): skipped.
  engine().PushSync([&](RunContext) { ++skipped_ran; }, Context::CPU(), {}, {b});
  // Reads the failed c: skipped; d becomes failed.
  engine().PushSync([&](RunContext) { ++skipped_ran; }, Context::CPU(), {c}, {d});
  // Uses nothing that failed: runs.
  VarHandle e = engine().NewVariable();
  engine().PushSync([&](RunContext) { independent_ran = true; }, Context::CPU(), {x}, {e});

  EXPECT_EQ(WaitVar(d), 2) << "the failure did not pass through two skipped functions";
  EXPECT_EQ(WaitVar(b), 2);
  EXPECT_EQ(WaitVar(c), 2);
  EXPECT_EQ(WaitVar(a), 2);
  EXPECT_EQ(WaitVar(x), 0) << "a var a skipped function only read was marked failed";
  EXPECT_EQ(WaitVar(e), 0);
  EXPECT_EQ(skipped_ran.load(), 0) << "a function that uses a failed var ran";
  EXPECT_TRUE(independent_ran);
  EXPECT_EQ(WaitAll(), 0);
}

// WaitForVar(a) must wait for the readers pushed before it (they use a), so
// they are skipped before it clears a's failure.
TEST_P(ErrorsTest, ReadersOfAFailedVarAreSkippedUntilTheFailureIsCleared) {
  std::atomic<int> ran{0};
  DrainGuard drain(engine());
  VarHandle a = engine().NewVariable();
  PushThrow({}, {a}, 3);
  engine().PushSync([&](RunContext) { ++ran; }, Context::CPU(), {a}, {});
  engine().PushSync([&](RunContext) { ++ran; }, Context::CPU(), {a}, {});
  EXPECT_EQ(WaitVar(a), 3);
  EXPECT_EQ(ran.load(), 0);
  engine().PushSync([&](RunContext) { ++ran; }, Context::CPU(), {a}, {});
  EXPECT_EQ(WaitVar(a), 0);
  EXPECT_EQ(ran.load(), 1) << "a reader pushed after WaitForVar cleared the failure was skipped";
}

TEST_P(ErrorsTest, ErrorPassedToTheCallbackFailsLikeAThrow) {
  Completer completer;
  DrainGuard drain(engine());
  VarHandle a = engine().NewVariable();
  VarHandle b = engine().NewVariable();
  engine().PushAsync(
      [&](RunContext, CallbackOnComplete cb) {
        completer.Post([cb] { cb(std::make_exception_ptr(TestError(4))); });
      },
      Context::CPU(), {}, {a});
  engine().PushAsync(
      [](RunContext, CallbackOnComplete cb) { cb(std::make_exception_ptr(TestError(5))); },
      Context::CPU(), {}, {b});
  EXPECT_EQ(WaitVar(a), 4);
  EXPECT_EQ(WaitVar(b), 5);
  EXPECT_EQ(WaitAll(), 0);
}

TEST_P(ErrorsTest, AsyncFunctionThatThrowsWithoutCallingItsCallbackFails) {
  bool successor_ran = false;
  DrainGuard drain(engine());
  VarHandle a = engine().NewVariable();
  engine().PushAsync([](RunContext, CallbackOnComplete) { throw TestError(6); }, Context::CPU(), {},
                     {a});
  engine().PushSync([&](RunContext) { successor_ran = true; }, Context::CPU(), {}, {a});
  EXPECT_EQ(WaitVar(a), 6);
  EXPECT_FALSE(successor_ran);
}

TEST_P(ErrorsTest, ThrowAfterCallingTheCallbackInsideTheBodyFailsTheWrittenVars) {
  // The callback called from inside the body does not finish the function
  // before the body returns, so what the body throws next still fails it.
  bool successor_ran = false;
  DrainGuard drain(engine());
  VarHandle a = engine().NewVariable();
  VarHandle b = engine().NewVariable();
  engine().PushAsync(
      [](RunContext, CallbackOnComplete cb) {
        cb();
        throw TestError(30);
      },
      Context::CPU(), {}, {a});
  engine().PushSync([&](RunContext) { successor_ran = true; }, Context::CPU(), {a}, {});
  EXPECT_EQ(WaitVar(a), 30);
  EXPECT_FALSE(successor_ran) << "a reader of the failed var was not skipped";
  // An error passed to the callback wins; the later throw is still reported.
  engine().PushAsync(
      [](RunContext, CallbackOnComplete cb) {
        cb(std::make_exception_ptr(TestError(31)));
        throw TestError(32);
      },
      Context::CPU(), {}, {b});
  EXPECT_EQ(WaitVar(b), 31);
  EXPECT_EQ(WaitAll(), 32);
  EXPECT_EQ(WaitAll(), 0);
}

TEST_P(ErrorsTest, WaitForAllRethrowsTheFirstFailureAndClearsEveryVar) {
  DrainGuard drain(engine());
  VarHandle x = engine().NewVariable();
  VarHandle a = engine().NewVariable();
  VarHandle b = engine().NewVariable();
  // The second writes x, which the first reads: it runs after the first,
  // without being skipped (reading does not fail x).
  PushThrow({x}, {a}, 7);
  PushThrow({}, {x, b}, 8);
  EXPECT_EQ(WaitAll(), 7);
  EXPECT_EQ(WaitVar(a), 0) << "WaitForAll did not clear every var";
  EXPECT_EQ(WaitVar(b), 0) << "WaitForAll did not clear every var";
  EXPECT_EQ(WaitVar(x), 0) << "WaitForAll did not clear every var";
  EXPECT_EQ(WaitAll(), 0) << "WaitForAll repeated a failure from before the previous WaitForAll";
}

TEST_P(ErrorsTest, WaitForAllSkipsAFailureThatWaitForVarDelivered) {
  DrainGuard drain(engine());
  VarHandle x = engine().NewVariable();
  VarHandle a = engine().NewVariable();
  VarHandle b = engine().NewVariable();
  PushThrow({x}, {a}, 9);
  PushThrow({}, {x, b}, 10);
  EXPECT_EQ(WaitVar(a), 9);
  EXPECT_EQ(WaitAll(), 10);
  EXPECT_EQ(WaitVar(b), 0);
  EXPECT_EQ(WaitAll(), 0);
}

TEST_P(ErrorsTest, WaitForAllDoesNotRepeatAFailureDeliveredThroughAnotherVar) {
  // One failure reaches a and, through a skipped function, b. WaitForVar(b)
  // delivers it; WaitForAll must not deliver it again, and clears a.
  DrainGuard drain(engine());
  VarHandle a = engine().NewVariable();
  VarHandle b = engine().NewVariable();
  PushThrow({}, {a}, 11);
  engine().PushSync([](RunContext) {}, Context::CPU(), {a}, {b});
  EXPECT_EQ(WaitVar(b), 11);
  EXPECT_EQ(WaitAll(), 0);
  EXPECT_EQ(WaitVar(a), 0);
}

TEST_P(ErrorsTest, FailureOfAFunctionWithoutWrittenVarsReachesWaitForAll) {
  DrainGuard drain(engine());
  VarHandle r = engine().NewVariable();
  PushThrow({r}, {}, 12);
  PushThrow({}, {}, 13);
  const int first = WaitAll();
  // The two are independent, so either may be raised first.
  EXPECT_TRUE(first == 12 || first == 13) << "got " << first;
  EXPECT_EQ(WaitVar(r), 0) << "a var the failed function only read was marked failed";
  EXPECT_EQ(WaitAll(), 0);
}

TEST_P(ErrorsTest, WaitForAllNamesOnStderrTheFailuresItCannotRethrow) {
  // One exception carries one failure: the others that WaitForAll clears
  // must not vanish without a word.
  DrainGuard drain(engine());
  VarHandle a = engine().NewVariable();
  VarHandle b = engine().NewVariable();
  VarHandle c = engine().NewVariable();
  PushThrow({}, {a}, 33);
  PushThrow({}, {b}, 34);
  PushThrow({}, {c}, 35);
  EXPECT_EQ(WaitVar(c), 35);
  ::testing::internal::CaptureStderr();
  const int first = WaitAll();
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(first == 33 || first == 34) << "got " << first;
  EXPECT_THAT(err, HasSubstr(first == 33 ? "test error 34" : "test error 33"));
  EXPECT_THAT(err, Not(HasSubstr("test error 35"))) << "named a failure WaitForVar delivered";
  EXPECT_THAT(err, Not(HasSubstr("test error " + std::to_string(first))));
  EXPECT_EQ(WaitAll(), 0);
}

TEST_P(ErrorsTest, AnEngineDestroyedWithUndeliveredFailuresNamesThemOnStderr) {
  for (bool notified : {false, true}) {
    auto e = CreateEngine(Options());
    VarHandle a = e->NewVariable();
    VarHandle b = e->NewVariable();
    e->PushSync([](RunContext) { throw TestError(41); }, Context::CPU(), {}, {a});
    e->PushSync([](RunContext) { throw TestError(42); }, Context::CPU(), {}, {b});
    try {
      e->WaitForVar(b);
    } catch (const TestError&) {
    }
    if (notified) e->NotifyShutdown();
    ::testing::internal::CaptureStderr();
    e.reset();
    const std::string err = ::testing::internal::GetCapturedStderr();
    if (notified) {
      EXPECT_EQ(err, "") << "NotifyShutdown: the engine should print less";
    } else {
      EXPECT_THAT(err, HasSubstr("destroyed with 1 failure(s)"));
      EXPECT_THAT(err, HasSubstr("test error 41"));
      EXPECT_THAT(err, Not(HasSubstr("test error 42"))) << "named a failure WaitForVar delivered";
    }
  }
}

TEST_P(ErrorsTest, NonStandardExceptionsAreDeliveredUnchanged) {
  DrainGuard drain(engine());
  VarHandle a = engine().NewVariable();
  engine().PushSync([](RunContext) { throw 42; }, Context::CPU(), {}, {a});
  int caught = 0;
  try {
    engine().WaitForVar(a);
  } catch (int e) {
    caught = e;
  }
  EXPECT_EQ(caught, 42);
}

TEST_P(ErrorsTest, WorkersSurviveManyThrowingFunctions) {
  constexpr int kThrowers = 200;
  DrainGuard drain(engine());
  std::vector<VarHandle> vars;
  for (int i = 0; i < kThrowers; ++i) vars.push_back(engine().NewVariable());
  VarHandle chain = engine().NewVariable();
  for (int i = 0; i < kThrowers; ++i) PushThrow({}, {vars[i]}, 100 + i);
  // Independent work pushed after the throwers still runs, in order.
  std::vector<int> log;
  for (int i = 0; i < 50; ++i) {
    engine().PushSync([&, i](RunContext) { log.push_back(i); }, Context::CPU(), {}, {chain});
  }
  EXPECT_EQ(WaitVar(chain), 0);
  EXPECT_EQ(log.size(), 50u);
  for (int i = 0; i < kThrowers; ++i) EXPECT_EQ(WaitVar(vars[i]), 100 + i);
  EXPECT_EQ(WaitAll(), 0);
  // And the engine still works afterwards.
  int value = 0;
  engine().PushSync([&](RunContext) { value = 1; }, Context::CPU(), {}, {chain});
  engine().WaitForAll();
  EXPECT_EQ(value, 1);
}

TEST_P(ErrorsTest, FailuresOfKAsyncAndPrioritizedFunctionsFollowTheSameRules) {
  DrainGuard drain(engine());
  VarHandle a = engine().NewVariable();
  VarHandle b = engine().NewVariable();
  engine().PushSync([](RunContext) { throw TestError(14); }, Context::CPU(), {}, {a},
                    FnProperty::kAsync);
  engine().PushSync([](RunContext) { throw TestError(15); }, Context::CPU(), {}, {b},
                    FnProperty::kCPUPrioritized, 5);
  EXPECT_EQ(WaitVar(a), 14);
  EXPECT_EQ(WaitVar(b), 15);
}

DEPENGINE_INSTANTIATE_ALL_ENGINES(ErrorsTest);

}  // namespace
}  // namespace depengine::test
