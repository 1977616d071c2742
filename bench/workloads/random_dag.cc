// W4 random DAG with work: scheduling quality.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "workloads/internal/harness.h"
#include "workloads/workloads.h"

namespace depengine::bench {
void PushRandomDag(Engine& engine, const RandomDag& dag, const std::vector<VarHandle>& vars,
                   const RandomDagState* s) {
  std::vector<VarHandle> reads(2);
  std::vector<VarHandle> writes(1);
  for (std::size_t i = 0; i < dag.ops.size(); ++i) {
    const DagOp& op = dag.ops[i];
    reads[0] = vars[op.read1];
    reads[1] = vars[op.read2];
    writes[0] = vars[op.write];
    engine.PushSync(
        [s, i](RunContext) {
          const DagOp& o = s->ops[i];
          SpinFor(s->spin_us);
          s->values[o.write] = DagMix(s->values[o.write], s->values[o.read1], s->values[o.read2]);
        },
        Context::CPU(), reads, writes);
  }
}

namespace {

void CheckValues(const std::vector<std::uint64_t>& values,
                 const std::vector<std::uint64_t>& expected, WorkloadResult& r) {
  for (std::size_t v = 0; r.ok && v < values.size(); ++v) {
    if (values[v] != expected[v]) {
      internal::Fail(r, "W4: var " + std::to_string(v) + " = " + std::to_string(values[v]) +
                            ", expected " + std::to_string(expected[v]));
    }
  }
}

std::vector<std::uint64_t> InitialValues(const RandomDag& dag) {
  std::vector<std::uint64_t> values(dag.vars);
  for (std::size_t v = 0; v < dag.vars; ++v) values[v] = DagInitialValue(v);
  return values;
}

}  // namespace

WorkloadResult RunRandomDag(Engine& engine, const RandomDag& dag, int spin_us,
                            const std::vector<std::uint64_t>& expected) {
  std::vector<std::uint64_t> values = InitialValues(dag);
  std::vector<VarHandle> vars(dag.vars);
  for (VarHandle& v : vars) v = engine.NewVariable();
  const RandomDagState state{dag.ops.data(), values.data(), spin_us};
  WorkloadResult r = internal::TimePushes(engine, dag.ops.size(),
                                          [&] { PushRandomDag(engine, dag, vars, &state); });
  CheckValues(values, expected, r);
  internal::DeleteVars(engine, vars, r);
  return r;
}

WorkloadResult RunRandomDagPushedAhead(Engine& engine, const RandomDag& dag, int spin_us,
                                       const std::vector<std::uint64_t>& expected) {
  WorkloadResult r;
  r.ops = dag.ops.size();
  std::vector<std::uint64_t> values = InitialValues(dag);
  std::vector<VarHandle> vars(dag.vars);
  for (VarHandle& v : vars) v = engine.NewVariable();
  const RandomDagState state{dag.ops.data(), values.data(), spin_us};

  // The hold: an async function that writes every var and finishes only
  // when this thread calls the callback it left behind. It starts at once
  // (the vars are new); every function pushed after it waits for it.
  std::mutex mu;
  std::condition_variable started;
  std::optional<CallbackOnComplete> release;  // guarded by mu
  try {
    engine.PushAsync(
        [&](RunContext, CallbackOnComplete done) {
          std::lock_guard<std::mutex> lock(mu);
          release = done;
          started.notify_one();
        },
        Context::CPU(), {}, vars, FnProperty::kNormal, 0, "W4 hold");
  } catch (...) {
    internal::Fail(r, internal::CurrentExceptionMessage());
    internal::DeleteVars(engine, vars, r);
    return r;
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    started.wait(lock, [&] { return release.has_value(); });
  }
  try {
    PushRandomDag(engine, dag, vars, &state);
  } catch (...) {
    internal::Fail(r, internal::CurrentExceptionMessage());
  }
  // Nothing may have run yet: the hold is what the timed region starts from.
  if (values != InitialValues(dag))
    internal::Fail(r, "W4 pushed ahead: a function ran before the hold was released");
  const bool pushed = r.check_error.empty();
  try {
    const double cpu_start = ProcessCpuSeconds();
    internal::Stopwatch watch;
    (*release)();
    engine.WaitForAll();
    r.seconds = watch.Seconds();
    r.cpu_seconds = ProcessCpuSeconds() - cpu_start;
    r.ok = pushed;
  } catch (...) {
    internal::Fail(r, internal::CurrentExceptionMessage());
    try {
      engine.WaitForAll();
    } catch (...) {
      // Already reported the first failure.
    }
  }
  CheckValues(values, expected, r);
  internal::DeleteVars(engine, vars, r);
  return r;
}

WorkloadResult RunRandomDag(Engine& engine, const RandomDagParams& params) {
  if (params.vars < 3) {
    WorkloadResult r;
    internal::Fail(r, "W4: needs at least 3 vars");
    return r;
  }
  const RandomDag dag = MakeRandomDag(params);
  WorkloadResult r = RunRandomDag(engine, dag, params.spin_us, SerialRandomDag(dag));
  r.critical_path = DagCriticalPath(dag);
  return r;
}

double RunRandomDagBodiesOnly(const RandomDag& dag, int spin_us, int threads) {
  std::vector<std::uint64_t> values(dag.vars);
  for (std::size_t v = 0; v < dag.vars; ++v) values[v] = DagInitialValue(v);
  // The threads block until all are made, then wake together: a woken
  // thread goes to an idle core, as an engine's sleeping workers do, while
  // threads that spin from their start may share the core they were made on
  // for milliseconds (seen after NaiveEngine's runs: 0.88 instead of 0.98).
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready.fetch_add(1, std::memory_order_release);
      go.wait(false, std::memory_order_acquire);
      // Relaxed atomics: the functions run in no order, so they race on the
      // values; the mix still reads and writes the same lines as W4's.
      auto at = [&](std::uint32_t v) { return std::atomic_ref<std::uint64_t>(values[v]); };
      for (std::size_t i = static_cast<std::size_t>(t); i < dag.ops.size();
           i += static_cast<std::size_t>(threads)) {
        const DagOp& o = dag.ops[i];
        SpinFor(spin_us);
        const std::uint64_t w = DagMix(at(o.write).load(std::memory_order_relaxed),
                                       at(o.read1).load(std::memory_order_relaxed),
                                       at(o.read2).load(std::memory_order_relaxed));
        at(o.write).store(w, std::memory_order_relaxed);
      }
    });
  }
  while (ready.load(std::memory_order_acquire) < threads) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(1));  // let them reach the wait
  const auto start = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  go.notify_all();
  for (std::thread& th : pool) th.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace depengine::bench
