// peers-tbb: W1-W6 with oneTBB. oneTBB has no read/write tracking, so each
// push goes through TbbTaskGraph (tbb_task_graph.h): a per-var tracker that
// turns it into edges, and a tbb::task_group that runs each function when
// its predecessors are done. The tracker is inside the timed region; the
// region ends when task_group::wait returns. tbb::global_control caps the
// threads at P: the pushing thread plus P - 1 workers, the pushing thread
// joining them in wait() (oneTBB's default on a P-core machine).
//   peers-tbb W4 ops=20000 T=1
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_group.h>
#include <oneapi/tbb/version.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "peer_server.h"
#include "peer_workloads.h"
#include "tbb_task_graph.h"
#include "workloads/memory.h"
#include "workloads/workload_spec.h"
#ifdef DEPENGINE_PEERS_HAVE_BLAS
#include "tile_cholesky.h"
#endif

namespace depengine::bench::peers {
namespace {

using Var = TbbTaskGraph::Var;

// The vars of one run, forgotten by the tracker when the run ends.
class Vars {
 public:
  explicit Vars(std::size_t n) : vars_(n) {}
  ~Vars() {
    for (Var& v : vars_) TbbTaskGraph::Forget(v);
  }
  Var* operator[](std::size_t i) { return &vars_[i]; }

 private:
  std::vector<Var> vars_;
};

// W1 (vars = 1), W2, W5: `ops` increments round robin over `vars` vars. W5's
// "operator" k is a function object built once; each push is one task.
class RoundRobinTbb : public Runner {
 public:
  RoundRobinTbb(const char* name, std::size_t vars, std::size_t ops) : name_(name), vars_(vars), ops_(ops) {}
  RunResult Run() override {
    CounterArray count(vars_, 0);
    std::uint64_t* c = count.data();
    double seconds = 0;
    {
      Vars vars(vars_);
      tbb::task_group group;
      TbbTaskGraph graph(group);
      Stopwatch watch;
      for (std::size_t i = 0, v = 0; i < ops_; ++i) {
        graph.Push([c, v] { ++c[v]; }, {}, {vars[v]});
        if (++v == vars_) v = 0;
      }
      group.wait();
      seconds = watch.Seconds();
    }
    const std::string error = vars_ == 1 ? CheckCounter(name_, count[0], ops_) : CheckRoundRobin(name_, count, ops_);
    return Finish(error, seconds, static_cast<double>(ops_));
  }

 private:
  const char* name_;
  std::size_t vars_, ops_;
};

// The closures below capture a pointer to the run's state and an index, 16
// bytes, which std::function stores without allocating (as depengine's
// workloads do).
struct FanState {
  std::uint64_t x = 0;
  std::uint64_t* y = nullptr;
  std::size_t fan = 0;
};

class FanTbb : public Runner {
 public:
  explicit FanTbb(const FanParams& p) : p_(p), expected_(SerialFan(p)) {}
  RunResult Run() override {
    std::vector<std::uint64_t> ys(p_.fan, 0);
    FanState state{0, ys.data(), p_.fan};
    FanState* st = &state;
    const std::size_t fan = p_.fan;
    double seconds = 0;
    {
      Vars vars(fan + 1);  // Y[0..fan), then X
      std::vector<Var*> y_vars(fan);
      for (std::size_t j = 0; j < fan; ++j) y_vars[j] = vars[j];
      Var* x_var = vars[fan];
      tbb::task_group group;
      TbbTaskGraph graph(group);
      Stopwatch watch;
      for (std::size_t r = 0; r < p_.rounds; ++r) {
        graph.Push([st] { FanBump(st->x); }, {}, {x_var});
        for (std::size_t j = 0; j < fan; ++j) {
          graph.Push([st, j] { FanSpread(st->x, j, st->y[j]); }, {x_var}, {y_vars[j]});
        }
        graph.Push([st] { st->x = FanGather(st->y, st->fan); }, y_vars.data(), fan, &x_var, 1);
      }
      group.wait();
      seconds = watch.Seconds();
    }
    return Finish(CheckFan(state.x, ys, expected_), seconds, static_cast<double>(p_.ops()));
  }

 private:
  FanParams p_;
  FanValues expected_;
};

struct DagState {
  const DagOp* ops;
  std::uint64_t* values;
  int spin_us;
};

class DagTbb : public Runner {
 public:
  DagTbb(const RandomDagParams& p, int threads) : d_(p), threads_(threads) {}
  RunResult Run() override {
    std::vector<std::uint64_t> values(d_.dag.vars);
    for (std::size_t v = 0; v < values.size(); ++v) values[v] = DagInitialValue(v);
    DagState state{d_.dag.ops.data(), values.data(), d_.params.spin_us};
    const DagState* st = &state;
    double seconds = 0;
    {
      Vars vars(d_.dag.vars);
      tbb::task_group group;
      TbbTaskGraph graph(group);
      Stopwatch watch;
      for (std::size_t i = 0; i < d_.dag.ops.size(); ++i) {
        const DagOp& o = d_.dag.ops[i];
        graph.Push(
            [st, i] {
              const DagOp& op = st->ops[i];
              SpinFor(st->spin_us);
              st->values[op.write] = DagMix(st->values[op.write], st->values[op.read1], st->values[op.read2]);
            },
            {vars[o.read1], vars[o.read2]}, {vars[o.write]});
      }
      group.wait();
      seconds = watch.Seconds();
    }
    RunResult r = Finish(CheckDag(values, d_.expected), seconds, static_cast<double>(d_.dag.ops.size()));
    if (r.ok) AddDagFigures(r, d_, threads_);
    return r;
  }

