// The profiler's cost per function: a W1-style chain (one var, every
// function writes it) with recording off and on, end to end (push to
// WaitForAll). Off, a push pays one relaxed load; on, each function takes
// four clock readings and allocates its record.
#include <vector>

#include "depengine/profiler.h"
#include "micro/micro_engines.h"

namespace depengine::micro {
namespace {

void ChainWithProfiling(benchmark::State& state, bool profiling) {
  auto engine = MakeEngine(state);
  const std::vector<VarHandle> writes = {engine->NewVariable()};
  long counter = 0;
  SetProfiling(*engine, profiling);
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      engine->PushSync([&counter](RunContext) { ++counter; }, Context::CPU(), {}, writes);
    }
    engine->WaitForAll();
    if (profiling) {
      state.PauseTiming();
      ClearProfile(*engine);
      state.ResumeTiming();
    }
  }
  ReportPerPush(state);
  SetProfiling(*engine, false);
  engine->DeleteVariable([](RunContext) {}, Context::CPU(), writes[0]);
  engine->WaitForAll();
  benchmark::DoNotOptimize(counter);
}

void BM_ChainProfilingOff(benchmark::State& state) { ChainWithProfiling(state, false); }
void BM_ChainProfilingOn(benchmark::State& state) { ChainWithProfiling(state, true); }
BENCHMARK(BM_ChainProfilingOff)->Apply(AllEngines)->UseRealTime();
BENCHMARK(BM_ChainProfilingOn)->Apply(AllEngines)->UseRealTime();

}  // namespace
}  // namespace depengine::micro
