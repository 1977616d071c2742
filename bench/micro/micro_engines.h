// What the microbenchmarks share: one engine per benchmark run, chosen by
// the benchmark's "engine" argument, and timing in batches of pushes.
// Every benchmark measures wall time (UseRealTime): the engine's cost
// includes its workers' contention with the pushing thread, which the
// pushing thread's CPU time would hide.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <thread>

#include "depengine/engine.h"

namespace depengine::micro {

// Registers a benchmark once per engine kind: engine:0 naive, 1 pooled,
// 2 per-device.
inline void AllEngines(benchmark::internal::Benchmark* b) {
  b->ArgName("engine");
  for (int kind = 0; kind <= 2; ++kind) b->Arg(kind);
}

// The engine the benchmark's argument names, with a worker per hardware
// thread and the given EngineOptions::max_in_flight; labels the benchmark
// with the engine's name.
inline std::unique_ptr<Engine> MakeEngine(benchmark::State& state, std::size_t max_in_flight = 0) {
  static constexpr EngineKind kKinds[] = {EngineKind::kNaive, EngineKind::kPooled, EngineKind::kPerDevice};
  EngineOptions o;
  o.kind = kKinds[state.range(0)];
  o.cpu_worker_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  o.max_in_flight = max_in_flight;
  state.SetLabel(EngineKindName(o.kind));
  return CreateEngine(o);
}

// Pushes timed per benchmark iteration: each iteration is a batch.
inline constexpr int kBatch = 1024;

// Reports the time per pushed function as the counter "per_push".
inline void ReportPerPush(benchmark::State& state) {
  state.counters["per_push"] = benchmark::Counter(static_cast<double>(state.iterations()) * kBatch,
                                                  benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

}  // namespace depengine::micro
