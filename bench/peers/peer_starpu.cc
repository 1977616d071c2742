// peers-starpu: W1-W6 with StarPU. Every var is a registered data handle
// (starpu_variable_data_register; W6: starpu_matrix_data_register per tile),
// every function a task inserted with starpu_task_insert and its handles'
// access modes STARPU_R / STARPU_W / STARPU_RW, under StarPU's default
// sequential consistency: StarPU infers the dependencies itself. A codelet
// is built once per kind of function (W5: the prebuilt operator is the
// codelet; each push is a task).
//
// Handles are registered before the timed region and unregistered after it
// (registration is what a program does once, up front). The timed region
// ends when starpu_task_wait_for_all returns. The scheduler is StarPU's
// default unless STARPU_SCHED names one; the ready line prints it.
//   peers-starpu W2 ops=40960
#include <starpu.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
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

std::uint64_t* Var(void* buffer) {
  return reinterpret_cast<std::uint64_t*>(STARPU_VARIABLE_GET_PTR(buffer));
}

// ---------------------------------------------------------------- codelets

// W1, W2, W5, MEM: ++var.
void IncrementCpu(void* buffers[], void*) { ++*Var(buffers[0]); }

// W3: X = X + 1 | Y[j] = X + j (j in cl_arg) | X = sum(Y) (Y first, X last).
void FanBumpCpu(void* buffers[], void*) { FanBump(*Var(buffers[0])); }
void FanSpreadCpu(void* buffers[], void* arg) {
  FanSpread(*Var(buffers[0]), *static_cast<const std::size_t*>(arg), *Var(buffers[1]));
}
void FanGatherCpu(void* buffers[], void*) {
  const unsigned fan = STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) - 1;
  std::uint64_t sum = 0;
  for (unsigned j = 0; j < fan; ++j) sum = (sum + *Var(buffers[j]) % kFanModulus) % kFanModulus;
  *Var(buffers[fan]) = sum;
}

// W4: spin T, then w = mix(w, r1, r2); buffers r1, r2, w.
int g_dag_spin_us = 0;  // set before each W4 run, read by the tasks
void DagCpu(void* buffers[], void*) {
  SpinFor(g_dag_spin_us);
  std::uint64_t& w = *Var(buffers[2]);
  w = DagMix(w, *Var(buffers[0]), *Var(buffers[1]));
}

// MEM's holder: keeps its var until released, or until the pusher has made
// no progress for a second (then the run reports that, not a figure).
struct HoldState {
  std::atomic<bool> holding{false};
  std::atomic<bool> release{false};
  std::atomic<bool> gave_up{false};
  std::atomic<std::size_t> pushed{0};
};
void HoldCpu(void*[], void* arg) {
  auto* s = static_cast<HoldState*>(arg);
  s->holding.store(true);
  std::size_t seen = 0;
  auto last_progress = std::chrono::steady_clock::now();
  while (!s->release.load()) {
    const auto now = std::chrono::steady_clock::now();
    if (const std::size_t p = s->pushed.load(std::memory_order_relaxed); p != seen) {
      seen = p;
      last_progress = now;
    } else if (now - last_progress > std::chrono::seconds(1)) {
      s->gave_up.store(true);
      return;
    }
    std::this_thread::yield();
  }
}

#ifdef DEPENGINE_PEERS_HAVE_BLAS
double* Tile(void* buffer) { return reinterpret_cast<double*>(STARPU_MATRIX_GET_PTR(buffer)); }
int TileSize(void* buffer) { return static_cast<int>(STARPU_MATRIX_GET_NX(buffer)); }
void PotrfCpu(void* b[], void*) { KernelPotrf(Tile(b[0]), TileSize(b[0])); }
void TrsmCpu(void* b[], void*) { KernelTrsm(Tile(b[0]), Tile(b[1]), TileSize(b[0])); }
void SyrkCpu(void* b[], void*) { KernelSyrk(Tile(b[0]), Tile(b[1]), TileSize(b[0])); }
void GemmCpu(void* b[], void*) { KernelGemm(Tile(b[0]), Tile(b[1]), Tile(b[2]), TileSize(b[0])); }
#endif

struct starpu_codelet MakeCodelet(const char* name, starpu_cpu_func_t fn,
                                  std::initializer_list<starpu_data_access_mode> modes) {
  struct starpu_codelet cl;
  starpu_codelet_init(&cl);
  cl.where = STARPU_CPU;
  cl.cpu_funcs[0] = fn;
  cl.name = name;
  if (modes.size() == 0) {
    cl.nbuffers = STARPU_VARIABLE_NBUFFERS;
  } else {
    cl.nbuffers = static_cast<int>(modes.size());
    int i = 0;
    for (starpu_data_access_mode m : modes) cl.modes[i++] = m;
  }
  return cl;
}

