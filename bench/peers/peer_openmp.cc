// peers-omp-gcc / peers-omp-clang: W1-W6 with OpenMP tasks and
// depend(in / out / inout) clauses, so that the OpenMP runtime tracks the
// dependencies itself (libgomp under GCC, LLVM libomp under Clang: the same
// source built by each compiler).
//
// Each run opens one parallel region of P threads; one thread (single)
// creates the tasks, the others execute them, and it joins them at taskwait.
// The timed region starts before the first task and ends when taskwait
// returns. A var is the address named in depend().
//   peers-omp-gcc W3 rounds=100
#include <omp.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "peer_server.h"
#include "peer_workloads.h"
#include "workloads/memory.h"
#include "workloads/workload_spec.h"
#ifdef DEPENGINE_PEERS_HAVE_BLAS
#include "tile_cholesky.h"
#endif

namespace depengine::bench::peers {
namespace {

class ChainOmp : public Runner {
 public:
  ChainOmp(const ChainParams& p, int threads) : p_(p), threads_(threads) {}
  RunResult Run() override {
    CounterArray counters(1, 0);  // on a line of its own (see counter_array.h)
    std::uint64_t* const c = counters.data();
    double seconds = 0;
    const std::size_t n = p_.ops;
#pragma omp parallel num_threads(threads_)
#pragma omp single
    {
      Stopwatch watch;
      for (std::size_t i = 0; i < n; ++i) {
#pragma omp task depend(inout : c[0]) firstprivate(c)
        ++c[0];
      }
#pragma omp taskwait
      seconds = watch.Seconds();
    }
    return Finish(CheckCounter("W1", counters[0], n), seconds, static_cast<double>(n));
  }

 private:
  ChainParams p_;
  int threads_;
};

// W2, and W5: OpenMP has no prebuilt task to push again, so W5's push of
// operator k is a task that mutates var k, the same as W2's.
class RoundRobinOmp : public Runner {
 public:
  RoundRobinOmp(const char* name, std::size_t vars, std::size_t ops, int threads)
      : name_(name), vars_(vars), ops_(ops), threads_(threads) {}
  RunResult Run() override {
    CounterArray count(vars_, 0);
    std::uint64_t* c = count.data();
    double seconds = 0;
    const std::size_t n = ops_;
    const std::size_t k = vars_;
#pragma omp parallel num_threads(threads_)
#pragma omp single
    {
      Stopwatch watch;
      for (std::size_t i = 0, v = 0; i < n; ++i) {
#pragma omp task depend(inout : c[v]) firstprivate(c, v)
        ++c[v];
        if (++v == k) v = 0;
      }
#pragma omp taskwait
      seconds = watch.Seconds();
    }
    return Finish(CheckRoundRobin(name_, count, n), seconds, static_cast<double>(n));
  }

 private:
  const char* name_;
  std::size_t vars_, ops_;
  int threads_;
};

class FanOmp : public Runner {
 public:
  FanOmp(const FanParams& p, int threads) : p_(p), expected_(SerialFan(p)), threads_(threads) {}
  RunResult Run() override {
    std::uint64_t x = 0;
    std::vector<std::uint64_t> ys(p_.fan, 0);
    std::uint64_t* y = ys.data();
    const std::size_t fan = p_.fan;
    const std::size_t rounds = p_.rounds;
    double seconds = 0;
#pragma omp parallel num_threads(threads_)
#pragma omp single
    {
      Stopwatch watch;
      for (std::size_t r = 0; r < rounds; ++r) {
#pragma omp task depend(inout : x) shared(x)
        FanBump(x);
        for (std::size_t j = 0; j < fan; ++j) {
#pragma omp task depend(in : x) depend(out : y[j]) shared(x) firstprivate(y, j)
          FanSpread(x, j, y[j]);
        }
#pragma omp task depend(iterator(jj = 0 : fan), in : y[jj]) depend(inout : x) shared(x) firstprivate(y, fan)
        x = FanGather(y, fan);
      }
#pragma omp taskwait
      seconds = watch.Seconds();
    }
    return Finish(CheckFan(x, ys, expected_), seconds, static_cast<double>(p_.ops()));
  }

