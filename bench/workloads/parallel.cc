// W2 parallel: throughput with plenty of parallelism, function i mutating
// var[i % K].
#include <cstdint>
#include <string>
#include <vector>

#include "common/counter_array.h"
#include "workloads/internal/harness.h"
#include "workloads/workloads.h"

namespace depengine::bench {

WorkloadResult RunParallel(Engine& engine, const ParallelParams& params) {
  if (params.vars == 0 || params.ops % params.vars != 0) {
    WorkloadResult r;
    internal::Fail(r, "W2: ops must be a positive multiple of vars");
    return r;
  }
  CounterArray counts(params.vars, 0);
  std::vector<VarHandle> vars(params.vars);
  for (VarHandle& v : vars) v = engine.NewVariable();

  WorkloadResult r = internal::TimePushes(engine, params.ops, [&] {
    std::vector<VarHandle> writes(1);
    for (std::size_t i = 0; i < params.ops; ++i) {
      const std::size_t k = i % params.vars;
      writes[0] = vars[k];
      std::uint64_t* count = &counts[k];
      engine.PushSync([count](RunContext) { ++*count; }, Context::CPU(), {}, writes);
    }
  });
  const std::uint64_t expected = params.ops / params.vars;
  for (std::size_t k = 0; r.ok && k < params.vars; ++k) {
    if (counts[k] != expected) {
      internal::Fail(r, "W2: count[" + std::to_string(k) + "] = " + std::to_string(counts[k]) +
                            ", expected " + std::to_string(expected));
    }
  }
  internal::DeleteVars(engine, vars, r);
  return r;
}

}  // namespace depengine::bench