// Built once per process.
struct Codelets {
  struct starpu_codelet increment = MakeCodelet("increment", IncrementCpu, {STARPU_RW});
  struct starpu_codelet fan_bump = MakeCodelet("fan_bump", FanBumpCpu, {STARPU_RW});
  struct starpu_codelet fan_spread = MakeCodelet("fan_spread", FanSpreadCpu, {STARPU_R, STARPU_W});
  struct starpu_codelet fan_gather = MakeCodelet("fan_gather", FanGatherCpu, {});  // modes per task
  struct starpu_codelet dag = MakeCodelet("dag", DagCpu, {STARPU_R, STARPU_R, STARPU_RW});
  struct starpu_codelet hold = MakeCodelet("hold", HoldCpu, {STARPU_RW});
#ifdef DEPENGINE_PEERS_HAVE_BLAS
  struct starpu_codelet potrf = MakeCodelet("potrf", PotrfCpu, {STARPU_RW});
  struct starpu_codelet trsm = MakeCodelet("trsm", TrsmCpu, {STARPU_R, STARPU_RW});
  struct starpu_codelet syrk = MakeCodelet("syrk", SyrkCpu, {STARPU_R, STARPU_RW});
  struct starpu_codelet gemm = MakeCodelet("gemm", GemmCpu, {STARPU_R, STARPU_R, STARPU_RW});
#endif
};

void Check(int rc, const char* what) {
  if (rc != 0) throw std::runtime_error(std::string(what) + " failed: " + std::to_string(rc));
}

// Registered handles for an array of 64-bit vars, unregistered on scope exit.
class VarHandles {
 public:
  // Any vector of 64-bit values (a CounterArray, or a plain std::vector).
  template <class Values>
  explicit VarHandles(Values& values) : handles_(values.size()) {
    for (std::size_t i = 0; i < values.size(); ++i) {
      starpu_variable_data_register(&handles_[i], STARPU_MAIN_RAM, reinterpret_cast<uintptr_t>(&values[i]),
                                    sizeof(std::uint64_t));
    }
  }
  ~VarHandles() {
    for (starpu_data_handle_t h : handles_) starpu_data_unregister(h);
  }
  starpu_data_handle_t operator[](std::size_t i) const { return handles_[i]; }

 private:
  std::vector<starpu_data_handle_t> handles_;
};

// W1 (vars = 1), W2, W5: `ops` increments round robin over `vars` handles.
class RoundRobinStarpu : public Runner {
 public:
  RoundRobinStarpu(Codelets& c, const char* name, std::size_t vars, std::size_t ops)
      : c_(c), name_(name), vars_(vars), ops_(ops) {}
  RunResult Run() override {
    CounterArray count(vars_, 0);
    double seconds = 0;
    {
      VarHandles h(count);
      Stopwatch watch;
      for (std::size_t i = 0, v = 0; i < ops_; ++i) {
        Check(starpu_task_insert(&c_.increment, STARPU_RW, h[v], 0), "starpu_task_insert");
        if (++v == vars_) v = 0;
      }
      starpu_task_wait_for_all();
      seconds = watch.Seconds();
    }
    const std::string error = vars_ == 1 ? CheckCounter(name_, count[0], ops_) : CheckRoundRobin(name_, count, ops_);
    return Finish(error, seconds, static_cast<double>(ops_));
  }

 private:
  Codelets& c_;
  const char* name_;
  std::size_t vars_, ops_;
};

class FanStarpu : public Runner {
 public:
  FanStarpu(Codelets& c, const FanParams& p) : c_(c), p_(p), expected_(SerialFan(p)), index_(p.fan) {
    for (std::size_t j = 0; j < p.fan; ++j) index_[j] = j;
  }
  RunResult Run() override {
    std::vector<std::uint64_t> xv(1, 0);
    std::vector<std::uint64_t> ys(p_.fan, 0);
    double seconds = 0;
    {
      VarHandles x(xv);
      VarHandles y(ys);
      std::vector<starpu_data_descr> gather(p_.fan + 1);
      for (std::size_t j = 0; j < p_.fan; ++j) gather[j] = {y[j], STARPU_R};
      gather[p_.fan] = {x[0], STARPU_RW};
      const int ngather = static_cast<int>(gather.size());
      Stopwatch watch;
      for (std::size_t r = 0; r < p_.rounds; ++r) {
        Check(starpu_task_insert(&c_.fan_bump, STARPU_RW, x[0], 0), "starpu_task_insert");
        for (std::size_t j = 0; j < p_.fan; ++j) {
          Check(starpu_task_insert(&c_.fan_spread, STARPU_R, x[0], STARPU_W, y[j], STARPU_CL_ARGS_NFREE,
                                   &index_[j], sizeof(std::size_t), 0),
                "starpu_task_insert");
        }
        Check(starpu_task_insert(&c_.fan_gather, STARPU_DATA_MODE_ARRAY, gather.data(), ngather, 0),
              "starpu_task_insert");
      }
      starpu_task_wait_for_all();
      seconds = watch.Seconds();
    }
    return Finish(CheckFan(xv[0], ys, expected_), seconds, static_cast<double>(p_.ops()));
  }

