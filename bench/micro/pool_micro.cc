// ObjectPool on its own (common/object_pool.h): the allocation behind every
// push and the free behind every completion. No engine; objects shaped like
// the engine's one-var blocks (128 bytes, 128-aligned).
#include <atomic>
#include <thread>
#include <vector>

#include "common/object_pool.h"
#include "micro/micro_engines.h"

namespace depengine::micro {
namespace {

struct alignas(128) PooledItem {
  PooledItem* pool_next = nullptr;
  char payload[120];
};
using ItemPool = internal::ObjectPool<PooledItem>;

void ReportPerObject(benchmark::State& state) {
  state.counters["per_object"] = benchmark::Counter(static_cast<double>(state.iterations()) * kBatch,
                                                    benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

// Allocate and free on one thread: a batch out, then back (the thread's
// cache, kBatch > the pool's batch, so batches also move through the global
// list).
void BM_PoolAllocateFree(benchmark::State& state) {
  std::vector<PooledItem*> items(kBatch);
  for (auto _ : state) {
    for (PooledItem*& it : items) {
      it = ItemPool::Allocate();
      it->payload[0] = 1;  // a push writes the block it gets
    }
    for (PooledItem* it : items) ItemPool::Free(it);
  }
  benchmark::DoNotOptimize(items.data());
  ReportPerObject(state);
}
BENCHMARK(BM_PoolAllocateFree)->UseRealTime();

// The engine's pattern: this thread allocates (the pusher), another frees
// (a worker finishing the functions), and the objects come back through the
// global list in batches. Timed: allocating and writing a batch, handing it
// over, and waiting until the other thread has freed it.
void BM_PoolAllocateHereFreeThere(benchmark::State& state) {
  std::vector<PooledItem*> items(kBatch);
  std::atomic<int> phase{0};  // 0: the freer waits; 1: a batch to free; 2: stop
  std::thread freer([&] {
    for (;;) {
      int p;
      while ((p = phase.load(std::memory_order_acquire)) == 0) std::this_thread::yield();
      if (p == 2) return;
      for (PooledItem* it : items) ItemPool::Free(it);
      phase.store(0, std::memory_order_release);
    }
  });
  for (auto _ : state) {
    for (PooledItem*& it : items) {
      it = ItemPool::Allocate();
      it->payload[0] = 1;
    }
    phase.store(1, std::memory_order_release);
    while (phase.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  }
  phase.store(2, std::memory_order_release);
  freer.join();
  ReportPerObject(state);
}
BENCHMARK(BM_PoolAllocateHereFreeThere)->UseRealTime();

}  // namespace
}  // namespace depengine::micro
