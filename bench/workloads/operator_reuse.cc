// W5 operator reuse: prebuilt operators (NewOperator), pushed round robin.
#include <cstdint>
#include <string>
#include <vector>

#include "common/counter_array.h"
#include "workloads/internal/harness.h"
#include "workloads/workloads.h"

namespace depengine::bench {

WorkloadResult RunOperatorReuse(Engine& engine, const OperatorReuseParams& params) {
  if (params.operators == 0) {
    WorkloadResult r;
    internal::Fail(r, "W5: needs at least one operator");
    return r;
  }
  CounterArray counts(params.operators, 0);
  std::vector<VarHandle> vars(params.operators);
  std::vector<OprHandle> oprs(params.operators);
  for (std::size_t k = 0; k < params.operators; ++k) {
    vars[k] = engine.NewVariable();
    std::uint64_t* count = &counts[k];
    oprs[k] = engine.NewOperator(
        [count](RunContext, CallbackOnComplete done) {
          ++*count;
          done();
        },
        {}, {vars[k]}, FnProperty::kNormal, "W5");
  }

  WorkloadResult r = internal::TimePushes(engine, params.pushes, [&] {
    const std::size_t n = params.operators;
    for (std::size_t i = 0, k = 0; i < params.pushes; ++i) {
      engine.Push(oprs[k], Context::CPU());
      if (++k == n) k = 0;
    }
  });
  for (std::size_t k = 0; r.ok && k < params.operators; ++k) {
    const std::uint64_t expected =
        params.pushes / params.operators + (k < params.pushes % params.operators ? 1 : 0);
    if (counts[k] != expected) {
      internal::Fail(r, "W5: count[" + std::to_string(k) + "] = " + std::to_string(counts[k]) +
                            ", expected " + std::to_string(expected));
    }
  }
  try {
    for (OprHandle op : oprs) engine.DeleteOperator(op);
  } catch (...) {
    internal::Fail(r, "teardown: " + internal::CurrentExceptionMessage());
  }
  internal::DeleteVars(engine, vars, r);
  return r;
}

}  // namespace depengine::bench
