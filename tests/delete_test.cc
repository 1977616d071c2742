// Semantics point 5, vars: DeleteVariable runs delete_fn after every earlier
// user of the var, then frees the var.
#include <atomic>
#include <stdexcept>
#include <vector>

#include "alloc_counter.h"
#include "engine_fixture.h"

namespace depengine::test {
namespace {

using ::testing::HasSubstr;

class DeleteTest : public EngineTest {};

TEST_P(DeleteTest, DeleteFnRunsAfterEveryEarlierReaderAndWriter) {
  constexpr int kReaders = 8;
  int value = 0;  // plain
  bool reader_done[kReaders] = {};
  int delete_saw_value = -1;
  int delete_saw_readers = -1;
  Event deleted;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  engine().PushSync([&](RunContext) { value = 1; }, Context::CPU(), {}, {v});
  for (int i = 0; i < kReaders; ++i) {
    engine().PushSync([&, i](RunContext) { reader_done[i] = value == 1; }, Context::CPU(), {v}, {});
  }
  Hold last_reader(engine(), {v}, {});
  engine().DeleteVariable(
      [&](RunContext) {
        delete_saw_value = value;
        int n = 0;
        for (bool d : reader_done) n += d ? 1 : 0;
        delete_saw_readers = n;
        deleted.Notify();
      },
      Context::CPU(), v);
  ASSERT_TRUE(last_reader.WaitStarted());
  ExpectQuiet(deleted, "delete_fn ran while an earlier reader of the var was unfinished");
  last_reader.Release();
  EXPECT_TRUE(deleted.WaitFor());
  engine().WaitForAll();
  EXPECT_EQ(delete_saw_value, 1);
  EXPECT_EQ(delete_saw_readers, kReaders);
}

TEST_P(DeleteTest, DeleteFnSeesAsyncWritersFinishedOnAnotherThread) {
  constexpr int kWriters = 20;
  int value = 0;
  int delete_saw = -1;
  Completer completer;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  PushAsyncIncrementsOnCompleter(engine(), completer, v, &value, kWriters);
  engine().DeleteVariable([&](RunContext) { delete_saw = value; }, Context::CPU(), v);
  engine().WaitForAll();
  EXPECT_EQ(delete_saw, kWriters);
}

TEST_P(DeleteTest, DeleteVariableDoesNotWaitForOtherVars) {
  Event deleted;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  VarHandle u = engine().NewVariable();
  Hold hold_u(engine(), {}, {u});
  ASSERT_TRUE(hold_u.WaitStarted());
  engine().PushSync([](RunContext) {}, Context::CPU(), {}, {u});  // queued behind the hold
  engine().DeleteVariable([&](RunContext) { deleted.Notify(); }, Context::CPU(), v);
  EXPECT_TRUE(deleted.WaitFor()) << "DeleteVariable waited for functions on another var";
  hold_u.Release();
}

TEST_P(DeleteTest, NullDeleteFnStillDeletesTheVar) {
  VarHandle v = engine().NewVariable();
  engine().PushSync([](RunContext) {}, Context::CPU(), {}, {v});
  engine().DeleteVariable(nullptr, Context::CPU(), v);
  engine().WaitForAll();
  EXPECT_THAT(MessageOf<std::invalid_argument>(
                  [&] { engine().PushSync([](RunContext) {}, Context::CPU(), {}, {v}); }),
              HasSubstr("deleted"));
}

TEST_P(DeleteTest, DeleteFnReceivesItsContext) {
  RunContext seen{Context::GPU(5), reinterpret_cast<void*>(0x1)};
  VarHandle v = engine().NewVariable();
  engine().DeleteVariable([&](RunContext r) { seen = r; }, Context::CPU(1), v);
  engine().WaitForAll();
  EXPECT_TRUE(seen.ctx == Context::CPU(1));
  EXPECT_EQ(seen.stream, nullptr);
}

TEST_P(DeleteTest, FailedVarIsStillDeletedAndItsFailureStillReported) {
  bool delete_ran = false;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  engine().PushSync([](RunContext) { throw std::runtime_error("failed before delete"); },
                    Context::CPU(), {}, {v});
  engine().DeleteVariable([&](RunContext) { delete_ran = true; }, Context::CPU(), v);
  EXPECT_THAT(MessageOf<std::runtime_error>([&] { engine().WaitForAll(); }),
              HasSubstr("failed before delete"))
      << "a failure no WaitForVar delivered must reach WaitForAll";
  EXPECT_TRUE(delete_ran) << "the deletion of a failed var was skipped: its memory never returns";
}

TEST_P(DeleteTest, ManyVarsCreatedUsedAndDeleted) {
  constexpr int kVars = 2000;
  std::atomic<int> deletes{0};
  std::vector<int> values(kVars, 0);  // slot i used only by var i's functions
  int checked = 0;
  for (int i = 0; i < kVars; ++i) {
    VarHandle v = engine().NewVariable();
    engine().PushSync([&, i](RunContext) { values[i] = i; }, Context::CPU(), {}, {v});
    engine().DeleteVariable(
        [&, i](RunContext) {
          if (values[i] == i) ++deletes;
        },
        Context::CPU(), v);
    if (i % 500 == 499) {
      engine().WaitForAll();
      checked = deletes.load();
      EXPECT_EQ(checked, i + 1);
    }
  }
  engine().WaitForAll();
  EXPECT_EQ(deletes.load(), kVars);
}

// A program that makes and deletes short-lived vars (temporaries) allocates
// nothing per var once the engine's pools are warm: vars come from a pool
// and DeleteVariable's one-var push builds no list. (Checked: building a
// one-element std::vector for the deletion's push fails this with one
// allocation per deletion.)
TEST_P(DeleteTest, NewAndDeleteVariableAllocateNothingOnceWarm) {
  constexpr int kBatch = 100;
  constexpr int kWarmupBatches = 30;  // past the engine's quarantine of deleted vars
  constexpr int kBatches = 20;
  // Deletions of different vars run at the same time on different workers.
  std::atomic<int> deleted{0};
  auto batch = [&] {
    for (int i = 0; i < kBatch; ++i) {
      VarHandle v = engine().NewVariable();
      engine().DeleteVariable(
          [&deleted](RunContext) { deleted.fetch_add(1, std::memory_order_relaxed); },
          Context::CPU(), v);
    }
    engine().WaitForAll();
  };
  for (int i = 0; i < kWarmupBatches; ++i) batch();
  StartCountingAllocations();
  for (int i = 0; i < kBatches; ++i) batch();
  const long allocations = StopCountingAllocations();
  EXPECT_EQ(deleted.load(), kBatch * (kWarmupBatches + kBatches));
  // Sanitizer builds own operator new: there the program runs (under their
  // checks) but allocations are not counted.
  if (AllocationCountingAvailable()) {
    EXPECT_LT(allocations, kBatch * kBatches / 20)
        << allocations << " allocations for " << kBatch * kBatches << " vars made and deleted";
  }
}

DEPENGINE_INSTANTIATE_ALL_ENGINES(DeleteTest);

}  // namespace
}  // namespace depengine::test
