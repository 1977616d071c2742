// w6-schedule-probe: where W6's time goes on depengine's per-device engine
// and on oneTBB (the best peer at b = 128), task by task. Both factor the
// same matrix with the same kernels (bench/peers/tile_cholesky.h) in one
// process, alternating, and every task records its thread, start and end.
// Per repetition it prints:
//   - wall and GFLOP/s, and how busy the two threads were (the sum of task
//     times over 2 x wall);
//   - the mean time of each kernel, and of GEMMs whose tile was last written
//     on the same thread or on the other one (a tile the other core just
//     wrote has to travel);
//   - the idle gaps between one thread's tasks: short ones (the engine's
//     cost per task) and long ones (starvation, or the thread descheduled);
//   - the push phase, the lag before the first task and the tail after the
//     last one.
// docs/benchmarks.md ("W6: what the two runtimes spend") quotes it. Not built
// by CMake (it needs oneTBB and OpenBLAS, like bench/peers); from the
// repository root, after `tools/run_peers.sh` or a build of build-peers/,
// one command (the lines below joined):
//   g++ -O2 -std=c++20 -I include -I bench/peers -I bench -I /usr/include/openblas
//     bench/experiments/w6_schedule_probe.cc bench/peers/tbb_task_graph.cc
//     build-peers/bench/peers/libpeers_cholesky.a build-peers/bench/peers/libpeers_common.a
//     build-peers/bench/peers/libpeers_spec.a build-peers/src/libdepengine.a
//     -lopenblas -llapacke -ltbb -lpthread -o /tmp/w6-schedule-probe
// (add `-L/usr/local/cuda/lib64 -lcudart -Wl,-rpath,/usr/local/cuda/lib64`
// when build-peers was configured with CUDA), then `/tmp/w6-schedule-probe 6`
// for 6 repetitions of each.
#include <depengine/engine.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_group.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "tbb_task_graph.h"
#include "tile_cholesky.h"

