// Semantics point 8: bad input raises std::invalid_argument or
// std::logic_error with a message that names the problem, and nothing
// pushed before is lost.
#include <atomic>
#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <thread>
#include <vector>

#include "engine_fixture.h"

namespace depengine::test {
namespace {

using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

// Work pushed before a bad call: functions queued behind a held var. After
// the bad call, Finish() releases the hold and checks that all of it ran.
class PendingWork {
 public:
  static constexpr int kFunctions = 10;

  explicit PendingWork(Engine& e) : e_(e), var_(e.NewVariable()), hold_(e, {}, {var_}) {
    for (int i = 0; i < kFunctions; ++i) {
      e_.PushSync([this](RunContext) { ++ran_; }, Context::CPU(), {}, {var_});
    }
  }
  ~PendingWork() { Finish(); }

  void Finish() {
    if (finished_) return;
    finished_ = true;
    hold_.Release();
    e_.WaitForVar(var_);
    EXPECT_EQ(ran_, kFunctions) << "a bad call lost work pushed before it";
  }

 private:
  Engine& e_;
  VarHandle var_;
  int ran_ = 0;  // plain: the functions are ordered by var_
  Hold hold_;
  bool finished_ = false;
};

class BadInputTest : public EngineTest {};

TEST_P(BadInputTest, NullFunctionIsRejected) {
  PendingWork pending(engine());
  VarHandle v = engine().NewVariable();
  EXPECT_THAT(MessageOf<std::invalid_argument>(
                  [&] { engine().PushSync(SyncFn(), Context::CPU(), {}, {v}); }),
              HasSubstr("null function"));
  EXPECT_THAT(MessageOf<std::invalid_argument>(
                  [&] { engine().PushAsync(AsyncFn(), Context::CPU(), {}, {v}); }),
              HasSubstr("null function"));
  EXPECT_THAT(MessageOf<std::invalid_argument>([&] { engine().NewOperator(AsyncFn(), {}, {v}); }),
              HasSubstr("null function"));
  pending.Finish();
  engine().WaitForVar(v);  // v was not left in use by the rejected calls
}

TEST_P(BadInputTest, NullVarIsRejected) {
  PendingWork pending(engine());
  VarHandle v = engine().NewVariable();
  auto noop = [](RunContext) {};
  EXPECT_THAT(MessageOf<std::invalid_argument>(
                  [&] { engine().PushSync(noop, Context::CPU(), {nullptr}, {v}); }),
              HasSubstr("null var"));
  EXPECT_THAT(MessageOf<std::invalid_argument>(
                  [&] { engine().PushSync(noop, Context::CPU(), {v}, {nullptr}); }),
              HasSubstr("null var"));
  EXPECT_THAT(MessageOf<std::invalid_argument>([&] {
                engine().PushAsync([](RunContext, CallbackOnComplete cb) { cb(); }, Context::CPU(),
                                   {}, {nullptr});
              }),
              HasSubstr("null var"));
  EXPECT_THAT(MessageOf<std::invalid_argument>([&] {
                engine().NewOperator([](RunContext, CallbackOnComplete cb) { cb(); }, {nullptr},
                                     {});
              }),
              HasSubstr("null var"));
  EXPECT_THAT(MessageOf<std::invalid_argument>([&] { engine().WaitForVar(nullptr); }),
              HasSubstr("null var"));
  EXPECT_THAT(MessageOf<std::invalid_argument>(
                  [&] { engine().DeleteVariable(noop, Context::CPU(), nullptr); }),
              HasSubstr("null var"));
  pending.Finish();
}

TEST_P(BadInputTest, RejectedPushLeavesItsValidVarsUsable) {
  // A push with one good and one bad var must not leave the good var queued.
  PendingWork pending(engine());
  VarHandle good = engine().NewVariable();
  VarHandle gone = engine().NewVariable();
  engine().DeleteVariable(nullptr, Context::CPU(), gone);
  auto noop = [](RunContext) {};
  EXPECT_THAT(MessageOf<std::invalid_argument>([&] {
                engine().PushSync(noop, Context::CPU(), {}, {good, nullptr});
              }),
              HasSubstr("null var"));
  EXPECT_THAT(MessageOf<std::invalid_argument>(
                  [&] { engine().PushSync(noop, Context::CPU(), {gone}, {good}); }),
              HasSubstr("deleted"));
  EXPECT_THAT(MessageOf<std::invalid_argument>(
                  [&] { engine().PushSync(noop, Context::CPU(), {good}, {good}); }),
              HasSubstr("both"));
  int value = 0;
  engine().PushSync([&](RunContext) { value = 1; }, Context::CPU(), {}, {good});
  engine().WaitForVar(good);
  EXPECT_EQ(value, 1);
  pending.Finish();
}

// Delete, then create: the new var must not take the deleted one's handle,
// or a use of the stale handle would silently use the new var.
TEST_P(BadInputTest, DeletedVarsHandleStaysStaleWhenNewVarsAreCreated) {
  auto noop = [](RunContext) {};
  VarHandle old_var = engine().NewVariable();
  engine().DeleteVariable(noop, Context::CPU(), old_var);
  engine().WaitForAll();  // old_var is freed now
  std::vector<VarHandle> fresh;
  for (int i = 0; i < 100; ++i) fresh.push_back(engine().NewVariable());
  EXPECT_THAT(fresh, Not(Contains(old_var)));
  EXPECT_THAT(MessageOf<std::invalid_argument>(
                  [&] { engine().PushSync(noop, Context::CPU(), {}, {old_var}); }),
              HasSubstr("deleted"));
  for (VarHandle v : fresh) engine().DeleteVariable(noop, Context::CPU(), v);
}

TEST_P(BadInputTest, DeletedVarIsRejected) {
  PendingWork pending(engine());
  VarHandle v = engine().NewVariable();
  auto noop = [](RunContext) {};
  engine().DeleteVariable(noop, Context::CPU(), v);
  // Right after DeleteVariable (the deletion may still be pending)...
  EXPECT_THAT(
      MessageOf<std::invalid_argument>([&] { engine().PushSync(noop, Context::CPU(), {v}, {}); }),
      HasSubstr("deleted"));
  EXPECT_THAT(MessageOf<std::invalid_argument>([&] { engine().WaitForVar(v); }),
              HasSubstr("deleted"));
  EXPECT_THAT(
      MessageOf<std::invalid_argument>([&] { engine().DeleteVariable(noop, Context::CPU(), v); }),
      AnyOf(HasSubstr("deleted"), HasSubstr("twice")));
  // ...and once it has run (no var was created since, so the handle is
  // not reused).
  pending.Finish();
  engine().WaitForAll();
  EXPECT_THAT(
      MessageOf<std::invalid_argument>([&] { engine().PushSync(noop, Context::CPU(), {}, {v}); }),
      HasSubstr("deleted"));
  EXPECT_THAT(MessageOf<std::invalid_argument>([&] {
                engine().NewOperator([](RunContext, CallbackOnComplete cb) { cb(); }, {v}, {});
              }),
              HasSubstr("deleted"));
}

// Slot counts are 16-bit inside the engine: a longer var list must be
// refused, not wrapped to a short one (65,536 vars once became no
// dependencies at all for a prebuilt operator, which then ran at once).
TEST_P(BadInputTest, MoreThanMaxVarsPerFunctionIsRejected) {
  PendingWork pending(engine());
  VarHandle v = engine().NewVariable();
  std::vector<VarHandle> vars(kMaxVarsPerFunction, v);  // merge to one var, but too many entries
  std::vector<VarHandle> one_more = vars;
  one_more.push_back(v);
  const std::string limit = std::to_string(kMaxVarsPerFunction);
  EXPECT_THAT(MessageOf<std::invalid_argument>([&] {
                engine().NewOperator([](RunContext, CallbackOnComplete cb) { cb(); }, {}, one_more);
              }),
              AllOf(HasSubstr("too many vars"), HasSubstr(limit)));
  EXPECT_THAT(MessageOf<std::invalid_argument>(
                  [&] { engine().PushSync([](RunContext) {}, Context::CPU(), {}, one_more); }),
              AllOf(HasSubstr("too many vars"), HasSubstr(limit)));
  EXPECT_THAT(MessageOf<std::invalid_argument>([&] {
                engine().PushAsync([](RunContext, CallbackOnComplete cb) { cb(); }, Context::CPU(),
                                   one_more, {});
              }),
              AllOf(HasSubstr("too many vars"), HasSubstr(limit)));
  // Exactly the limit is accepted, and the engine keeps working.
  int ran = 0;
  OprHandle op = engine().NewOperator(
      [&ran](RunContext, CallbackOnComplete cb) {
        ++ran;
        cb();
      },
      {}, vars);
  engine().Push(op, Context::CPU());
  engine().PushSync([&ran](RunContext) { ++ran; }, Context::CPU(), vars, {});
  engine().WaitForVar(v);
  EXPECT_EQ(ran, 2);
  engine().DeleteOperator(op);
}

TEST_P(BadInputTest, VarInBothListsIsRejectedAndDuplicatesWithinAListMerge) {
  PendingWork pending(engine());
  VarHandle v = engine().NewVariable();
  VarHandle u = engine().NewVariable();
  auto noop = [](RunContext) {};
  EXPECT_THAT(MessageOf<std::invalid_argument>([&] {
                engine().PushSync(noop, Context::CPU(), {u, v}, {v});
              }),
              HasSubstr("both const_vars and mutable_vars"));
  EXPECT_THAT(MessageOf<std::invalid_argument>([&] {
                engine().PushAsync([](RunContext, CallbackOnComplete cb) { cb(); }, Context::CPU(),
                                   {v}, {u, v});
              }),
              HasSubstr("both const_vars and mutable_vars"));
  EXPECT_THAT(MessageOf<std::invalid_argument>([&] {
                engine().NewOperator([](RunContext, CallbackOnComplete cb) { cb(); }, {v}, {v});
              }),
              HasSubstr("both const_vars and mutable_vars"));

  // Duplicates within one list are merged: the function runs once, and the
  // var is released (a duplicate slot would never be granted, or granted
  // twice).
  int runs = 0;
  engine().PushSync([&](RunContext) { ++runs; }, Context::CPU(), {}, {v, v, v});
  engine().PushSync([&](RunContext) { ++runs; }, Context::CPU(), {u, u}, {v, v});
  engine().PushSync([&](RunContext) { ++runs; }, Context::CPU(), {v, v}, {});
  OprHandle op = engine().NewOperator(
      [&](RunContext, CallbackOnComplete cb) {
        ++runs;
        cb();
      },
      {u, u}, {v, v});
  engine().Push(op, Context::CPU());
  pending.Finish();
  engine().WaitForAll();
  EXPECT_EQ(runs, 4);
  engine().DeleteOperator(op);
}

// The same rules for lists long enough to be sorted another way inside the
// engine (more than 16 vars, and more than 128, which sort on the heap).
TEST_P(BadInputTest, VarInBothLongListsIsRejectedAndDuplicatesMerge) {
  PendingWork pending(engine());
  for (std::size_t count : {17u, 40u, 129u, 300u}) {
    std::vector<VarHandle> reads;
    for (std::size_t i = 0; i < count; ++i) reads.push_back(engine().NewVariable());
    std::vector<VarHandle> writes = {engine().NewVariable(), reads[count / 2]};
    EXPECT_THAT(MessageOf<std::invalid_argument>(
                    [&] { engine().PushSync([](RunContext) {}, Context::CPU(), reads, writes); }),
                HasSubstr("both const_vars and mutable_vars"))
        << count << " vars";
    // Every var listed twice: the function runs once and releases each var.
    std::vector<VarHandle> twice = reads;
    twice.insert(twice.end(), reads.begin(), reads.end());
    int runs = 0;
    engine().PushSync([&](RunContext) { ++runs; }, Context::CPU(), {writes[0], writes[0]}, twice);
    engine().PushSync([&](RunContext) { ++runs; }, Context::CPU(), twice, {writes[0]});
    for (VarHandle v : reads) engine().WaitForVar(v);
    engine().WaitForVar(writes[0]);
    EXPECT_EQ(runs, 2) << count << " vars";
    for (VarHandle v : reads) engine().DeleteVariable([](RunContext) {}, Context::CPU(), v);
    engine().DeleteVariable([](RunContext) {}, Context::CPU(), writes[0]);
  }
  pending.Finish();
  engine().WaitForAll();
}

TEST_P(BadInputTest, GpuContextWithoutAGpuIsRejected) {
  if (std::filesystem::exists("/dev/nvidia0")) {
    GTEST_SKIP() << "a GPU is present here; gpu_test covers real GPU contexts";
  }
  PendingWork pending(engine());
  VarHandle v = engine().NewVariable();
  auto noop = [](RunContext) {};
  EXPECT_THAT(
      MessageOf<std::invalid_argument>([&] { engine().PushSync(noop, Context::GPU(0), {}, {v}); }),
      HasSubstr("GPU"));
  EXPECT_THAT(MessageOf<std::invalid_argument>([&] {
                engine().PushAsync([](RunContext, CallbackOnComplete cb) { cb(); }, Context::GPU(1),
                                   {}, {v}, FnProperty::kCopyToGPU);
              }),
              HasSubstr("GPU"));
  OprHandle op = engine().NewOperator([](RunContext, CallbackOnComplete cb) { cb(); }, {}, {v});
  EXPECT_THAT(MessageOf<std::invalid_argument>([&] { engine().Push(op, Context::GPU(0)); }),
              HasSubstr("GPU"));
  EXPECT_THAT(
      MessageOf<std::invalid_argument>([&] { engine().DeleteVariable(noop, Context::GPU(0), v); }),
      HasSubstr("GPU"));
  // The rejected DeleteVariable did not delete v.
  int value = 0;
  engine().PushSync([&](RunContext) { value = 1; }, Context::CPU(), {}, {v});
  engine().WaitForVar(v);
  EXPECT_EQ(value, 1);
  engine().DeleteOperator(op);
  pending.Finish();
}

TEST_P(BadInputTest, GpuIdBeyondTheSimulatedGpusIsRejected) {
  EngineOptions o = Options();
  o.simulated_gpus = 2;
  auto e = CreateEngine(o);
  VarHandle v = e->NewVariable();
  auto noop = [](RunContext) {};
  EXPECT_THAT(
      MessageOf<std::invalid_argument>([&] { e->PushSync(noop, Context::GPU(2), {}, {v}); }),
      HasSubstr("GPU"));
  EXPECT_THAT(
      MessageOf<std::invalid_argument>([&] { e->PushSync(noop, Context::GPU(-1), {}, {v}); }),
      HasSubstr("GPU"));
  int value = 0;
  e->PushSync([&](RunContext) { value = 1; }, Context::GPU(1), {}, {v});
  e->WaitForVar(v);
  EXPECT_EQ(value, 1);
}

TEST_P(BadInputTest, InvalidCpuContextIsRejected) {
  PendingWork pending(engine());
  VarHandle v = engine().NewVariable();
  auto noop = [](RunContext) {};
  EXPECT_THAT(
      MessageOf<std::invalid_argument>([&] { engine().PushSync(noop, Context::CPU(-1), {}, {v}); }),
      HasSubstr("dev_id"));
  EXPECT_THAT(MessageOf<std::invalid_argument>([&] {
                engine().PushSync(noop, Context{static_cast<DeviceType>(42), 0}, {}, {v});
              }),
              HasSubstr("DeviceType"));
  pending.Finish();
}

// The message names the context as the program wrote it: a pinned context
// out of range is not called a CPU context.
TEST_P(BadInputTest, InvalidPinnedContextIsNamedAsPinned) {
  PendingWork pending(engine());
  VarHandle v = engine().NewVariable();
  auto noop = [](RunContext) {};
  for (int id : {-1, 64}) {
    EXPECT_THAT(MessageOf<std::invalid_argument>(
                    [&] { engine().PushSync(noop, Context::CPUPinned(id), {}, {v}); }),
                AllOf(HasSubstr("CPUPinned"), HasSubstr(std::to_string(id))))
        << id;
  }
  EXPECT_THAT(
      MessageOf<std::invalid_argument>([&] { engine().PushSync(noop, Context::CPU(64), {}, {v}); }),
      AllOf(HasSubstr("CPU dev_id 64"), Not(HasSubstr("CPUPinned"))));
  pending.Finish();
}

TEST_P(BadInputTest, PriorityOutOfRangeIsRejected) {
  PendingWork pending(engine());
  VarHandle v = engine().NewVariable();
  auto noop = [](RunContext) {};
  EXPECT_THAT(MessageOf<std::invalid_argument>([&] {
                engine().PushSync(noop, Context::CPU(), {}, {v}, FnProperty::kNormal,
                                  kMaxPriority + 1);
              }),
              HasSubstr("priority"));
  EXPECT_THAT(MessageOf<std::invalid_argument>([&] {
                engine().PushSync(noop, Context::CPU(), {}, {v}, FnProperty::kNormal,
                                  kMinPriority - 1);
              }),
              HasSubstr("priority"));
  OprHandle op = engine().NewOperator([](RunContext, CallbackOnComplete cb) { cb(); }, {}, {v});
  EXPECT_THAT(MessageOf<std::invalid_argument>(
                  [&] { engine().Push(op, Context::CPU(), kMaxPriority + 1); }),
              HasSubstr("priority"));
  // The bounds themselves are accepted.
  int runs = 0;
  engine().PushSync([&](RunContext) { ++runs; }, Context::CPU(), {}, {v}, FnProperty::kNormal,
                    kMaxPriority);
  engine().PushSync([&](RunContext) { ++runs; }, Context::CPU(), {}, {v}, FnProperty::kNormal,
                    kMinPriority);
  engine().WaitForVar(v);
  EXPECT_EQ(runs, 2);
  engine().DeleteOperator(op);
  pending.Finish();
}

TEST_P(BadInputTest, VarOfAnotherEngineIsRejected) {
  PendingWork pending(engine());
  auto other = CreateEngine(Options());
  VarHandle foreign = other->NewVariable();
  EXPECT_THAT(MessageOf<std::invalid_argument>(
                  [&] { engine().PushSync([](RunContext) {}, Context::CPU(), {}, {foreign}); }),
              HasSubstr("another engine"));
  EXPECT_THAT(MessageOf<std::invalid_argument>([&] { engine().WaitForVar(foreign); }),
              HasSubstr("another engine"));
  pending.Finish();
}

TEST_P(BadInputTest, WaitingFromInsideAFunctionOfTheSameEngineIsRejected) {
  std::string sync_var, sync_all, async_var, async_all, kasync_all, delete_all;
  DrainGuard drain(engine());
  PendingWork pending(engine());
  VarHandle v = engine().NewVariable();
  VarHandle other = engine().NewVariable();
  engine().PushSync(
      [&](RunContext) {
        sync_var = MessageOf<std::logic_error>([&] { engine().WaitForVar(other); });
        sync_all = MessageOf<std::logic_error>([&] { engine().WaitForAll(); });
      },
      Context::CPU(), {}, {v});
  engine().PushAsync(
      [&](RunContext, CallbackOnComplete cb) {
        async_var = MessageOf<std::logic_error>([&] { engine().WaitForVar(other); });
        async_all = MessageOf<std::logic_error>([&] { engine().WaitForAll(); });
        cb();
      },
      Context::CPU(), {}, {v});
  engine().PushSync(
      [&](RunContext) { kasync_all = MessageOf<std::logic_error>([&] { engine().WaitForAll(); }); },
      Context::CPU(), {}, {v}, FnProperty::kAsync);
  VarHandle doomed = engine().NewVariable();
  engine().DeleteVariable(
      [&](RunContext) { delete_all = MessageOf<std::logic_error>([&] { engine().WaitForAll(); }); },
      Context::CPU(), doomed);
  pending.Finish();
  engine().WaitForAll();
  for (const std::string* m :
       {&sync_var, &sync_all, &async_var, &async_all, &kasync_all, &delete_all}) {
    EXPECT_THAT(*m, HasSubstr("deadlock"));
  }
}

// A function's closure is destroyed by the thread that finishes it: for an
// async function whose callback is called from outside the engine, that
// thread. The function is still counted while its completion runs, so a
// WaitForAll from a destructor in the closure waited for itself there, and
// the callback never returned. It is rejected as from inside the function
// (where a worker destroys the closure, it already was).
TEST_P(BadInputTest, WaitForAllFromAClosureDestroyedByTheCallbacksCallerIsRejected) {
  struct State {
    std::string message;  // written by the destructor, read after the callback returned
  };
  struct WaitOnDestroy {
    WaitOnDestroy(Engine* e, std::shared_ptr<State> s) : engine(e), state(std::move(s)) {}
    WaitOnDestroy(const WaitOnDestroy&) = delete;
    WaitOnDestroy& operator=(const WaitOnDestroy&) = delete;
    ~WaitOnDestroy() {
      state->message = MessageOf<std::logic_error>([&] { engine->WaitForAll(); });
    }
    Engine* engine;
    std::shared_ptr<State> state;
  };
  auto e = CreateEngine(Options());
  auto state = std::make_shared<State>();
  VarHandle v = e->NewVariable();
  if (!CallbackCallerDestroysTheClosure(e, v, std::make_shared<WaitOnDestroy>(e.get(), state))) {
    ADD_FAILURE() << "WaitForAll in the closure's destructor waited for its own function";
    return;
  }
  EXPECT_THAT(state->message, HasSubstr("deadlock"));
  EXPECT_THAT(state->message, HasSubstr("WaitForAll"));
  e->WaitForAll();
}

// A deleted operator whose last push finished on a worker is freed by that
// worker between functions, when it flushes its batched completions: a
// destructor in the operator's closure runs there, outside any function. A
// WaitForAll from it waited for the worker's own unflushed completions and
// hung the worker (and every later WaitForAll). Waits from the engine's
// worker threads are rejected as from inside a function.
TEST_P(BadInputTest, WaitingFromADeletedOperatorsClosureDestroyedByAWorkerIsRejected) {
  if (!threaded()) GTEST_SKIP() << "the naive engine has no worker threads";
  struct State {
    Event deleted;
    Event destroyed;
    std::string all_message;  // written by the destructor, read after destroyed
    std::string var_message;
  };
  struct WaitOnDestroy {
    WaitOnDestroy(Engine* e, VarHandle v, std::shared_ptr<State> s)
        : engine(e), other(v), state(std::move(s)) {}
    WaitOnDestroy(const WaitOnDestroy&) = delete;
    WaitOnDestroy& operator=(const WaitOnDestroy&) = delete;
    ~WaitOnDestroy() {
      state->all_message = MessageOf<std::logic_error>([&] { engine->WaitForAll(); });
      state->var_message = MessageOf<std::logic_error>([&] { engine->WaitForVar(other); });
      state->destroyed.Notify();
    }
    Engine* engine;
    VarHandle other;
    std::shared_ptr<State> state;
  };
  auto e = CreateEngine(Options());
  auto state = std::make_shared<State>();
  VarHandle v = e->NewVariable();
  VarHandle other = e->NewVariable();
  auto waiter = std::make_shared<WaitOnDestroy>(e.get(), other, state);
  OprHandle op = e->NewOperator(
      [waiter, state](RunContext, CallbackOnComplete cb) {
        state->deleted.WaitFor();  // finish after DeleteOperator: the worker frees the operator
        cb();
      },
      {}, {v});
  waiter.reset();  // the operator's closure holds the last reference
  e->Push(op, Context::CPU());
  e->DeleteOperator(op);
  state->deleted.Notify();
  if (!state->destroyed.WaitFor()) {
    ADD_FAILURE() << "a wait in the operator closure's destructor hung its worker";
    (void)e.release();  // leak it rather than hang the test
    return;
  }
  EXPECT_THAT(state->all_message, AllOf(HasSubstr("WaitForAll"), HasSubstr("deadlock")));
  EXPECT_THAT(state->var_message, AllOf(HasSubstr("WaitForVar"), HasSubstr("deadlock")));
  e->WaitForAll();
}

TEST_P(BadInputTest, WaitingFromAFunctionNestedInsideAFunctionOfTheSameEngineIsRejected) {
  // A function of this engine runs a function of another engine on its own
  // thread: a naive engine runs it at the push, and kAsync runs it on the
  // thread that made it ready. Waiting on this engine from there would wait
  // for the enclosing function.
  EngineOptions naive_options;
  naive_options.kind = EngineKind::kNaive;
  auto naive = CreateEngine(naive_options);
  EngineOptions pooled_options;
  pooled_options.kind = EngineKind::kPooled;
  pooled_options.cpu_worker_threads = 1;
  auto pooled = CreateEngine(pooled_options);
  std::vector<std::string> messages;  // plain: written by functions ordered by v
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  VarHandle other = engine().NewVariable();
  for (Engine* inner : {naive.get(), pooled.get()}) {
    engine().PushSync(
        [&, inner](RunContext) {
          inner->PushSync(
              [&](RunContext) {
                messages.push_back(
                    MessageOf<std::logic_error>([&] { engine().WaitForVar(other); }));
                messages.push_back(MessageOf<std::logic_error>([&] { engine().WaitForAll(); }));
              },
              Context::CPU(), {}, {}, FnProperty::kAsync);
        },
        Context::CPU(), {}, {v});
  }
  engine().WaitForVar(v);
  ASSERT_EQ(messages.size(), 4u);
  for (const std::string& m : messages) EXPECT_THAT(m, HasSubstr("deadlock"));
}

TEST_P(BadInputTest, WaitingOnAnotherEngineFromInsideAFunctionIsAllowed) {
  auto other = CreateEngine(Options());
  VarHandle ov = other->NewVariable();
  int other_value = 0;
  other->PushSync([&](RunContext) { other_value = 5; }, Context::CPU(), {}, {ov});
  std::string error = "<not run>";
  int seen = 0;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  engine().PushSync(
      [&](RunContext) {
        error = MessageOf<std::exception>([&] {
          other->WaitForVar(ov);
          other->WaitForAll();
        });
        seen = other_value;
      },
      Context::CPU(), {}, {v});
  engine().WaitForVar(v);
  EXPECT_EQ(error, "<no exception>");
  EXPECT_EQ(seen, 5);
}

TEST_P(BadInputTest, CallbackCalledASecondTimeIsRejectedAndChangesNothing) {
  std::string second_inside;
  Event second_call_done;
  CallbackOnComplete kept;
  std::vector<int> log;  // plain, ordered by v
  DrainGuard drain(engine());
  PendingWork pending(engine());
  VarHandle v = engine().NewVariable();
  engine().PushAsync(
      [&](RunContext, CallbackOnComplete cb) {
        log.push_back(1);
        kept = cb;
        cb();
        second_inside = MessageOf<std::logic_error>([&] { cb(); });
        second_call_done.Notify();  // the function is finished: the test waits on this
      },
      Context::CPU(), {}, {v});
  engine().PushSync([&](RunContext) { log.push_back(2); }, Context::CPU(), {}, {v});
  engine().WaitForVar(v);
  ASSERT_TRUE(second_call_done.WaitFor());
  EXPECT_THAT(second_inside, HasSubstr("second time"));

  // Much later, after the engine reused its internal blocks: still rejected,
  // and functions running now are not finished by the stale callback.
  Hold hold(engine(), {}, {v});
  ASSERT_TRUE(hold.WaitStarted());
  engine().PushSync([&](RunContext) { log.push_back(3); }, Context::CPU(), {}, {v});
  EXPECT_THAT(MessageOf<std::logic_error>([&] { kept(); }), HasSubstr("second time"));
  EXPECT_EQ(log.size(), 2u) << "a stale callback finished another function";
  hold.Release();
  engine().WaitForVar(v);
  EXPECT_EQ(log, (std::vector<int>{1, 2, 3}));
  pending.Finish();
}

TEST_P(BadInputTest, CallbackCalledAgainAfterItsEngineWasDestroyedIsRejected) {
  CallbackOnComplete kept;
  {
    auto e = CreateEngine(Options());
    VarHandle v = e->NewVariable();
    e->PushAsync(
        [&](RunContext, CallbackOnComplete cb) {
          kept = cb;
          cb();
        },
        Context::CPU(), {}, {v});
    e->WaitForAll();
  }
  EXPECT_THAT(MessageOf<std::logic_error>([&] { kept(); }), HasSubstr("second time"));
}

TEST_P(BadInputTest, NegativeThreadCountIsRejected) {
  for (int field = 0; field < 5; ++field) {
    EngineOptions o = Options();
    switch (field) {
      case 0:
        o.cpu_worker_threads = -1;
        break;
      case 1:
        o.cpu_priority_threads = -1;
        break;
      case 2:
        o.gpu_worker_threads = -1;
        break;
      case 3:
        o.gpu_copy_threads = -1;
        break;
      default:
        o.simulated_gpus = -1;
        break;
    }
    EXPECT_THAT(MessageOf<std::invalid_argument>([&] { CreateEngine(o); }),
                AnyOf(HasSubstr("thread"), HasSubstr("simulated_gpus")))
        << "field " << field;
  }
}

TEST_P(BadInputTest, WorkerSpinOutsideItsRangeNamesTheFieldTheValueAndTheRange) {
  for (const int bad : {-1, EngineOptions::kMaxWorkerSpinUs + 1}) {
    EngineOptions o = Options();
    o.worker_spin_us = bad;
    EXPECT_THAT(MessageOf<std::invalid_argument>([&] { CreateEngine(o); }),
                AllOf(HasSubstr("worker_spin_us = " + std::to_string(bad)),
                      HasSubstr("[0, " + std::to_string(EngineOptions::kMaxWorkerSpinUs) + "]")))
        << bad;
  }
  for (const int good : {0, EngineOptions::kMaxWorkerSpinUs}) {
    EngineOptions o = Options();
    o.worker_spin_us = good;
    EXPECT_NO_THROW(CreateEngine(o)) << good;
  }
}

// docs/reliability.md: a negative thread count is reported with the
// variable, the value and what it accepts. The message named none of the
// fields nor the value ("thread counts and simulated_gpus must be >= 0").
TEST_P(BadInputTest, NegativeThreadCountNamesTheFieldAndTheValue) {
  const std::pair<const char*, int EngineOptions::*> fields[] = {
      {"cpu_worker_threads", &EngineOptions::cpu_worker_threads},
      {"cpu_priority_threads", &EngineOptions::cpu_priority_threads},
      {"gpu_worker_threads", &EngineOptions::gpu_worker_threads},
      {"gpu_copy_threads", &EngineOptions::gpu_copy_threads},
      {"simulated_gpus", &EngineOptions::simulated_gpus}};
  for (const auto& [name, field] : fields) {
    EngineOptions o = Options();
    o.*field = -3;
    EXPECT_THAT(MessageOf<std::invalid_argument>([&] { CreateEngine(o); }),
                AllOf(HasSubstr(std::string(name) + " = -3"), HasSubstr(">= 0")))
        << name;
  }
}

// An EngineKind made from an integer that names no kind (a value read from a
// config file, say) is reported with the value and the kinds there are.
TEST_P(BadInputTest, KindThatIsNotAnEngineKindIsRejected) {
  EngineOptions o = Options();
  o.kind = static_cast<EngineKind>(7);
  EXPECT_THAT(MessageOf<std::invalid_argument>([&] { CreateEngine(o); }),
              AllOf(HasSubstr("EngineOptions::kind = 7"), HasSubstr("kPerDevice")));
}

TEST_P(BadInputTest, NegativeOrNaNWatchdogSecondsIsRejected) {
  for (double seconds : {-1.0, std::nan("")}) {
    EngineOptions o = Options();
    o.watchdog_seconds = seconds;
    EXPECT_THAT(MessageOf<std::invalid_argument>([&] { CreateEngine(o); }),
                AllOf(HasSubstr("watchdog_seconds"), HasSubstr("non-negative")))
        << seconds;
  }
}

TEST_P(BadInputTest, BadOperatorHandlesAreRejected) {
  PendingWork pending(engine());
  VarHandle v = engine().NewVariable();
  EXPECT_THAT(MessageOf<std::invalid_argument>([&] { engine().Push(nullptr, Context::CPU()); }),
              HasSubstr("null operator"));
  EXPECT_THAT(MessageOf<std::invalid_argument>([&] { engine().DeleteOperator(nullptr); }),
              HasSubstr("null operator"));
  OprHandle op = engine().NewOperator([](RunContext, CallbackOnComplete cb) { cb(); }, {}, {v});
  engine().Push(op, Context::CPU());
  engine().DeleteOperator(op);
  EXPECT_THAT(MessageOf<std::logic_error>([&] { engine().Push(op, Context::CPU()); }),
              HasSubstr("deleted"));
  pending.Finish();
}

DEPENGINE_INSTANTIATE_ALL_ENGINES(BadInputTest);

}  // namespace
}  // namespace depengine::test