 private:
  FanParams p_;
  FanValues expected_;
  int threads_;
};

class DagOmp : public Runner {
 public:
  DagOmp(const RandomDagParams& p, int threads) : d_(p), threads_(threads) {}
  RunResult Run() override {
    std::vector<std::uint64_t> values(d_.dag.vars);
    for (std::size_t v = 0; v < values.size(); ++v) values[v] = DagInitialValue(v);
    std::uint64_t* val = values.data();
    const DagOp* ops = d_.dag.ops.data();
    const std::size_t n = d_.dag.ops.size();
    const int spin = d_.params.spin_us;
    double seconds = 0;
#pragma omp parallel num_threads(threads_)
#pragma omp single
    {
      Stopwatch watch;
      for (std::size_t i = 0; i < n; ++i) {
        const DagOp o = ops[i];
#pragma omp task depend(in : val[o.read1], val[o.read2]) depend(inout : val[o.write]) firstprivate(val, o, spin)
        {
          SpinFor(spin);
          val[o.write] = DagMix(val[o.write], val[o.read1], val[o.read2]);
        }
      }
#pragma omp taskwait
      seconds = watch.Seconds();
    }
    RunResult r = Finish(CheckDag(values, d_.expected), seconds, static_cast<double>(n));
    if (r.ok) AddDagFigures(r, d_, threads_);
    return r;
  }

 private:
  PreparedDag d_;
  int threads_;
};

// MEM: a task that holds the var spins until the pusher has pushed every
// other task. A runtime that made the pusher wait for the held var (as
// libgomp does for an undeferred task past its queued-task limit) would
// deadlock here, so the holder gives up once the pusher has made no progress
// for a second, and the run then reports that instead of a figure.
class PendingOmp : public Runner {
 public:
  PendingOmp(const PendingMemoryParams& p, int threads) : p_(p), threads_(threads) {}
  RunResult Run() override {
    std::uint64_t counter = 0;
    std::atomic<bool> holding{false};
    std::atomic<bool> release{false};
    std::atomic<bool> gave_up{false};
    std::atomic<std::size_t> pushed{0};
    std::size_t before = 0;
    std::size_t after = 0;
    const std::size_t n = p_.ops;
#pragma omp parallel num_threads(threads_)
#pragma omp single
    {
#pragma omp task depend(inout : counter) shared(holding, release, gave_up, pushed)
      {
        holding.store(true);
        std::size_t seen = 0;
        auto last_progress = std::chrono::steady_clock::now();
        while (!release.load()) {
          const auto now = std::chrono::steady_clock::now();
          if (const std::size_t p = pushed.load(std::memory_order_relaxed); p != seen) {
            seen = p;
            last_progress = now;
          } else if (now - last_progress > std::chrono::seconds(1)) {
            gave_up.store(true);
            break;
          }
          std::this_thread::yield();
        }
      }
      while (!holding.load()) std::this_thread::yield();
      before = CurrentRssBytes();
      for (std::size_t i = 0; i < n; ++i) {
#pragma omp task depend(inout : counter) shared(counter)
        ++counter;
        pushed.store(i + 1, std::memory_order_relaxed);
      }
      after = CurrentRssBytes();
      release.store(true);
#pragma omp taskwait
    }
    if (gave_up.load()) {
      return RunResult::Failed(
          "the pushing thread was made to wait for the held var before all ops were "
          "pending (the runtime throttles task creation), so no figure");
    }
    return FinishPending(CheckCounter("MEM", counter, n), before, after, n);
  }

 private:
  PendingMemoryParams p_;
  int threads_;
};

#ifdef DEPENGINE_PEERS_HAVE_BLAS
class CholeskyOmp : public CholeskyRunner {
 public:
  CholeskyOmp(const CholeskyParams& p, int threads) : CholeskyRunner(p), threads_(threads) {}

