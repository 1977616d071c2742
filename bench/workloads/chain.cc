// W1 chain: serialization latency, every function mutating one var.
#include <cstdint>
#include <string>
#include <vector>

#include "common/counter_array.h"
#include "workloads/internal/harness.h"
#include "workloads/workloads.h"

namespace depengine::bench {

WorkloadResult RunChain(Engine& engine, const ChainParams& params) {
  CounterArray counters(1, 0);  // on a line of its own (see counter_array.h)
  std::uint64_t& counter = counters[0];
  const std::vector<VarHandle> vars = {engine.NewVariable()};

  WorkloadResult r = internal::TimePushes(engine, params.ops, [&] {
    std::uint64_t* c = &counter;
    for (std::size_t i = 0; i < params.ops; ++i) {
      engine.PushSync([c](RunContext) { ++*c; }, Context::CPU(), {}, vars);
    }
  });
  if (r.ok && counter != params.ops) {
    internal::Fail(r, "W1: counter = " + std::to_string(counter) + ", expected " +
                          std::to_string(params.ops));
  }
  internal::DeleteVars(engine, vars, r);
  return r;
}

}  // namespace depengine::bench