 private:
  Codelets& c_;
  FanParams p_;
  FanValues expected_;
  std::vector<std::size_t> index_;  // cl_arg of the Y[j] tasks
};

class DagStarpu : public Runner {
 public:
  DagStarpu(Codelets& c, const RandomDagParams& p, int threads) : c_(c), d_(p), threads_(threads) {}
  RunResult Run() override {
    std::vector<std::uint64_t> values(d_.dag.vars);
    for (std::size_t v = 0; v < values.size(); ++v) values[v] = DagInitialValue(v);
    g_dag_spin_us = d_.params.spin_us;
    double seconds = 0;
    {
      VarHandles h(values);
      Stopwatch watch;
      for (const DagOp& o : d_.dag.ops) {
        Check(starpu_task_insert(&c_.dag, STARPU_R, h[o.read1], STARPU_R, h[o.read2], STARPU_RW, h[o.write], 0),
              "starpu_task_insert");
      }
      starpu_task_wait_for_all();
      seconds = watch.Seconds();
    }
    RunResult r = Finish(CheckDag(values, d_.expected), seconds, static_cast<double>(d_.dag.ops.size()));
    if (r.ok) AddDagFigures(r, d_, threads_);
    return r;
  }

 private:
  Codelets& c_;
  PreparedDag d_;
  int threads_;
};

class PendingStarpu : public Runner {
 public:
  PendingStarpu(Codelets& c, const PendingMemoryParams& p) : c_(c), p_(p) {}
  RunResult Run() override {
    CounterArray counter(1, 0);
    HoldState hold;
    std::size_t before = 0;
    std::size_t after = 0;
    {
      VarHandles h(counter);
      Check(starpu_task_insert(&c_.hold, STARPU_RW, h[0], STARPU_CL_ARGS_NFREE, &hold, sizeof hold, 0),
            "starpu_task_insert");
      while (!hold.holding.load()) std::this_thread::yield();
      before = CurrentRssBytes();
      for (std::size_t i = 0; i < p_.ops; ++i) {
        Check(starpu_task_insert(&c_.increment, STARPU_RW, h[0], 0), "starpu_task_insert");
        hold.pushed.store(i + 1, std::memory_order_relaxed);
      }
      after = CurrentRssBytes();
      hold.release.store(true);
      starpu_task_wait_for_all();
    }
    if (hold.gave_up.load()) {
      return RunResult::Failed("the pushing thread was made to wait for the held var, so no figure");
    }
    return FinishPending(CheckCounter("MEM", counter[0], p_.ops), before, after, p_.ops);
  }

 private:
  Codelets& c_;
  PendingMemoryParams p_;
};

#ifdef DEPENGINE_PEERS_HAVE_BLAS
class CholeskyStarpu : public CholeskyRunner {
 public:
  CholeskyStarpu(Codelets& c, const CholeskyParams& p) : CholeskyRunner(p), c_(c) {}