 protected:
  double Factor(TileMatrix& a) override {
    TileMatrix* m = &a;
    const int t = params().tiles();
    double seconds = 0;
#pragma omp parallel num_threads(threads_)
#pragma omp single
    {
      Stopwatch watch;
      ForEachTileTask(t, [m, t](const TileTask& task) {
        // Only named in depend(): GCC 12 would call them unused.
        [[maybe_unused]] double* w = m->Tile(task.i, task.j);
        // A hint, honoured up to OMP_MAX_TASK_PRIORITY (depengine-peers sets it).
        [[maybe_unused]] const int prio = task.Priority(t);
        switch (task.op) {
          case TileOp::kPotrf:
#pragma omp task depend(inout : w[0]) priority(prio) firstprivate(m, task)
            RunTileTask(*m, task);
            break;
          case TileOp::kTrsm: {
            [[maybe_unused]] const double* akk = m->Tile(task.k, task.k);
#pragma omp task depend(in : akk[0]) depend(inout : w[0]) priority(prio) firstprivate(m, task)
            RunTileTask(*m, task);
            break;
          }
          case TileOp::kSyrk: {
            [[maybe_unused]] const double* aik = m->Tile(task.i, task.k);
#pragma omp task depend(in : aik[0]) depend(inout : w[0]) priority(prio) firstprivate(m, task)
            RunTileTask(*m, task);
            break;
          }
          case TileOp::kGemm: {
            [[maybe_unused]] const double* aik = m->Tile(task.i, task.k);
            [[maybe_unused]] const double* ajk = m->Tile(task.j, task.k);
#pragma omp task depend(in : aik[0], ajk[0]) depend(inout : w[0]) priority(prio) \
    firstprivate(m, task)
            RunTileTask(*m, task);
            break;
          }
        }
      });
#pragma omp taskwait
      seconds = watch.Seconds();
    }
    return seconds;
  }

 private:
  int threads_;
};
#endif

class OmpPeer : public Peer {
 public:
  explicit OmpPeer(const PeerOptions& options) : threads_(options.threads) {}

  std::vector<std::pair<std::string, std::string>> Describe() const override {
#if defined(__clang__)
    const std::string engine = "omp-clang";
    std::string runtime = "LLVM libomp, clang " __clang_version__;
    while (!runtime.empty() && runtime.back() == ' ') runtime.pop_back();
#else
    const std::string engine = "omp-gcc";
    std::string runtime = "libgomp, GCC " __VERSION__;
#endif
    return {{"engine", engine},
            {"runtime", runtime + ", OpenMP " + std::to_string(_OPENMP)},
            {"detail",
             "task depend(in/out/inout); parallel num_threads(" + std::to_string(threads_) +
                 ") + single: the pushing thread is one of the team; W6 with priority() up to " +
                 std::to_string(omp_get_max_task_priority())}};
  }

  std::unique_ptr<Runner> MakeRunner(const Job& job, std::string* why) override {
    if (!ValidJob(job, why)) return nullptr;
    const std::string& w = job.workload;
    if (w == "W1") return std::make_unique<ChainOmp>(ChainFromJob(job), threads_);
    if (w == "W2") {
      const ParallelParams p = ParallelFromJob(job);
      return std::make_unique<RoundRobinOmp>("W2", p.vars, p.ops, threads_);
    }
    if (w == "W3") return std::make_unique<FanOmp>(FanFromJob(job), threads_);
    if (w == "W4") return std::make_unique<DagOmp>(DagFromJob(job), threads_);
    if (w == "W5") {
      const OperatorReuseParams p = ReuseFromJob(job);
      return std::make_unique<RoundRobinOmp>("W5", p.operators, p.pushes, threads_);
    }
    if (w == "MEM") return std::make_unique<PendingOmp>(PendingFromJob(job), threads_);
#ifdef DEPENGINE_PEERS_HAVE_BLAS
    if (w == "W6") {
      CholeskyParams p;
      if (!CholeskyParams::FromJob(job, &p, why)) return nullptr;
      return std::make_unique<CholeskyOmp>(p, threads_);
    }
#endif
    *why = "no implementation of " + w;
    return nullptr;
  }

 private:
  int threads_;
};

std::unique_ptr<Peer> MakeOmpPeer(const PeerOptions& options) { return std::make_unique<OmpPeer>(options); }

}  // namespace
}  // namespace depengine::bench::peers

int main(int argc, char** argv) {
  return depengine::bench::peers::PeerMain(argc, argv, depengine::bench::peers::MakeOmpPeer);
}
