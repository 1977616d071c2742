// Var lifetime and waiting: NewVariable + DeleteVariable, and WaitForVar on
// a var nothing uses.
#include <vector>

#include "micro/micro_engines.h"

namespace depengine::micro {
namespace {

// Each iteration creates and deletes kBatch vars; the deletions run (untimed
// drain) before the next batch, so pool reuse is measured, not growth.
void BM_NewDeleteVariable(benchmark::State& state) {
  auto engine = MakeEngine(state);
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      VarHandle v = engine->NewVariable();
      engine->DeleteVariable([](RunContext) {}, Context::CPU(), v);
    }
    state.PauseTiming();
    engine->WaitForAll();
    state.ResumeTiming();
  }
  state.counters["per_var"] = benchmark::Counter(static_cast<double>(state.iterations()) * kBatch,
                                                 benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_NewDeleteVariable)->Apply(AllEngines)->UseRealTime();

void BM_WaitForIdleVar(benchmark::State& state) {
  auto engine = MakeEngine(state);
  VarHandle v = engine->NewVariable();
  for (auto _ : state) engine->WaitForVar(v);
  engine->DeleteVariable([](RunContext) {}, Context::CPU(), v);
  engine->WaitForAll();
}
BENCHMARK(BM_WaitForIdleVar)->Apply(AllEngines)->UseRealTime();

}  // namespace
}  // namespace depengine::micro