 private:
  PreparedDag d_;
  int threads_;
};

class PendingTbb : public Runner {
 public:
  explicit PendingTbb(const PendingMemoryParams& p) : p_(p) {}
  RunResult Run() override {
    std::uint64_t counter = 0;
    std::uint64_t* c = &counter;
    std::atomic<bool> holding{false};
    std::atomic<bool> release{false};
    std::size_t before = 0;
    std::size_t after = 0;
    {
      Vars vars(1);
      tbb::task_group group;
      TbbTaskGraph graph(group);
      graph.Push(
          [&holding, &release] {
            holding.store(true);
            while (!release.load()) std::this_thread::yield();
          },
          {}, {vars[0]});
      while (!holding.load()) std::this_thread::yield();
      before = CurrentRssBytes();
      for (std::size_t i = 0; i < p_.ops; ++i) graph.Push([c] { ++*c; }, {}, {vars[0]});
      after = CurrentRssBytes();
      release.store(true);
      group.wait();
    }
    return FinishPending(CheckCounter("MEM", counter, p_.ops), before, after, p_.ops);
  }

 private:
  PendingMemoryParams p_;
};

#ifdef DEPENGINE_PEERS_HAVE_BLAS
class CholeskyTbb : public CholeskyRunner {
 public:
  explicit CholeskyTbb(const CholeskyParams& p) : CholeskyRunner(p) {}

 protected:
  double Factor(TileMatrix& a) override {
    const int t = params().tiles();
    TileMatrix* m = &a;
    double seconds = 0;
    {
      Vars vars(static_cast<std::size_t>(t) * t);
      auto var = [&](TileRef r) { return vars[static_cast<std::size_t>(r.i) * t + r.j]; };
      tbb::task_group group;
      TbbTaskGraph graph(group);
      Stopwatch watch;
      ForEachTileTask(t, [&](const TileTask& task) {
        TileRef in[2];
        const int n = task.Reads(in);
        Var* reads[2] = {n > 0 ? var(in[0]) : nullptr, n > 1 ? var(in[1]) : nullptr};
        Var* write = var(task.Writes());
        graph.Push([m, task] { RunTileTask(*m, task); }, reads, static_cast<std::size_t>(n), &write, 1);
      });
      group.wait();
      seconds = watch.Seconds();
    }
    return seconds;
  }
};
#endif

class TbbPeer : public Peer {
 public:
  explicit TbbPeer(const PeerOptions& options)
      : threads_(options.threads),
        limit_(tbb::global_control::max_allowed_parallelism, static_cast<std::size_t>(options.threads)) {}

  std::vector<std::pair<std::string, std::string>> Describe() const override {
    return {{"engine", "tbb"},
            {"runtime", std::string("oneTBB ") + TBB_runtime_version()},
            {"detail", "per-var tracker (last writer, readers since) + task_group, " + std::to_string(threads_) +
                           " threads including the pushing thread"}};
  }

  std::unique_ptr<Runner> MakeRunner(const Job& job, std::string* why) override {
    if (!ValidJob(job, why)) return nullptr;
    const std::string& w = job.workload;
    if (w == "W1") return std::make_unique<RoundRobinTbb>("W1", 1, ChainFromJob(job).ops);
    if (w == "W2") {
      const ParallelParams p = ParallelFromJob(job);
      return std::make_unique<RoundRobinTbb>("W2", p.vars, p.ops);
    }
    if (w == "W3") return std::make_unique<FanTbb>(FanFromJob(job));
    if (w == "W4") return std::make_unique<DagTbb>(DagFromJob(job), threads_);
    if (w == "W5") {
      const OperatorReuseParams p = ReuseFromJob(job);
      return std::make_unique<RoundRobinTbb>("W5", p.operators, p.pushes);
    }
    if (w == "MEM") return std::make_unique<PendingTbb>(PendingFromJob(job));
#ifdef DEPENGINE_PEERS_HAVE_BLAS
    if (w == "W6") {
      CholeskyParams p;
      if (!CholeskyParams::FromJob(job, &p, why)) return nullptr;
      return std::make_unique<CholeskyTbb>(p);
    }
#endif
    *why = "no implementation of " + w;
    return nullptr;
  }

 private:
  int threads_;
  tbb::global_control limit_;
};

std::unique_ptr<Peer> MakeTbbPeer(const PeerOptions& options) { return std::make_unique<TbbPeer>(options); }

}  // namespace
}  // namespace depengine::bench::peers

int main(int argc, char** argv) {
  return depengine::bench::peers::PeerMain(argc, argv, depengine::bench::peers::MakeTbbPeer);
}
