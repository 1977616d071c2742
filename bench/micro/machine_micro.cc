// The machine itself, not depengine: what one cache line costs to move
// between two threads. Every engine figure on the parallel workloads is
// mostly such transfers (docs/design.md, "Cache lines and prefetching"), and
// on the shared 2-vCPU VM this project is measured on, the host moves the
// vCPUs around: the round trip measured here has ranged from about 70 ns to
// about 500 ns from one run to the next, and W2 with it from about 60 to
// about 220 ns/op. Run it beside an A/B comparison to see which regime the
// machine was in:
//   depengine-micro --benchmark_filter=CoreToCore --benchmark_repetitions=5
#include <atomic>
#include <cstdint>
#include <thread>

#include "micro/micro_engines.h"

namespace depengine::micro {
namespace {

// Two threads, not pinned (the engine's are not either), pass a counter back
// and forth through one cache line: each iteration is one round trip, two
// transfers of the line.
void BM_CoreToCoreRoundTrip(benchmark::State& state) {
  alignas(64) std::atomic<std::uint64_t> line{0};
  std::atomic<bool> stop{false};
  // Waits for `value`; gives the core up now and then, in case both threads
  // share one.
  auto wait_for = [&](std::uint64_t value) {
    for (int spins = 0; line.load(std::memory_order_acquire) != value; ++spins) {
      if (stop.load(std::memory_order_relaxed)) return false;
      if (spins % 4096 == 4095) std::this_thread::yield();
    }
    return true;
  };
  std::thread partner([&] {
    for (std::uint64_t odd = 1;; odd += 2) {
      if (!wait_for(odd)) return;
      line.store(odd + 1, std::memory_order_release);
    }
  });
  std::uint64_t even = 0;
  for (auto _ : state) {
    line.store(even + 1, std::memory_order_release);
    even += 2;
    wait_for(even);
  }
  stop.store(true, std::memory_order_relaxed);
  partner.join();
}
BENCHMARK(BM_CoreToCoreRoundTrip)->UseRealTime();

}  // namespace
}  // namespace depengine::micro
