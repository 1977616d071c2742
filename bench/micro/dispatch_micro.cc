// The round trip of one function through the engine: push, dispatch to a
// worker, run, complete, and the waiting thread wakes up. Nothing else is in
// flight, so this is the latency a dependent chain pays per step when the
// pushing thread waits on it.
#include <vector>

#include "micro/micro_engines.h"

namespace depengine::micro {
namespace {

void BM_PushWaitRoundTrip(benchmark::State& state) {
  auto engine = MakeEngine(state);
  const std::vector<VarHandle> writes = {engine->NewVariable()};
  for (auto _ : state) {
    engine->PushSync([](RunContext) {}, Context::CPU(), {}, writes);
    engine->WaitForVar(writes[0]);
  }
  engine->DeleteVariable([](RunContext) {}, Context::CPU(), writes[0]);
  engine->WaitForAll();
}
BENCHMARK(BM_PushWaitRoundTrip)->Apply(AllEngines)->UseRealTime();

// A chain of kBatch functions on one var: each completion makes the next one
// ready, so this times completion + dispatch of a successor, per function,
// when the pusher runs ahead (W1's steady state).
void BM_ChainCompletionToDispatch(benchmark::State& state) {
  auto engine = MakeEngine(state);
  const std::vector<VarHandle> writes = {engine->NewVariable()};
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) engine->PushSync([](RunContext) {}, Context::CPU(), {}, writes);
    engine->WaitForAll();
  }
  ReportPerPush(state);
  engine->DeleteVariable([](RunContext) {}, Context::CPU(), writes[0]);
  engine->WaitForAll();
}
BENCHMARK(BM_ChainCompletionToDispatch)->Apply(AllEngines)->UseRealTime();

}  // namespace
}  // namespace depengine::micro
