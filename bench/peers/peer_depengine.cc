// peers-depengine: depengine's side of the comparison. W1-W5 and MEM run
// through depengine_workloads (the same code as depengine-bench); W6, tiled
// Cholesky, is here: one var per tile, one PushSync per tile task.
//   peers-depengine --kind=perdevice W1 ops=10000
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "depengine/engine.h"
#include "peer_server.h"
#include "peer_workloads.h"
#include "workloads/workloads.h"
#ifdef DEPENGINE_PEERS_HAVE_BLAS
#include "tile_cholesky.h"
#endif

namespace depengine::bench::peers {
namespace {

RunResult FromWorkload(const WorkloadResult& w) {
  if (!w.ok) return RunResult::Failed(w.check_error);
  RunResult r;
  r.ok = true;
  r.seconds = w.seconds;
  r.ops = static_cast<double>(w.ops);
  return r;
}

// W1, W2, W3, W5 and MEM: one call into depengine_workloads per run.
template <class Params, class Fn>
class LibraryRunner : public Runner {
 public:
  LibraryRunner(Engine& engine, Params params, Fn fn) : engine_(engine), params_(params), fn_(fn) {}
  RunResult Run() override { return FromWorkload(fn_(engine_, params_)); }

 private:
  Engine& engine_;
  Params params_;
  Fn fn_;
};

template <class Params, class Fn>
std::unique_ptr<Runner> Library(Engine& engine, Params params, Fn fn) {
  return std::make_unique<LibraryRunner<Params, Fn>>(engine, params, fn);
}

class DagRunner : public Runner {
 public:
  DagRunner(Engine& engine, const RandomDagParams& params, int threads)
      : engine_(engine), dag_(params), threads_(threads) {}
  RunResult Run() override {
    RunResult r = FromWorkload(RunRandomDag(engine_, dag_.dag, dag_.params.spin_us, dag_.expected));
    if (r.ok) AddDagFigures(r, dag_, threads_);
    return r;
  }

 private:
  Engine& engine_;
  PreparedDag dag_;
  int threads_;
};

class PendingRunner : public Runner {
 public:
  PendingRunner(Engine& engine, const PendingMemoryParams& params) : engine_(engine), params_(params) {}
  RunResult Run() override {
    const PendingMemoryResult m = MeasurePendingOpMemory(engine_, params_);
    if (!m.ok) return RunResult::Failed(m.check_error);
    RunResult r;
    r.ok = true;
    r.ops = static_cast<double>(m.ops);
    r.Add("rss_growth", static_cast<double>(m.rss_growth_bytes));
    r.Add("bytes_per_op", m.BytesPerOp());
    return r;
  }

 private:
  Engine& engine_;
  PendingMemoryParams params_;
};

#ifdef DEPENGINE_PEERS_HAVE_BLAS
// W6: every lower tile is one var, made once per process.
class CholeskyOnEngine : public CholeskyRunner {
 public:
  CholeskyOnEngine(Engine& engine, const CholeskyParams& params) : CholeskyRunner(params), engine_(engine) {
    const int t = params.tiles();
    vars_.resize(static_cast<std::size_t>(t) * t, nullptr);
    for (int i = 0; i < t; ++i) {
      for (int j = 0; j <= i; ++j) vars_[static_cast<std::size_t>(i) * t + j] = engine_.NewVariable();
    }
  }
  ~CholeskyOnEngine() override {
    for (VarHandle v : vars_) {
      if (v != nullptr) engine_.DeleteVariable([](RunContext) {}, Context::CPU(), v);
    }
    engine_.WaitForAll();
  }

