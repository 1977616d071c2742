// The misuse catalogue: every bad input the engine documents, on every
// engine kind. Each test checks two things: the exception's type and a
// message that names the problem, and that work pushed before the misuse is
// not lost (it was queued behind a busy var when the misuse happened, and it
// all runs once the var is released).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "depengine/engine.h"
#include "depengine/profiler.h"
#include "reliability_util.h"
#include "stderr_capture.h"

namespace depengine::reliability {
namespace {

constexpr int kEarlier = 64;  // functions pushed before each misuse

class Misuse : public ::testing::TestWithParam<EngineConfig> {
 protected:
  void SetUp() override {
    engine_ = MakeEngine(GetParam());
    blocker_ = engine_->NewVariable();
    for (auto& v : data_) v = engine_->NewVariable();
    for (auto& v : free_) v = engine_->NewVariable();
    gate_ = std::make_unique<Hold>(*engine_, std::vector<VarHandle>{},
                                   std::vector<VarHandle>{blocker_});
    // Earlier work: queued behind the gate, so it is still pending when the
    // misuse happens.
    for (int i = 0; i < kEarlier; ++i) {
      engine_->PushSync([this](RunContext) { earlier_done_.fetch_add(1); }, Context::CPU(),
                        {blocker_}, {data_[i % 4]});
    }
  }

  void TearDown() override {
    if (gate_) gate_->Release();
    engine_->WaitForAll();
    EXPECT_EQ(earlier_done_.load(), kEarlier) << "work pushed before the misuse was lost";
    gate_.reset();
    engine_.reset();
  }

  // Opens the gate, waits for everything and checks the earlier work ran.
  void ReleaseAndCheck() {
    gate_->Release();
    engine_->WaitForAll();
    EXPECT_EQ(earlier_done_.load(), kEarlier) << "work pushed before the misuse was lost";
  }

