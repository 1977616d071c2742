// W3 fan: read sharing (64 readers of X per round) and a 64-var reader.
#include <cstdint>
#include <string>
#include <vector>

#include "workloads/internal/harness.h"
#include "workloads/workloads.h"

namespace depengine::bench {
namespace {

// What W3's functions read and write; each closure holds a pointer to it.
struct FanState {
  std::uint64_t x = 0;
  std::vector<std::uint64_t> ys;
};

}  // namespace

WorkloadResult RunFan(Engine& engine, const FanParams& params) {
  const FanValues expected = SerialFan(params);
  FanState state;
  state.ys.assign(params.fan, 0);
  const std::vector<VarHandle> x_var = {engine.NewVariable()};
  std::vector<VarHandle> y_vars(params.fan);
  for (VarHandle& v : y_vars) v = engine.NewVariable();

  WorkloadResult r = internal::TimePushes(engine, params.ops(), [&] {
    FanState* s = &state;
    const std::size_t fan = params.fan;
    std::vector<VarHandle> y_write(1);
    for (std::size_t round = 0; round < params.rounds; ++round) {
      engine.PushSync([s](RunContext) { FanBump(s->x); }, Context::CPU(), {}, x_var);
      for (std::size_t j = 0; j < fan; ++j) {
        y_write[0] = y_vars[j];
        engine.PushSync([s, j](RunContext) { FanSpread(s->x, j, s->ys[j]); }, Context::CPU(), x_var,
                        y_write);
      }
      engine.PushSync([s](RunContext) { s->x = FanGather(s->ys.data(), s->ys.size()); },
                      Context::CPU(), y_vars, x_var);
    }
  });
  if (r.ok && state.x != expected.x) {
    internal::Fail(r, "W3: X = " + std::to_string(state.x) + ", expected " + std::to_string(expected.x));
  }
  for (std::size_t j = 0; r.ok && j < params.fan; ++j) {
    if (state.ys[j] != expected.ys[j]) {
      internal::Fail(r, "W3: Y[" + std::to_string(j) + "] = " + std::to_string(state.ys[j]) +
                            ", expected " + std::to_string(expected.ys[j]));
    }
  }
  std::vector<VarHandle> all = y_vars;
  all.push_back(x_var[0]);
  internal::DeleteVars(engine, all, r);
  return r;
}

}  // namespace depengine::bench