 protected:
  double Factor(TileMatrix& a) override {
    const int t = params().tiles();
    const int b = params().b;
    std::vector<starpu_data_handle_t> h(static_cast<std::size_t>(t) * t, nullptr);
    auto handle = [&](int i, int j) { return h[static_cast<std::size_t>(i) * t + j]; };
    for (int i = 0; i < t; ++i) {
      for (int j = 0; j <= i; ++j) {
        starpu_matrix_data_register(&h[static_cast<std::size_t>(i) * t + j], STARPU_MAIN_RAM,
                                    reinterpret_cast<uintptr_t>(a.Tile(i, j)), b, b, b, sizeof(double));
      }
    }
    Stopwatch watch;
    // The scheduler's priority range bounds the shared heuristic.
    const int min_prio = starpu_sched_get_min_priority();
    const int max_prio = starpu_sched_get_max_priority();
    ForEachTileTask(t, [&](const TileTask& task) {
      const int prio = std::clamp(task.Priority(t), min_prio, max_prio);
      int rc = 0;
      switch (task.op) {
        case TileOp::kPotrf:
          rc = starpu_task_insert(&c_.potrf, STARPU_PRIORITY, prio, STARPU_RW, handle(task.k, task.k),
                                  0);
          break;
        case TileOp::kTrsm:
          rc = starpu_task_insert(&c_.trsm, STARPU_PRIORITY, prio, STARPU_R, handle(task.k, task.k),
                                  STARPU_RW, handle(task.i, task.k), 0);
          break;
        case TileOp::kSyrk:
          rc = starpu_task_insert(&c_.syrk, STARPU_PRIORITY, prio, STARPU_R, handle(task.i, task.k),
                                  STARPU_RW, handle(task.i, task.i), 0);
          break;
        case TileOp::kGemm:
          rc = starpu_task_insert(&c_.gemm, STARPU_PRIORITY, prio, STARPU_R, handle(task.i, task.k),
                                  STARPU_R, handle(task.j, task.k), STARPU_RW, handle(task.i, task.j), 0);
          break;
      }
      Check(rc, "starpu_task_insert");
    });
    starpu_task_wait_for_all();
    const double seconds = watch.Seconds();
    for (starpu_data_handle_t x : h) {
      if (x != nullptr) starpu_data_unregister(x);
    }
    return seconds;
  }

 private:
  Codelets& c_;
};
#endif

class StarpuPeer : public Peer {
 public:
  explicit StarpuPeer(const PeerOptions& options) : threads_(options.threads) {
    struct starpu_conf conf;
    starpu_conf_init(&conf);
    conf.ncpus = threads_;
    conf.ncuda = 0;
    conf.nopencl = 0;
    Check(starpu_init(&conf), "starpu_init");
    codelets_ = std::make_unique<Codelets>();
  }
  ~StarpuPeer() override {
    codelets_.reset();
    starpu_shutdown();
  }

  std::vector<std::pair<std::string, std::string>> Describe() const override {
    struct starpu_sched_policy* policy = starpu_sched_ctx_get_sched_policy(0);
    const std::string sched = policy != nullptr && policy->policy_name != nullptr ? policy->policy_name : "?";
    return {{"engine", "starpu"},
            {"runtime", "StarPU " + std::to_string(STARPU_MAJOR_VERSION) + "." +
                            std::to_string(STARPU_MINOR_VERSION) + "." + std::to_string(STARPU_RELEASE_VERSION) +
                            ", scheduler " + sched},
            {"scheduler", sched},
            {"detail", "starpu_task_insert with STARPU_R/W/RW on registered handles, sequential consistency; W6 with "
                       "STARPU_PRIORITY (scheduler's range " + std::to_string(starpu_sched_get_min_priority()) + ".." +
                           std::to_string(starpu_sched_get_max_priority()) + "); " +
                           std::to_string(starpu_cpu_worker_get_count()) + " CPU workers + the pushing thread"}};
  }

  std::unique_ptr<Runner> MakeRunner(const Job& job, std::string* why) override {
    if (!ValidJob(job, why)) return nullptr;
    Codelets& c = *codelets_;
    const std::string& w = job.workload;
    if (w == "W1") return std::make_unique<RoundRobinStarpu>(c, "W1", 1, ChainFromJob(job).ops);
    if (w == "W2") {
      const ParallelParams p = ParallelFromJob(job);
      return std::make_unique<RoundRobinStarpu>(c, "W2", p.vars, p.ops);
    }
    if (w == "W3") return std::make_unique<FanStarpu>(c, FanFromJob(job));
    if (w == "W4") return std::make_unique<DagStarpu>(c, DagFromJob(job), threads_);
    if (w == "W5") {
      const OperatorReuseParams p = ReuseFromJob(job);
      return std::make_unique<RoundRobinStarpu>(c, "W5", p.operators, p.pushes);
    }
    if (w == "MEM") return std::make_unique<PendingStarpu>(c, PendingFromJob(job));
#ifdef DEPENGINE_PEERS_HAVE_BLAS
    if (w == "W6") {
      CholeskyParams p;
      if (!CholeskyParams::FromJob(job, &p, why)) return nullptr;
      return std::make_unique<CholeskyStarpu>(c, p);
    }
#endif
    *why = "no implementation of " + w;
    return nullptr;
  }

 private:
  int threads_;
  std::unique_ptr<Codelets> codelets_;
};

std::unique_ptr<Peer> MakeStarpuPeer(const PeerOptions& options) {
  return std::make_unique<StarpuPeer>(options);
}

}  // namespace
}  // namespace depengine::bench::peers

int main(int argc, char** argv) {
  return depengine::bench::peers::PeerMain(argc, argv, depengine::bench::peers::MakeStarpuPeer);
}