 protected:
  double Factor(TileMatrix& a) override {
    const int t = params().tiles();
    std::vector<VarHandle> reads;
    std::vector<VarHandle> writes(1);
    TileMatrix* m = &a;
    Stopwatch watch;
    ForEachTileTask(t, [&](const TileTask& task) {
      TileRef in[2];
      const int n = task.Reads(in);
      reads.resize(n);
      for (int r = 0; r < n; ++r) reads[r] = vars_[static_cast<std::size_t>(in[r].i) * t + in[r].j];
      writes[0] = vars_[static_cast<std::size_t>(task.i) * t + task.j];
      engine_.PushSync([m, task](RunContext) { RunTileTask(*m, task); }, Context::CPU(), reads,
                       writes, FnProperty::kNormal, task.Priority(t));
    });
    engine_.WaitForAll();
    return watch.Seconds();
  }

 private:
  Engine& engine_;
  std::vector<VarHandle> vars_;
};
#endif

class DepenginePeer : public Peer {
 public:
  explicit DepenginePeer(const PeerOptions& options) : threads_(options.threads) {
    EngineOptions eo;
    eo.cpu_worker_threads = threads_;
    kind_name_ = options.kind.empty() ? "perdevice" : options.kind;
    if (kind_name_ == "naive") {
      eo.kind = EngineKind::kNaive;
    } else if (kind_name_ == "pooled") {
      eo.kind = EngineKind::kPooled;
    } else if (kind_name_ == "perdevice") {
      eo.kind = EngineKind::kPerDevice;
    } else {
      throw std::invalid_argument("--kind must be naive, pooled or perdevice, not " + kind_name_);
    }
    kind_ = eo.kind;
    engine_ = CreateEngine(eo);
  }

  std::vector<std::pair<std::string, std::string>> Describe() const override {
    return {{"engine", "depengine-" + kind_name_},
            {"runtime", std::string("depengine ") + EngineKindName(kind_)},
            {"detail", kind_ == EngineKind::kNaive
                           ? "NaiveEngine: every function inline on the pushing thread"
                           : "PushSync per function (W5: NewOperator + Push), " +
                                 std::to_string(threads_) + " CPU workers + the pushing thread"}};
  }

  std::unique_ptr<Runner> MakeRunner(const Job& job, std::string* why) override {
    if (!ValidJob(job, why)) return nullptr;
    Engine& e = *engine_;
    const std::string& w = job.workload;
    if (w == "W1") {
      return Library(e, ChainFromJob(job), [](Engine& en, const ChainParams& p) { return RunChain(en, p); });
    }
    if (w == "W2") {
      return Library(e, ParallelFromJob(job),
                     [](Engine& en, const ParallelParams& p) { return RunParallel(en, p); });
    }
    if (w == "W3") {
      return Library(e, FanFromJob(job), [](Engine& en, const FanParams& p) { return RunFan(en, p); });
    }
    if (w == "W4") return std::make_unique<DagRunner>(e, DagFromJob(job), threads_);
    if (w == "W5") {
      return Library(e, ReuseFromJob(job),
                     [](Engine& en, const OperatorReuseParams& p) { return RunOperatorReuse(en, p); });
    }
    if (w == "MEM") return std::make_unique<PendingRunner>(e, PendingFromJob(job));
#ifdef DEPENGINE_PEERS_HAVE_BLAS
    if (w == "W6") {
      CholeskyParams p;
      if (!CholeskyParams::FromJob(job, &p, why)) return nullptr;
      return std::make_unique<CholeskyOnEngine>(e, p);
    }
#endif
    *why = "no implementation of " + w;
    return nullptr;
  }

 private:
  int threads_;
  std::string kind_name_;
  EngineKind kind_ = EngineKind::kPerDevice;
  std::unique_ptr<Engine> engine_;
};

std::unique_ptr<Peer> MakeDepenginePeer(const PeerOptions& options) {
  return std::make_unique<DepenginePeer>(options);
}

}  // namespace
}  // namespace depengine::bench::peers

int main(int argc, char** argv) {
  return depengine::bench::peers::PeerMain(argc, argv, depengine::bench::peers::MakeDepenginePeer);
}
