// w4-pusher-share: is the pusher's share of W4 its CPU time, or the lines
// it shares with the workers? Per round it times W4 as run (pushes inside
// the timed region), then the same functions pushed ahead behind a
// function that holds every var (the clock starts at the release, as in
// depengine-bench --pushed-ahead), optionally with a third thread that burns
// BURN_MS of its own CPU time from the release on, touching nothing the
// engine touches. If the burner costs the workers what the pusher costs
// them, the pusher's share is its CPU time. docs/performance.md ("W4
// without the pusher in the timed region") quotes it.
//
// Not built by CMake. From the repository root, after a Release build in
// build/ (the lines below joined; add -L/usr/local/cuda/lib64 -lcudart when
// the library was built with CUDA):
//   g++ -O2 -std=c++20 -I include -I bench bench/experiments/w4_pusher_share.cc
//     build/bench/libdepengine_workloads.a build/src/libdepengine.a -lpthread
//     -o /tmp/w4-pusher-share
//   /tmp/w4-pusher-share [T_us=1] [ops=200000] [workers=2] [burn_ms=0] [rounds=7]
// The first round includes the pools' page faults: read the others.
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "depengine/engine.h"
#include "workloads/workload_spec.h"
#include "workloads/workloads.h"

using namespace depengine;
using namespace depengine::bench;
using Clock = std::chrono::steady_clock;

namespace {

double ProcessCpu() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

double ThreadCpu() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

int main(int argc, char** argv) {
  const auto arg = [&](int i, double d) { return argc > i ? std::atof(argv[i]) : d; };
  RandomDagParams params;
  params.spin_us = static_cast<int>(arg(1, 1));
  params.ops = static_cast<std::size_t>(arg(2, 200000));
  const int workers = static_cast<int>(arg(3, 2));
  const double burn_ms = arg(4, 0);
  const int rounds = static_cast<int>(arg(5, 7));
  const RandomDag dag = MakeRandomDag(params);
  const std::vector<std::uint64_t> expected = SerialRandomDag(dag);
  EngineOptions options;
  options.cpu_worker_threads = workers;
  auto engine = CreateEngine(options);
  std::vector<VarHandle> vars(dag.vars);
  for (VarHandle& v : vars) v = engine->NewVariable();
  std::vector<std::uint64_t> values(dag.vars);
  const RandomDagState state{dag.ops.data(), values.data(), params.spin_us};
  const auto reset = [&] {
    for (std::size_t v = 0; v < dag.vars; ++v) values[v] = DagInitialValue(v);
  };
  const double ideal = static_cast<double>(params.ops) * params.spin_us * 1e-6 / workers;
  const double ops = static_cast<double>(params.ops);
  std::printf("T = %d us, %zu ops, %d workers, burner %.1f ms; efficiency (wall ns/op, CPU ns/op)\n",
              params.spin_us, params.ops, workers, burn_ms);
  for (int round = 0; round < rounds; ++round) {
    reset();
    const double cpu0 = ProcessCpu();
    const auto t0 = Clock::now();
    PushRandomDag(*engine, dag, vars, &state);
    engine->WaitForAll();
    const double as_run = Since(t0), as_run_cpu = ProcessCpu() - cpu0;
    const bool as_run_ok = values == expected;

    reset();
    std::atomic<bool> go{false};
    engine->PushSync([&](RunContext) { go.wait(false); }, Context::CPU(), {}, vars);
    const auto tp = Clock::now();
    PushRandomDag(*engine, dag, vars, &state);
    const double push_phase = Since(tp);
    const double cpu1 = ProcessCpu();
    const auto t1 = Clock::now();
    std::thread burner;
    if (burn_ms > 0) {
      burner = std::thread([burn_ms] {
        const double start = ThreadCpu();
        volatile std::uint64_t x = 1;
        while (ThreadCpu() - start < burn_ms * 1e-3) {
          for (int k = 0; k < 1000; ++k) x = x * 3 + 1;
        }
      });
    }
    go.store(true);
    go.notify_all();
    engine->WaitForAll();
    const double ahead = Since(t1), ahead_cpu = ProcessCpu() - cpu1;
    if (burner.joinable()) burner.join();
    const bool ahead_ok = values == expected;
    std::printf("as run %.3f (%.0f, %.0f)%s   pushed ahead %.3f (%.0f, %.0f)%s   push phase %.1f ms\n",
                ideal / as_run, as_run * 1e9 / ops, as_run_cpu * 1e9 / ops,
                as_run_ok ? "" : " WRONG RESULT", ideal / ahead, ahead * 1e9 / ops,
                ahead_cpu * 1e9 / ops, ahead_ok ? "" : " WRONG RESULT", push_phase * 1e3);
  }
  for (VarHandle v : vars) engine->DeleteVariable([](RunContext) {}, Context::CPU(), v);
  engine->WaitForAll();
}
