// ObjectPool on its own (common/object_pool.h): the allocation behind every
// push and the free behind every completion. No engine; objects shaped like
// the engine's one-var blocks (128 bytes, 128-aligned).
#include <algorithm>
#include <atomic>
#include <random>
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

// A burst: 256K objects (32 MiB) freed in an order unrelated to their
// addresses (workers finishing a deep W2), then allocated again. Timed: the
// frees and the allocations, per object; the frees beyond what the global
// stack keeps go to the pool's address-ordered stock (common/
// address_ordered_stock.h), which is this benchmark's cost side.
constexpr std::size_t kBurstObjects = std::size_t{1} << 18;

std::vector<PooledItem*> ScrambledBurst() {
  std::vector<PooledItem*> items(kBurstObjects);
  for (PooledItem*& it : items) it = ItemPool::Allocate();
  std::shuffle(items.begin(), items.end(), std::mt19937_64(1));
  return items;
}

void BM_PoolBurstFreeThenAllocate(benchmark::State& state) {
  std::vector<PooledItem*> items = ScrambledBurst();
  for (auto _ : state) {
    for (PooledItem* it : items) ItemPool::Free(it);
    for (PooledItem*& it : items) it = ItemPool::Allocate();
    state.PauseTiming();
    std::shuffle(items.begin(), items.end(), std::mt19937_64(2));
    state.ResumeTiming();
  }
  for (PooledItem* it : items) ItemPool::Free(it);
  state.counters["per_object"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kBurstObjects,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_PoolBurstFreeThenAllocate)->UseRealTime()->Unit(benchmark::kMillisecond);

// The benefit side: after a scrambled burst, a deep queue allocated from the
// pool (each object linked to the next, as a var's queued functions are)
// and then walked in order, one dependent load per object, as the worker
// of a chain pushed far ahead walks it. Timed: the walk, per object.
void BM_PoolWalkAfterBurst(benchmark::State& state) {
  for (auto _ : state) {
    state.PauseTiming();
    std::vector<PooledItem*> items = ScrambledBurst();
    for (PooledItem* it : items) ItemPool::Free(it);
    PooledItem* head = nullptr;
    PooledItem* tail = nullptr;
    for (std::size_t i = 0; i < kBurstObjects; ++i) {
      PooledItem* it = ItemPool::Allocate();
      it->pool_next = nullptr;
      (tail != nullptr ? tail->pool_next : head) = it;
      tail = it;
    }
    // Out of this core's caches as far as a 32 MiB write-through allows:
    // the queue's objects were written by the pusher long before.
    std::vector<char> evict(std::size_t{64} << 20, 1);
    benchmark::DoNotOptimize(evict.data());
    state.ResumeTiming();
    std::size_t n = 0;
    for (PooledItem* it = head; it != nullptr; it = it->pool_next) ++n;
    benchmark::DoNotOptimize(n);
    state.PauseTiming();
    for (PooledItem* it = head; it != nullptr;) {
      PooledItem* next = it->pool_next;
      ItemPool::Free(it);
      it = next;
    }
    state.ResumeTiming();
  }
  state.counters["per_object"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kBurstObjects,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_PoolWalkAfterBurst)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace depengine::micro