namespace {

using namespace depengine;
using namespace depengine::bench::peers;

constexpr int kThreads = 2;

long long NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct TaskRecord {
  long long start, end;
  TileTask task;
  int thread;
};

// Filled by the tasks of one repetition; reset between repetitions.
std::vector<TaskRecord> records;
std::atomic<int> record_count{0};
std::atomic<int> thread_count{0};
std::atomic<int> repetition{0};
thread_local int thread_repetition = -1;
thread_local int thread_index = -1;

void RunAndRecord(TileMatrix& m, const TileTask& task) {
  if (thread_repetition != repetition.load(std::memory_order_relaxed)) {
    thread_repetition = repetition.load(std::memory_order_relaxed);
    thread_index = thread_count.fetch_add(1);
  }
  const long long start = NowNs();
  RunTileTask(m, task);
  records[record_count.fetch_add(1)] = {start, NowNs(), task, thread_index};
}

void Reset() {
  record_count = 0;
  thread_count = 0;
  repetition.fetch_add(1);
}

void Report(const char* runtime, const CholeskyParams& p, long long t0, long long pushed,
            long long t1) {
  std::vector<TaskRecord> v(records.begin(), records.begin() + record_count.load());
  const double wall = static_cast<double>(t1 - t0);
  double kernel_ns[4] = {}, kernel_count[4] = {}, busy = 0;
  long long first_start = t1, last_end = t0;
  for (const TaskRecord& r : v) {
    const int op = static_cast<int>(r.task.op);
    kernel_ns[op] += static_cast<double>(r.end - r.start);
    kernel_count[op] += 1;
    busy += static_cast<double>(r.end - r.start);
    first_start = std::min(first_start, r.start);
    last_end = std::max(last_end, r.end);
  }
  // Locality: in start order, which thread wrote each tile last.
  std::sort(v.begin(), v.end(),
            [](const TaskRecord& a, const TaskRecord& b) { return a.start < b.start; });
  const int t = p.tiles();
  std::vector<int> last_writer(static_cast<std::size_t>(t) * t, -1);
  double gemm_same_ns = 0, gemm_same = 0, gemm_other_ns = 0, gemm_other = 0;
  for (const TaskRecord& r : v) {
    int& w = last_writer[static_cast<std::size_t>(r.task.i) * t + r.task.j];
    if (w >= 0 && r.task.op == TileOp::kGemm) {
      (w == r.thread ? gemm_same_ns : gemm_other_ns) += static_cast<double>(r.end - r.start);
      (w == r.thread ? gemm_same : gemm_other) += 1;
    }
    w = r.thread;
  }
  // Gaps between one thread's consecutive tasks.
  std::stable_sort(v.begin(), v.end(),
                   [](const TaskRecord& a, const TaskRecord& b) { return a.thread < b.thread; });
  double short_gap_ns = 0, short_gaps = 0, long_gap_ns = 0, long_gaps = 0;
  for (std::size_t k = 1; k < v.size(); ++k) {
    if (v[k].thread != v[k - 1].thread) continue;
    const double gap = static_cast<double>(v[k].start - v[k - 1].end);
    if (gap < 20'000) {
      short_gap_ns += gap;
      short_gaps += 1;
    } else {
      long_gap_ns += gap;
      long_gaps += 1;
    }
  }
  auto mean_us = [](double ns, double n) { return n > 0 ? ns / n / 1e3 : 0.0; };
  std::printf(
      "%-9s %6.1f GFLOP/s  wall %6.1f ms  busy %.3f  mean us: POTRF %.1f TRSM %.1f SYRK %.1f "
      "GEMM %.1f (same thread %.1f x%.0f, other %.1f x%.0f)\n",
      runtime, p.Flops() / wall, wall / 1e6, busy / (kThreads * wall),
      mean_us(kernel_ns[0], kernel_count[0]), mean_us(kernel_ns[1], kernel_count[1]),
      mean_us(kernel_ns[2], kernel_count[2]), mean_us(kernel_ns[3], kernel_count[3]),
      mean_us(gemm_same_ns, gemm_same), gemm_same, mean_us(gemm_other_ns, gemm_other), gemm_other);
  std::printf(
      "          gaps < 20 us: %.0f, %.2f us each (%.2f ms); >= 20 us: %.0f (%.2f ms); push phase "
      "%.2f ms, first task after %.1f us, wait returned %.1f us after the last task\n",
      short_gaps, mean_us(short_gap_ns, short_gaps), short_gap_ns / 1e6, long_gaps,
      long_gap_ns / 1e6, static_cast<double>(pushed - t0) / 1e6,
      static_cast<double>(first_start - t0) / 1e3, static_cast<double>(t1 - last_end) / 1e3);
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 3;
  CholeskyParams p;
  const int t = p.tiles();
  TileMatrix original(p.n, p.b);
  FillSpd(original, p.seed);
  TileMatrix a(p.n, p.b);
  SetBlasThreads(1);
  records.resize(static_cast<std::size_t>(t) * t * t);

  EngineOptions options;
  options.kind = EngineKind::kPerDevice;
  options.cpu_worker_threads = kThreads;
  auto engine = CreateEngine(options);
  std::vector<VarHandle> vars(static_cast<std::size_t>(t) * t, nullptr);
  for (int i = 0; i < t; ++i) {
    for (int j = 0; j <= i; ++j) vars[static_cast<std::size_t>(i) * t + j] = engine->NewVariable();
  }
  tbb::global_control threads(tbb::global_control::max_allowed_parallelism, kThreads);
  TileMatrix* m = &a;

  for (int rep = 0; rep < reps; ++rep) {
    {  // depengine, as bench/peers/peer_depengine.cc pushes W6
      CopyLowerTiles(original, a);
      Reset();
      std::vector<VarHandle> reads;
      std::vector<VarHandle> writes(1);
      const long long t0 = NowNs();
      ForEachTileTask(t, [&](const TileTask& task) {
        TileRef in[2];
        const int n = task.Reads(in);
        reads.resize(static_cast<std::size_t>(n));
        for (int r = 0; r < n; ++r)
          reads[r] = vars[static_cast<std::size_t>(in[r].i) * t + in[r].j];
        writes[0] = vars[static_cast<std::size_t>(task.i) * t + task.j];
        engine->PushSync([m, task](RunContext) { RunAndRecord(*m, task); }, Context::CPU(), reads,
                         writes, FnProperty::kNormal, task.Priority(t));
      });
      const long long pushed = NowNs();
      engine->WaitForAll();
      Report("depengine", p, t0, pushed, NowNs());
    }
    {  // oneTBB, as bench/peers/peer_tbb.cc does
      CopyLowerTiles(original, a);
      Reset();
      std::vector<TbbTaskGraph::Var> tile_vars(static_cast<std::size_t>(t) * t);
      auto var = [&](TileRef r) { return &tile_vars[static_cast<std::size_t>(r.i) * t + r.j]; };
      tbb::task_group group;
      TbbTaskGraph graph(group);
      const long long t0 = NowNs();
      ForEachTileTask(t, [&](const TileTask& task) {
        TileRef in[2];
        const int n = task.Reads(in);
        TbbTaskGraph::Var* reads[2] = {n > 0 ? var(in[0]) : nullptr, n > 1 ? var(in[1]) : nullptr};
        TbbTaskGraph::Var* write = var(task.Writes());
        graph.Push([m, task] { RunAndRecord(*m, task); }, reads, static_cast<std::size_t>(n),
                   &write, 1);
      });
      const long long pushed = NowNs();
      group.wait();
      Report("oneTBB", p, t0, pushed, NowNs());
      for (TbbTaskGraph::Var& v : tile_vars) TbbTaskGraph::Forget(v);
    }
  }
  for (VarHandle v : vars) {
    if (v != nullptr) engine->DeleteVariable([](RunContext) {}, Context::CPU(), v);
  }
  engine->WaitForAll();
  return 0;
}