  std::unique_ptr<Engine> engine_;
  VarHandle blocker_ = nullptr;
  VarHandle data_[4] = {};  // written by the earlier work: busy until the gate opens
  VarHandle free_[4] = {};  // never behind the gate: usable while it is closed
  std::unique_ptr<Hold> gate_;
  std::atomic<int> earlier_done_{0};
};

SyncFn Noop() {
  return [](RunContext) {};
}
AsyncFn AsyncNoop() {
  return [](RunContext, CallbackOnComplete cb) { cb(); };
}

// ------------------------------------------------------------ DeleteVariable twice

TEST_P(Misuse, DeleteVariableTwiceWhileFirstDeletionPending) {
  VarHandle v = engine_->NewVariable();
  engine_->PushSync(Noop(), Context::CPU(), {blocker_}, {v});  // keeps the deletion pending
  std::atomic<int> deleted{0};
  engine_->DeleteVariable([&](RunContext) { deleted.fetch_add(1); }, Context::CPU(), v);
  EXPECT_THROW_NAMING(std::invalid_argument,
                      engine_->DeleteVariable(Noop(), Context::CPU(), v), "DeleteVariable",
                      "twice");
  ReleaseAndCheck();
  EXPECT_EQ(deleted.load(), 1) << "the first deletion must run exactly once";
}

// The var is freed by then: a second engine without a gate lets WaitForAll
// prove it. Then the same on the gated engine, where earlier work must stay.
TEST_P(Misuse, DeleteVariableTwiceAfterFirstDeletionDone) {
  auto fresh = MakeEngine(GetParam());
  VarHandle v = fresh->NewVariable();
  fresh->DeleteVariable(Noop(), Context::CPU(), v);
  fresh->WaitForAll();
  EXPECT_THROW_NAMING(std::invalid_argument, fresh->DeleteVariable(Noop(), Context::CPU(), v),
                      "DeleteVariable", "deleted");
  fresh.reset();

  VarHandle w = engine_->NewVariable();
  std::atomic<bool> freed{false};
  engine_->DeleteVariable([&](RunContext) { freed.store(true); }, Context::CPU(), w);
  while (!freed.load()) std::this_thread::yield();
  // The var is freed right after delete_fn returns, or is about to be: either
  // way the second call is rejected and says why.
  const std::string msg = ThrownMessage<std::invalid_argument>(
      [&] { engine_->DeleteVariable(Noop(), Context::CPU(), w); });
  EXPECT_NE(msg.find("DeleteVariable"), std::string::npos) << msg;
  EXPECT_TRUE(msg.find("deleted") != std::string::npos || msg.find("twice") != std::string::npos)
      << msg;
  ReleaseAndCheck();
}

// ------------------------------------------------------------ deleted operators

TEST_P(Misuse, PushDeletedOperatorWithPushesPending) {
  std::atomic<int> runs{0};
  OprHandle op = engine_->NewOperator(
      [&](RunContext, CallbackOnComplete cb) {
        runs.fetch_add(1);
        cb();
      },
      {blocker_}, {data_[0]}, FnProperty::kNormal, "misuse-op");
  for (int i = 0; i < 10; ++i) engine_->Push(op, Context::CPU());
  engine_->DeleteOperator(op);
  EXPECT_THROW_NAMING(std::logic_error, engine_->Push(op, Context::CPU()), "Push", "deleted");
  ReleaseAndCheck();
  EXPECT_EQ(runs.load(), 10) << "pushes made before DeleteOperator must all run";
}

TEST_P(Misuse, PushDeletedOperatorAfterItWasFreed) {
  OprHandle op = engine_->NewOperator(AsyncNoop(), {}, {data_[1]}, FnProperty::kNormal, "freed-op");
  engine_->DeleteOperator(op);  // no pushes pending: freed at once
  EXPECT_THROW_NAMING(std::logic_error, engine_->Push(op, Context::CPU()), "Push", "deleted");
  ReleaseAndCheck();
}

TEST_P(Misuse, DeleteOperatorTwice) {
  OprHandle op = engine_->NewOperator(AsyncNoop(), {blocker_}, {}, FnProperty::kNormal, "twice");
  engine_->Push(op, Context::CPU());
  engine_->DeleteOperator(op);
  EXPECT_THROW_NAMING(std::logic_error, engine_->DeleteOperator(op), "DeleteOperator",
                      "deleted");
  EXPECT_THROW_NAMING(std::invalid_argument, engine_->DeleteOperator(nullptr), "DeleteOperator",
                      "null");
  ReleaseAndCheck();
}

TEST_P(Misuse, PushNullOperator) {
  EXPECT_THROW_NAMING(std::invalid_argument, engine_->Push(nullptr, Context::CPU()), "Push",
                      "null operator");
  ReleaseAndCheck();
}

// ------------------------------------------------------------ deleted vars

TEST_P(Misuse, WaitForVarOnVarBeingDeleted) {
  VarHandle v = engine_->NewVariable();
  engine_->PushSync(Noop(), Context::CPU(), {blocker_}, {v});
  engine_->DeleteVariable(Noop(), Context::CPU(), v);
  EXPECT_THROW_NAMING(std::invalid_argument, engine_->WaitForVar(v), "WaitForVar", "deleted");
  ReleaseAndCheck();
}

TEST_P(Misuse, WaitForVarOnDeletedVar) {
  auto fresh = MakeEngine(GetParam());
  VarHandle v = fresh->NewVariable();
  fresh->DeleteVariable(Noop(), Context::CPU(), v);
  fresh->WaitForAll();
  EXPECT_THROW_NAMING(std::invalid_argument, fresh->WaitForVar(v), "WaitForVar", "deleted");
  EXPECT_THROW_NAMING(std::invalid_argument, fresh->PushSync(Noop(), Context::CPU(), {}, {v}),
                      "PushSync", "deleted");
  fresh.reset();
  ReleaseAndCheck();
}

TEST_P(Misuse, PushUsingDeletedVar) {
  VarHandle v = engine_->NewVariable();
  engine_->PushSync(Noop(), Context::CPU(), {blocker_}, {v});
  engine_->DeleteVariable(Noop(), Context::CPU(), v);
  EXPECT_THROW_NAMING(std::invalid_argument,
                      engine_->PushSync(Noop(), Context::CPU(), {v}, {}), "PushSync", "deleted");
  EXPECT_THROW_NAMING(std::invalid_argument,
                      engine_->PushAsync(AsyncNoop(), Context::CPU(), {}, {v}), "PushAsync",
                      "deleted");
  // NewOperator with a var whose deletion is pending: regression_test.cc
  // (ReliabilityRegression.NewOperatorRejectsVarPendingDeletion).
  ReleaseAndCheck();
}

TEST_P(Misuse, VarOfAnotherEngine) {
  auto other = MakeEngine(GetParam());
  VarHandle foreign = other->NewVariable();
  EXPECT_THROW_NAMING(std::invalid_argument,
                      engine_->PushSync(Noop(), Context::CPU(), {foreign}, {}), "another engine");
  EXPECT_THROW_NAMING(std::invalid_argument, engine_->WaitForVar(foreign), "another engine");
  other->DeleteVariable(Noop(), Context::CPU(), foreign);
  other->WaitForAll();
  ReleaseAndCheck();
}

// ------------------------------------------------------------ priority range

TEST_P(Misuse, PriorityOutOfRange) {
  OprHandle op = engine_->NewOperator(AsyncNoop(), {}, {data_[2]}, FnProperty::kNormal, "prio");
  for (int bad : {kMaxPriority + 1, kMinPriority - 1, INT_MAX, INT_MIN}) {
    const std::string bad_text = std::to_string(bad);
    SCOPED_TRACE("priority " + bad_text);
    EXPECT_THROW_NAMING(std::invalid_argument,
                        engine_->PushSync(Noop(), Context::CPU(), {}, {data_[2]},
                                          FnProperty::kNormal, bad),
                        "PushSync", "priority", bad_text.c_str(), "kMinPriority");
    EXPECT_THROW_NAMING(std::invalid_argument,
                        engine_->PushAsync(AsyncNoop(), Context::CPU(), {}, {data_[2]},
                                           FnProperty::kNormal, bad),
                        "PushAsync", "priority");
    EXPECT_THROW_NAMING(std::invalid_argument, engine_->Push(op, Context::CPU(), bad), "Push",
                        "priority");
  }
  // The bounds themselves are accepted, and the rejected pushes left the
  // operator usable.
  std::atomic<int> ran{0};
  for (int ok : {kMinPriority, kMaxPriority, 0}) {
    engine_->PushSync([&](RunContext) { ran.fetch_add(1); }, Context::CPU(), {}, {data_[2]},
                      FnProperty::kNormal, ok);
    engine_->Push(op, Context::CPU(), ok);
  }
  engine_->DeleteOperator(op);
  ReleaseAndCheck();
  EXPECT_EQ(ran.load(), 3);
}

// ------------------------------------------------------------ null function, null var

TEST_P(Misuse, NullFunction) {
  EXPECT_THROW_NAMING(std::invalid_argument,
                      engine_->PushSync(SyncFn(), Context::CPU(), {}, {data_[0]}), "PushSync",
                      "null function");
  EXPECT_THROW_NAMING(std::invalid_argument,
                      engine_->PushAsync(AsyncFn(), Context::CPU(), {}, {data_[0]}), "PushAsync",
                      "null function");
  EXPECT_THROW_NAMING(std::invalid_argument, engine_->NewOperator(AsyncFn(), {}, {data_[0]}),
                      "NewOperator", "null function");
  ReleaseAndCheck();
}

TEST_P(Misuse, NullVar) {
  EXPECT_THROW_NAMING(std::invalid_argument,
                      engine_->PushSync(Noop(), Context::CPU(), {nullptr}, {data_[0]}), "PushSync",
                      "null var");
  EXPECT_THROW_NAMING(std::invalid_argument,
                      engine_->PushSync(Noop(), Context::CPU(), {data_[0]}, {data_[1], nullptr}),
                      "PushSync", "null var");
  EXPECT_THROW_NAMING(std::invalid_argument,
                      engine_->PushAsync(AsyncNoop(), Context::CPU(), {}, {nullptr}), "PushAsync",
                      "null var");
  EXPECT_THROW_NAMING(std::invalid_argument, engine_->NewOperator(AsyncNoop(), {nullptr}, {}),
                      "NewOperator", "null var");
  EXPECT_THROW_NAMING(std::invalid_argument, engine_->WaitForVar(nullptr), "WaitForVar",
                      "null var");
  EXPECT_THROW_NAMING(std::invalid_argument, engine_->DeleteVariable(Noop(), Context::CPU(), nullptr),
                      "DeleteVariable", "null var");
  ReleaseAndCheck();
}

// A rejected push must leave no trace on the valid vars it named: later
// functions on them still run, in order.
TEST_P(Misuse, RejectedPushLeavesValidVarsUsable) {
  long plain = 0;  // plain on purpose: ordering is the engine's job
  EXPECT_THROW(engine_->PushSync([&](RunContext) { plain = -1000; }, Context::CPU(), {data_[0]},
                                 {data_[3], nullptr}),
               std::invalid_argument);
  EXPECT_THROW(engine_->PushSync([&](RunContext) { plain = -1000; }, Context::CPU(), {free_[0]},
                                 {free_[0]}),
               std::invalid_argument);
  for (int i = 0; i < 100; ++i) {
    engine_->PushSync([&](RunContext) { ++plain; }, Context::CPU(), {data_[0]}, {data_[3]});
    engine_->PushSync([&](RunContext) { ++plain; }, Context::CPU(), {}, {data_[3], free_[0]});
  }
  ReleaseAndCheck();
  EXPECT_EQ(plain, 200) << "a rejected function ran, or a later one was lost";
}

// ------------------------------------------------------------ a var in both lists

TEST_P(Misuse, VarInBothLists) {
  EXPECT_THROW_NAMING(std::invalid_argument,
                      engine_->PushSync(Noop(), Context::CPU(), {data_[0]}, {data_[0]}),
                      "PushSync", "both const_vars and mutable_vars");
  EXPECT_THROW_NAMING(std::invalid_argument,
                      engine_->PushAsync(AsyncNoop(), Context::CPU(), {data_[1], data_[0]},
                                         {data_[2], data_[1]}),
                      "PushAsync", "both");
  EXPECT_THROW_NAMING(std::invalid_argument,
                      engine_->NewOperator(AsyncNoop(), {data_[3]}, {data_[3]}), "NewOperator",
                      "both");
  ReleaseAndCheck();
}

TEST_P(Misuse, DuplicatesWithinOneListAreMerged) {
  long plain = 0;
  for (int i = 0; i < 50; ++i) {
    engine_->PushSync([&](RunContext) { ++plain; }, Context::CPU(), {data_[0], data_[0]},
                      {data_[1], data_[1], data_[1]});
  }
  OprHandle op = engine_->NewOperator(
      [&](RunContext, CallbackOnComplete cb) {
        ++plain;
        cb();
      },
      {data_[0], data_[0]}, {data_[1], data_[1]});
  for (int i = 0; i < 50; ++i) engine_->Push(op, Context::CPU());
  engine_->DeleteOperator(op);
  ReleaseAndCheck();
  EXPECT_EQ(plain, 100);
}

// ------------------------------------------------------------ contexts

bool GpuPresent() {
  std::error_code ec;
  return std::filesystem::exists("/dev/nvidia0", ec);
}

TEST_P(Misuse, GpuContextWithoutGpu) {
  // An id no machine has is rejected everywhere; GPU 0 only where no GPU
  // exists and none is simulated.
  std::vector<int> ids = {1000};
  if (!GpuPresent()) ids.push_back(0);
  OprHandle op = engine_->NewOperator(AsyncNoop(), {}, {data_[0]});
  for (int id : ids) {
    SCOPED_TRACE("gpu(" + std::to_string(id) + ")");
    const Context gpu = Context::GPU(id);
    EXPECT_THROW_NAMING(std::invalid_argument,
                        engine_->PushSync(Noop(), gpu, {}, {data_[0]}), "PushSync", "GPU");
    EXPECT_THROW_NAMING(std::invalid_argument,
                        engine_->PushAsync(AsyncNoop(), gpu, {}, {data_[0]},
                                           FnProperty::kCopyToGPU),
                        "PushAsync", "GPU");
    EXPECT_THROW_NAMING(std::invalid_argument, engine_->Push(op, gpu), "Push", "GPU");
    EXPECT_THROW_NAMING(std::invalid_argument, engine_->DeleteVariable(Noop(), gpu, data_[0]),
                        "DeleteVariable", "GPU");
  }
  engine_->DeleteOperator(op);
  ReleaseAndCheck();
}

TEST_P(Misuse, GpuBeyondSimulatedDevices) {
  auto sim = MakeEngine(GetParam(), 0, /*simulated_gpus=*/2);
  VarHandle v = sim->NewVariable();
  std::atomic<int> ran{0};
  sim->PushSync([&](RunContext) { ran.fetch_add(1); }, Context::GPU(1), {}, {v});
  EXPECT_THROW_NAMING(std::invalid_argument,
                      sim->PushSync(Noop(), Context::GPU(2), {}, {v}), "GPU", "gpu(2)");
  sim->WaitForAll();
  EXPECT_EQ(ran.load(), 1);
  ReleaseAndCheck();
}

TEST_P(Misuse, BadCpuContext) {
  EXPECT_THROW_NAMING(std::invalid_argument,
                      engine_->PushSync(Noop(), Context::CPU(-1), {}, {data_[0]}), "CPU", "-1");
  const Context bogus{static_cast<DeviceType>(7), 0};
  EXPECT_THROW_NAMING(std::invalid_argument, engine_->PushSync(Noop(), bogus, {}, {data_[0]}),
                      "DeviceType");
  ReleaseAndCheck();
}

// ------------------------------------------------------------ waiting inside a function

TEST_P(Misuse, WaitInsideSyncFunction) {
  std::string var_msg, all_msg;
  std::atomic<int> finished{0};
  engine_->PushSync(
      [&](RunContext) {
        var_msg = ThrownMessage<std::logic_error>([&] { engine_->WaitForVar(free_[1]); });
        all_msg = ThrownMessage<std::logic_error>([&] { engine_->WaitForAll(); });
        finished.fetch_add(1);
      },
      Context::CPU(), {}, {free_[0]});
  engine_->WaitForVar(free_[0]);
  EXPECT_EQ(finished.load(), 1);
  EXPECT_NE(var_msg.find("WaitForVar"), std::string::npos) << var_msg;
  EXPECT_NE(var_msg.find("deadlock"), std::string::npos) << var_msg;
  EXPECT_NE(all_msg.find("WaitForAll"), std::string::npos) << all_msg;
  EXPECT_NE(all_msg.find("deadlock"), std::string::npos) << all_msg;
  ReleaseAndCheck();
}

TEST_P(Misuse, WaitInsideAsyncFunctionAndOperator) {
  std::atomic<int> rejected{0};
  auto fn = [&](RunContext, CallbackOnComplete cb) {
    try {
      engine_->WaitForAll();
    } catch (const std::logic_error&) {
      rejected.fetch_add(1);
    }
    cb();
  };
  for (FnProperty prop : {FnProperty::kNormal, FnProperty::kAsync, FnProperty::kCPUPrioritized}) {
    engine_->PushAsync(fn, Context::CPU(), {}, {free_[0]}, prop);
  }
  OprHandle op = engine_->NewOperator(fn, {}, {free_[1]});
  engine_->Push(op, Context::CPU());
  engine_->DeleteOperator(op);
  engine_->WaitForVar(free_[0]);
  engine_->WaitForVar(free_[1]);
  EXPECT_EQ(rejected.load(), 4);
  ReleaseAndCheck();
}

// Waiting on a *different* engine from inside a function is legal.
TEST_P(Misuse, WaitOnOtherEngineInsideFunctionIsAllowed) {
  auto other = MakeEngine(GetParam());
  VarHandle ov = other->NewVariable();
  long plain = 0;
  engine_->PushSync(
      [&](RunContext) {
        other->PushSync([&](RunContext) { plain = 42; }, Context::CPU(), {}, {ov});
        other->WaitForVar(ov);
        other->WaitForAll();
      },
      Context::CPU(), {}, {free_[0]});
  engine_->WaitForVar(free_[0]);
  EXPECT_EQ(plain, 42);
  other->DeleteVariable(Noop(), Context::CPU(), ov);
  other.reset();
  ReleaseAndCheck();
}

// ------------------------------------------------------------ callbacks

TEST_P(Misuse, CallbackCalledTwice) {
  std::promise<std::string> second_call;
  long plain = 0;
  engine_->PushAsync(
      [&](RunContext, CallbackOnComplete cb) {
        ++plain;
        cb();
        second_call.set_value(ThrownMessage<std::logic_error>([&] { cb(); }));
      },
      Context::CPU(), {}, {free_[0]});
  // Later functions on the var run once each, in order.
  for (int i = 0; i < 100; ++i) {
    engine_->PushSync([&](RunContext) { plain = plain * 3 % 1000003; }, Context::CPU(), {},
                      {free_[0]});
  }
  engine_->WaitForVar(free_[0]);
  const std::string second = second_call.get_future().get();
  EXPECT_NE(second.find("callback"), std::string::npos) << second;
  EXPECT_NE(second.find("second time"), std::string::npos) << second;
  long expect = 1;
  for (int i = 0; i < 100; ++i) expect = expect * 3 % 1000003;
  EXPECT_EQ(plain, expect);
  ReleaseAndCheck();
}

// A second call with an error must not fail the var: the function already
// finished cleanly.
TEST_P(Misuse, CallbackCalledTwiceWithErrorChangesNothing) {
  CallbackOnComplete saved;
  engine_->PushAsync(
      [&](RunContext, CallbackOnComplete cb) {
        saved = cb;
        cb();
      },
      Context::CPU(), {}, {free_[2]});
  engine_->WaitForVar(free_[2]);
  // The block may have been reused by now: push more work first.
  for (int i = 0; i < 200; ++i) engine_->PushSync(Noop(), Context::CPU(), {}, {free_[3]});
  engine_->WaitForVar(free_[3]);
  EXPECT_THROW_NAMING(std::logic_error,
                      saved(std::make_exception_ptr(std::runtime_error("late error"))),
                      "second time");
  EXPECT_NO_THROW(engine_->WaitForVar(free_[2]));
  ReleaseAndCheck();  // WaitForAll must not report "late error"
}

TEST_P(Misuse, CallbackCalledTwiceFromForeignThreads) {
  constexpr int kFns = 200;
  std::atomic<int> second_rejected{0};
  std::vector<std::thread> threads;
  std::mutex mu;
  std::vector<CallbackOnComplete> cbs;  // guarded by mu
  for (int i = 0; i < kFns; ++i) {
    engine_->PushAsync(
        [&](RunContext, CallbackOnComplete cb) {
          std::lock_guard<std::mutex> lock(mu);
          cbs.push_back(cb);
        },
        Context::CPU(), {}, {free_[i % 4]}, FnProperty::kNormal);
  }
  // Two threads race to call every callback: exactly one call of each wins.
  std::atomic<int> wins{0};
  auto racer = [&] {
    for (int got = 0; got < kFns;) {
      CallbackOnComplete cb;
      bool have = false;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (static_cast<int>(cbs.size()) > got) {
          cb = cbs[static_cast<std::size_t>(got)];
          have = true;
        }
      }
      if (!have) {
        std::this_thread::yield();
        continue;
      }
      try {
        cb();
        wins.fetch_add(1);
      } catch (const std::logic_error&) {
        second_rejected.fetch_add(1);
      }
      ++got;
    }
  };
  threads.emplace_back(racer);
  threads.emplace_back(racer);
  for (auto& t : threads) t.join();
  for (auto v : free_) engine_->WaitForVar(v);
  EXPECT_EQ(wins.load(), kFns);
  EXPECT_EQ(second_rejected.load(), kFns);
  ReleaseAndCheck();
}

TEST_P(Misuse, EmptyCallback) {
  CallbackOnComplete empty;
  EXPECT_THROW_NAMING(std::logic_error, empty(), "empty callback");
  ReleaseAndCheck();
}

INSTANTIATE_TEST_SUITE_P(AllEngines, Misuse, ::testing::ValuesIn(AllEngineConfigs()), ConfigName);

// ------------------------------------------------------------ the watchdog

// An async function whose callback is never called: with the watchdog on,
// the engine names it and its age on stderr instead of hanging silently.
TEST(MisuseWatchdog, CallbackNeverCalledIsReported) {
  for (EngineKind kind : {EngineKind::kNaive, EngineKind::kPerDevice}) {
    SCOPED_TRACE(EngineKindName(kind));
    EngineOptions o;
    o.kind = kind;
    o.cpu_worker_threads = 2;
    o.watchdog_seconds = 0.5;
    support::StderrCapture err;
    {
      auto engine = CreateEngine(o);
      VarHandle v = engine->NewVariable(), input = engine->NewVariable();
      SetVarName(*engine, v, "weights");
      std::promise<CallbackOnComplete> held;
      engine->PushAsync([&](RunContext, CallbackOnComplete cb) { held.set_value(cb); },
                        Context::CPU(), {input}, {v}, FnProperty::kNormal, 0, "forgotten-callback");
      std::atomic<int> later{0};
      engine->PushSync([&](RunContext) { later.fetch_add(1); }, Context::CPU(), {v}, {});
      CallbackOnComplete cb = held.get_future().get();
      // Waited for, not slept for: the report is due about 1.25 limits after
      // the function started; the reader of v stays queued behind it.
      EXPECT_TRUE(err.WaitFor("forgotten-callback")) << "stderr: " << err.Text();
      // Which data it holds (an unnamed var by number) and what the engine
      // holds: the function itself and the reader queued behind it.
      EXPECT_THAT(err.Text(),
                  ::testing::ContainsRegex("reads \\[v[0-9]+\\] and writes \\[weights\\]"));
      EXPECT_THAT(err.Text(), ::testing::HasSubstr("about 2 functions pushed to its engine"));
      EXPECT_EQ(later.load(), 0);
      cb();  // late, but the work behind it is not lost
      engine->WaitForAll();
      EXPECT_EQ(later.load(), 1);
      engine->DeleteVariable(nullptr, Context::CPU(), v);
      engine->DeleteVariable(nullptr, Context::CPU(), input);
    }
    EXPECT_NE(err.Text().find("running for"), std::string::npos) << "stderr: " << err.Text();
  }
}

TEST(MisuseWatchdog, OffByDefault) {
  EXPECT_EQ(EngineOptions{}.watchdog_seconds, 0);
  ::setenv("DEPENGINE_WATCHDOG_SECONDS", "soon", 1);
  EXPECT_THROW_NAMING(std::invalid_argument, EngineOptions::FromEnv(),
                      "DEPENGINE_WATCHDOG_SECONDS", "soon");
  ::setenv("DEPENGINE_WATCHDOG_SECONDS", "2.5", 1);
  EXPECT_EQ(EngineOptions::FromEnv().watchdog_seconds, 2.5);
  ::unsetenv("DEPENGINE_WATCHDOG_SECONDS");
}

// ------------------------------------------------------------ configuration

TEST(MisuseConfig, NegativeThreadCounts) {
  EngineOptions o;
  o.kind = EngineKind::kPooled;
  o.cpu_worker_threads = -1;
  EXPECT_THROW_NAMING(std::invalid_argument, CreateEngine(o), "CreateEngine", ">= 0");
}

TEST(MisuseConfig, UnknownEngineTypeInEnvironment) {
  ::setenv("DEPENGINE_ENGINE_TYPE", "FastEngine", 1);
  EXPECT_THROW_NAMING(std::invalid_argument, EngineOptions::FromEnv(), "DEPENGINE_ENGINE_TYPE",
                      "FastEngine", "NaiveEngine", "ThreadedEnginePooled",
                      "ThreadedEnginePerDevice");
  ::unsetenv("DEPENGINE_ENGINE_TYPE");
}

TEST(MisuseConfig, BadThreadCountInEnvironment) {
  ::setenv("DEPENGINE_CPU_WORKER_NTHREADS", "two", 1);
  EXPECT_THROW_NAMING(std::invalid_argument, EngineOptions::FromEnv(),
                      "DEPENGINE_CPU_WORKER_NTHREADS", "two");
  ::setenv("DEPENGINE_CPU_WORKER_NTHREADS", "-3", 1);
  EXPECT_THROW_NAMING(std::invalid_argument, EngineOptions::FromEnv(),
                      "DEPENGINE_CPU_WORKER_NTHREADS");
  ::unsetenv("DEPENGINE_CPU_WORKER_NTHREADS");
}

}  // namespace
}  // namespace depengine::reliability
