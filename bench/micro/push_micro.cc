// The push paths: a function whose var is idle (it is ready at once), a
// function queued behind a held var (var append), and a prebuilt operator.
// Each iteration times a batch of kBatch pushes; draining them is untimed.
#include <atomic>
#include <cstdint>
#include <thread>
#include <utility>
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

// Holds `vars` with an async function that writes them until Release().
class VarHolder {
 public:
  VarHolder(Engine& engine, VarHandle var) : VarHolder(engine, std::vector<VarHandle>{var}) {}
  VarHolder(Engine& engine, std::vector<VarHandle> vars)
      : engine_(engine), vars_(std::move(vars)) {}
  void Hold() {
    holding_.store(false, std::memory_order_relaxed);
    engine_.PushAsync(
        [this](RunContext, CallbackOnComplete done) {
          release_ = done;
          holding_.store(true, std::memory_order_release);
        },
        Context::CPU(), {}, vars_);
    while (!holding_.load(std::memory_order_acquire)) std::this_thread::yield();
  }
  void Release() { release_(); }

 private:
  Engine& engine_;
  std::vector<VarHandle> vars_;
  CallbackOnComplete release_;
  std::atomic<bool> holding_{false};
};

// Times `push_batch` (kBatch pushes queued behind the holder's vars) once
// per iteration; releasing the vars and draining the batch are untimed.
template <class PushBatch>
void TimeBatchesBehind(benchmark::State& state, Engine& engine, VarHolder& holder,
                       PushBatch push_batch) {
  holder.Hold();
  for (auto _ : state) {
    push_batch();
    state.PauseTiming();
    holder.Release();
    engine.WaitForAll();
    holder.Hold();
    state.ResumeTiming();
  }
  ReportPerPush(state);
  holder.Release();
}

void BM_PushBehindHeldVar(benchmark::State& state) {
  auto engine = MakeEngine(state);
  const std::vector<VarHandle> writes = {engine->NewVariable()};
  VarHolder holder(*engine, writes[0]);
  TimeBatchesBehind(state, *engine, holder, [&] {
    for (int i = 0; i < kBatch; ++i)
      engine->PushSync([](RunContext) {}, Context::CPU(), {}, writes);
  });
  engine->DeleteVariable([](RunContext) {}, Context::CPU(), writes[0]);
  engine->WaitForAll();
}
BENCHMARK(BM_PushBehindHeldVar)->Apply(AllEngines)->UseRealTime();

// W4's push (reads 2 vars, writes 1, of 64) while every var is held: each
// push queues on three busy vars, as when the pusher runs far ahead of the
// workers (W3, W4). The pattern repeats every batch and is drawn once.
void BM_PushThreeVarsBehindHeldVars(benchmark::State& state) {
  auto engine = MakeEngine(state);
  constexpr int kVars = 64;
  std::vector<VarHandle> vars(kVars);
  for (VarHandle& v : vars) v = engine->NewVariable();
  struct Uses {
    std::vector<VarHandle> reads, writes;
  };
  std::vector<Uses> uses(kBatch);
  std::uint64_t x = 42;
  auto draw = [&x] {  // xorshift: any fixed spread over the vars will do
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return static_cast<int>(x % kVars);
  };
  for (Uses& u : uses) {
    const int w = draw();
    int r1 = draw(), r2 = draw();
    while (r1 == w) r1 = draw();
    while (r2 == w || r2 == r1) r2 = draw();
    u.reads = {vars[r1], vars[r2]};
    u.writes = {vars[w]};
  }
  VarHolder holder(*engine, vars);
  TimeBatchesBehind(state, *engine, holder, [&] {
    for (const Uses& u : uses)
      engine->PushSync([](RunContext) {}, Context::CPU(), u.reads, u.writes);
  });
  for (VarHandle v : vars) engine->DeleteVariable([](RunContext) {}, Context::CPU(), v);
  engine->WaitForAll();
}
BENCHMARK(BM_PushThreeVarsBehindHeldVars)->Apply(AllEngines)->UseRealTime();

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
