// W4 random DAG with work: scheduling quality.
#include <cstdint>
#include <string>
#include <vector>

#include "workloads/internal/harness.h"
#include "workloads/workloads.h"

namespace depengine::bench {
namespace {

// What W4's functions read and write; each closure holds a pointer to it
// and its function's index.
struct DagState {
  const DagOp* ops;
  std::uint64_t* values;
  int spin_us;
};

}  // namespace

WorkloadResult RunRandomDag(Engine& engine, const RandomDag& dag, int spin_us,
                            const std::vector<std::uint64_t>& expected) {
  std::vector<std::uint64_t> values(dag.vars);
  for (std::size_t v = 0; v < dag.vars; ++v) values[v] = DagInitialValue(v);
  std::vector<VarHandle> vars(dag.vars);
  for (VarHandle& v : vars) v = engine.NewVariable();
  DagState state{dag.ops.data(), values.data(), spin_us};

  WorkloadResult r = internal::TimePushes(engine, dag.ops.size(), [&] {
    const DagState* s = &state;
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
  });
  for (std::size_t v = 0; r.ok && v < dag.vars; ++v) {
    if (values[v] != expected[v]) {
      internal::Fail(r, "W4: var " + std::to_string(v) + " = " + std::to_string(values[v]) +
                            ", expected " + std::to_string(expected[v]));
    }
  }
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

}  // namespace depengine::bench
