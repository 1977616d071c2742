// Memory per pending function: every function pushed before any runs,
// queued behind one var that an unfinished async function holds.
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "workloads/internal/harness.h"
#include "workloads/workloads.h"

namespace depengine::bench {

PendingMemoryResult MeasurePendingOpMemory(Engine& engine, const PendingMemoryParams& params) {
  PendingMemoryResult r;
  r.ops = params.ops;
  std::uint64_t counter = 0;
  const std::vector<VarHandle> vars = {engine.NewVariable()};
  // The holder: an async function that keeps `vars` until `release` is called.
  CallbackOnComplete release;
  std::atomic<bool> holding{false};
  bool released = false;
  try {
    engine.PushAsync(
        [&](RunContext, CallbackOnComplete done) {
          release = done;
          holding.store(true, std::memory_order_release);
        },
        Context::CPU(), {}, vars);
    while (!holding.load(std::memory_order_acquire)) std::this_thread::yield();

    const std::size_t before = CurrentRssBytes();
    std::uint64_t* c = &counter;
    for (std::size_t i = 0; i < params.ops; ++i) {
      engine.PushSync([c](RunContext) { ++*c; }, Context::CPU(), {}, vars);
    }
    const std::size_t after = CurrentRssBytes();
    r.rss_growth_bytes = static_cast<long long>(after) - static_cast<long long>(before);

    released = true;
    release();
    engine.WaitForAll();
    r.ok = counter == params.ops;
    if (!r.ok) {
      r.check_error = "pending ops: counter = " + std::to_string(counter) + ", expected " +
                      std::to_string(params.ops);
    }
  } catch (...) {
    r.ok = false;
    r.check_error = internal::CurrentExceptionMessage();
    try {
      if (holding.load(std::memory_order_acquire) && !released) release();
      engine.WaitForAll();
    } catch (...) {
      // Already reported the first failure.
    }
  }
  internal::DeleteVars(engine, vars, r);
  return r;
}

}  // namespace depengine::bench
