// The push paths: a function whose var is idle (it is ready at once), a
// function queued behind a held var (var append), and a prebuilt operator.
// Each iteration times a batch of kBatch pushes; draining them is untimed.
#include <atomic>
#include <thread>
#include <vector>

#include "micro/micro_engines.h"

namespace depengine::micro {
namespace {

// BM_PushReady, and with `max_in_flight` set so high that no push waits:
// the difference is what the backpressure's bookkeeping costs per function.
void PushReady(benchmark::State& state, std::size_t max_in_flight) {
  auto engine = MakeEngine(state, max_in_flight);
  std::vector<VarHandle> vars(kBatch);
  for (VarHandle& v : vars) v = engine->NewVariable();
  std::vector<VarHandle> writes(1);
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      writes[0] = vars[i];  // a var no earlier function of the batch uses
      engine->PushSync([](RunContext) {}, Context::CPU(), {}, writes);
    }
    state.PauseTiming();
    engine->WaitForAll();
    state.ResumeTiming();
  }
  ReportPerPush(state);
  for (VarHandle v : vars) engine->DeleteVariable([](RunContext) {}, Context::CPU(), v);
  engine->WaitForAll();
}
void BM_PushReady(benchmark::State& state) { PushReady(state, 0); }
BENCHMARK(BM_PushReady)->Apply(AllEngines)->UseRealTime();
void BM_PushReadyBounded(benchmark::State& state) { PushReady(state, 4 * kBatch); }
BENCHMARK(BM_PushReadyBounded)->Apply(AllEngines)->UseRealTime();

// Holds `var` with an async function until Release().
class VarHolder {
 public:
  VarHolder(Engine& engine, VarHandle var) : engine_(engine), var_(var) {}
  void Hold() {
    holding_.store(false, std::memory_order_relaxed);
    engine_.PushAsync(
        [this](RunContext, CallbackOnComplete done) {
          release_ = done;
          holding_.store(true, std::memory_order_release);
        },
        Context::CPU(), {}, {var_});
    while (!holding_.load(std::memory_order_acquire)) std::this_thread::yield();
  }
  void Release() { release_(); }

 private:
  Engine& engine_;
  VarHandle var_;
  CallbackOnComplete release_;
  std::atomic<bool> holding_{false};
};

void BM_PushBehindHeldVar(benchmark::State& state) {
  auto engine = MakeEngine(state);
  const std::vector<VarHandle> writes = {engine->NewVariable()};
  VarHolder holder(*engine, writes[0]);
  holder.Hold();
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) engine->PushSync([](RunContext) {}, Context::CPU(), {}, writes);
    state.PauseTiming();
    holder.Release();
    engine->WaitForAll();
    holder.Hold();
    state.ResumeTiming();
  }
  ReportPerPush(state);
  holder.Release();
  engine->DeleteVariable([](RunContext) {}, Context::CPU(), writes[0]);
  engine->WaitForAll();
}
BENCHMARK(BM_PushBehindHeldVar)->Apply(AllEngines)->UseRealTime();

void BM_PushPrebuiltOperator(benchmark::State& state) {
  auto engine = MakeEngine(state);
  std::vector<VarHandle> vars(kBatch);
  std::vector<OprHandle> oprs(kBatch);
  for (int i = 0; i < kBatch; ++i) {
    vars[i] = engine->NewVariable();
    oprs[i] = engine->NewOperator([](RunContext, CallbackOnComplete done) { done(); }, {}, {vars[i]});
  }
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) engine->Push(oprs[i], Context::CPU());
    state.PauseTiming();
    engine->WaitForAll();
    state.ResumeTiming();
  }
  ReportPerPush(state);
  for (int i = 0; i < kBatch; ++i) {
    engine->DeleteOperator(oprs[i]);
    engine->DeleteVariable([](RunContext) {}, Context::CPU(), vars[i]);
  }
  engine->WaitForAll();
}
BENCHMARK(BM_PushPrebuiltOperator)->Apply(AllEngines)->UseRealTime();

}  // namespace
}  // namespace depengine::micro
