// The engine's hooks for the operator layer (src/engine/internal_hooks.h):
// RunningFunctionId, MarkScratchVar, MayHaveFailedVars and
// PushClearFailures.
#include <cstdint>
#include <mutex>
#include <set>
#include <stdexcept>
#include <vector>

#include "engine/internal_hooks.h"
#include "engine_fixture.h"

namespace depengine::test {
namespace {

using internal::RunningFunctionId;

class EngineHooksTest : public EngineTest {};

TEST_P(EngineHooksTest, RunningFunctionIdIsZeroOutsideFunctions) {
  EXPECT_EQ(RunningFunctionId(), 0u);
  VarHandle v = engine().NewVariable();
  engine().PushSync([](RunContext) {}, Context::CPU(), {}, {v});
  engine().WaitForVar(v);
  EXPECT_EQ(RunningFunctionId(), 0u);  // not left over from a function run inline
  engine().DeleteVariable({}, Context::CPU(), v);
  engine().WaitForAll();
}

// Stable within one execution, fresh for every execution: one-shot pushes,
// an async body, and a prebuilt operator pushed several times.
TEST_P(EngineHooksTest, RunningFunctionIdIsOnePerExecution) {
  constexpr int kRuns = 8;
  VarHandle v = engine().NewVariable();
  std::vector<std::uint64_t> ids;  // written by functions serialized on v
  bool stable = true;
  auto record = [&] {
    const std::uint64_t first = RunningFunctionId();
    const std::uint64_t again = RunningFunctionId();
    stable = stable && first == again;
    ids.push_back(first);
  };
  for (int i = 0; i < kRuns; ++i) {
    engine().PushSync([&](RunContext) { record(); }, Context::CPU(), {}, {v});
    engine().PushAsync(
        [&](RunContext, CallbackOnComplete done) {
          record();
          done();
        },
        Context::CPU(), {}, {v});
  }
  OprHandle op = engine().NewOperator(
      [&](RunContext, CallbackOnComplete done) {
        record();
        done();
      },
      {}, {v});
  for (int i = 0; i < kRuns; ++i) engine().Push(op, Context::CPU());
  engine().WaitForVar(v);
  EXPECT_TRUE(stable);
  ASSERT_EQ(ids.size(), 3u * kRuns);
  const std::set<std::uint64_t> distinct(ids.begin(), ids.end());
  EXPECT_EQ(distinct.size(), ids.size());
  EXPECT_EQ(distinct.count(0), 0u);
  engine().DeleteOperator(op);
  engine().DeleteVariable({}, Context::CPU(), v);
  engine().WaitForAll();
}

// Functions on several workers at once, each on its own var: no two
// executions share an id.
TEST_P(EngineHooksTest, RunningFunctionIdIsUniqueAcrossThreads) {
  constexpr int kVars = 8;
  constexpr int kPerVar = 200;
  std::mutex mu;
  std::vector<std::uint64_t> ids;
  std::vector<VarHandle> vars;
  for (int i = 0; i < kVars; ++i) vars.push_back(engine().NewVariable());
  for (int k = 0; k < kPerVar; ++k) {
    for (VarHandle v : vars) {
      engine().PushSync(
          [&](RunContext) {
            const std::uint64_t id = RunningFunctionId();
            std::lock_guard<std::mutex> lock(mu);
            ids.push_back(id);
          },
          Context::CPU(), {}, {v});
    }
  }
  engine().WaitForAll();
  ASSERT_EQ(ids.size(), static_cast<std::size_t>(kVars * kPerVar));
  const std::set<std::uint64_t> distinct(ids.begin(), ids.end());
  EXPECT_EQ(distinct.size(), ids.size());
  EXPECT_EQ(distinct.count(0), 0u);
  for (VarHandle v : vars) engine().DeleteVariable({}, Context::CPU(), v);
  engine().WaitForAll();
}

// A function of another engine run inline inside a body (a naive engine
// runs what the body pushes on the body's thread) has its own id, and the
// outer body gets its own back afterwards.
TEST_P(EngineHooksTest, RunningFunctionIdSurvivesANestedFunction) {
  EngineOptions naive_options;
  naive_options.kind = EngineKind::kNaive;
  std::unique_ptr<Engine> naive = CreateEngine(naive_options);
  VarHandle inner_var = naive->NewVariable();
  VarHandle v = engine().NewVariable();
  std::uint64_t before = 0, inner = 0, after = 0;
  engine().PushSync(
      [&](RunContext) {
        before = RunningFunctionId();
        naive->PushSync([&](RunContext) { inner = RunningFunctionId(); }, Context::CPU(), {},
                        {inner_var});
        after = RunningFunctionId();
      },
      Context::CPU(), {}, {v});
  engine().WaitForVar(v);
  naive->WaitForVar(inner_var);
  EXPECT_NE(before, 0u);
  EXPECT_NE(inner, 0u);
  EXPECT_NE(inner, before);
  EXPECT_EQ(after, before);
  naive->DeleteVariable({}, Context::CPU(), inner_var);
  naive->WaitForAll();
  engine().DeleteVariable({}, Context::CPU(), v);
  engine().WaitForAll();
}

// A scratch var is never marked failed: neither by a function that throws
// while writing it nor by one skipped for a failed input. The failure still
// reaches the other written vars, and WaitForAll when nobody waited for it.
TEST_P(EngineHooksTest, ScratchVarIsNotFailedByItsWriters) {
  VarHandle scratch = engine().NewVariable();
  VarHandle out = engine().NewVariable();
  VarHandle downstream = engine().NewVariable();
  internal::MarkScratchVar(&engine(), scratch);
  engine().PushSync([](RunContext) { throw std::domain_error("first"); }, Context::CPU(), {},
                    {scratch, out});
  // Skipped (reads the failed `out`): passes the failure on, not to scratch.
  engine().PushSync([](RunContext) {}, Context::CPU(), {out}, {scratch, downstream});
  int later_runs = 0;
  engine().PushSync([&](RunContext) { ++later_runs; }, Context::CPU(), {}, {scratch});
  EXPECT_NO_THROW(engine().WaitForVar(scratch));
  EXPECT_EQ(later_runs, 1);
  // Nobody waited for `out` or `downstream`: WaitForAll reports it.
  EXPECT_THROW(engine().WaitForAll(), std::domain_error);
  // Delivered on the written vars, and the scratch var's users still run.
  engine().PushSync([](RunContext) { throw std::domain_error("second"); }, Context::CPU(), {},
                    {scratch, out});
  engine().PushSync([](RunContext) {}, Context::CPU(), {out}, {scratch, downstream});
  engine().PushSync([&](RunContext) { ++later_runs; }, Context::CPU(), {}, {scratch});
  EXPECT_THROW(engine().WaitForVar(downstream), std::domain_error);
  EXPECT_NO_THROW(engine().WaitForVar(scratch));
  EXPECT_EQ(later_runs, 2);
  EXPECT_THROW(engine().WaitForVar(out), std::domain_error);
  EXPECT_NO_THROW(engine().WaitForAll());  // delivered already
  for (VarHandle v : {scratch, out, downstream}) engine().DeleteVariable({}, Context::CPU(), v);
  engine().WaitForAll();
}

TEST_P(EngineHooksTest, MarkScratchVarRejectsBadVars) {
  EXPECT_THROW(internal::MarkScratchVar(&engine(), nullptr), std::invalid_argument);
  EngineOptions other_options;
  other_options.kind = EngineKind::kNaive;
  std::unique_ptr<Engine> other = CreateEngine(other_options);
  VarHandle foreign = other->NewVariable();
  EXPECT_THROW(internal::MarkScratchVar(&engine(), foreign), std::invalid_argument);
  other->DeleteVariable({}, Context::CPU(), foreign);
  other->WaitForAll();
}

// PushClearFailures runs after the earlier users of its vars (never
// skipped) and clears their failures for the later ones; the failure stays
// in the engine's log, so WaitForAll reports it unless it was delivered.
TEST_P(EngineHooksTest, PushClearFailuresClearsForLaterFunctions) {
  VarHandle hidden = engine().NewVariable();
  VarHandle seen = engine().NewVariable();
  EXPECT_FALSE(internal::MayHaveFailedVars(&engine()));
  int runs = 0;
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round);
    engine().PushSync([](RunContext) { throw std::domain_error("hidden"); }, Context::CPU(), {},
                      {hidden, seen});
    internal::PushClearFailures(&engine(), Context::CPU(), {hidden});
    engine().PushSync([&](RunContext) { ++runs; }, Context::CPU(), {}, {hidden});
    EXPECT_NO_THROW(engine().WaitForVar(hidden));
    EXPECT_EQ(runs, round + 1);
    EXPECT_TRUE(internal::MayHaveFailedVars(&engine()));  // `seen` still holds it
    if (round == 0) {
      EXPECT_THROW(engine().WaitForAll(), std::domain_error);  // undelivered: reported
    } else {
      EXPECT_THROW(engine().WaitForVar(seen), std::domain_error);
      EXPECT_NO_THROW(engine().WaitForAll());  // delivered through `seen`
    }
    EXPECT_FALSE(internal::MayHaveFailedVars(&engine()));
  }
  EXPECT_THROW(internal::PushClearFailures(&engine(), Context::CPU(), {nullptr}),
               std::invalid_argument);
  for (VarHandle v : {hidden, seen}) engine().DeleteVariable({}, Context::CPU(), v);
  engine().WaitForAll();
}

DEPENGINE_INSTANTIATE_ALL_ENGINES(EngineHooksTest);

}  // namespace
}  // namespace depengine::test
