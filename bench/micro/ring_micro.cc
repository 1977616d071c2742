// The cell ring (experiments/tickets/cell_ring.h) on its own: functions handed from a
// producer thread (the benchmark's) to a consumer thread that runs each in
// place, as the engine's pusher and worker will. Each item is a
// std::function<void()> (32 bytes, one cell) placement-new'ed into the ring,
// called, and destroyed there. The segment size is the default (256 cells).
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <new>
#include <thread>

#include "tickets/cell_ring.h"

namespace depengine::micro {
namespace {

using internal::CellRing;
using internal::CellRingOptions;
using internal::RingConsumerWaker;
using Fn = std::function<void()>;
static_assert(sizeof(Fn) <= internal::kCellBytes);

void DestroyFn(void* p, std::uint32_t) { static_cast<Fn*>(p)->~Fn(); }

// Items the producer may have pushed ahead of the consumer (an engine's
// max_in_flight): without it an unbounded ring grows as long as the producer
// is faster. 32 segments (at most 36 with the check every 1,024 pushes):
// the default 64 spares keep them all, so no segment is allocated or freed
// once the ring has grown to that.
constexpr std::uint64_t kMaxInFlight = 8192;

// One producer / consumer pair.
struct Handoff {
  Handoff() : ring(Options(&waker)) {}
  static CellRingOptions Options(RingConsumerWaker* w) {
    CellRingOptions o;
    o.destroy = &DestroyFn;
    o.waker = w;
    return o;
  }

  // The consumer: runs items until an empty function; polls 4,000 times
  // (yielding every 64) before it sleeps, as the prototype's workers did.
  void Consume() {
    std::uint64_t n = 0;
    for (;;) {
      CellRing::Entry e = ring.Front();
      for (int poll = 1; !e; ++poll) {
        if (poll % 64 == 0) std::this_thread::yield();
        if (poll == 4000) {
          waker.SleepUnless([&] { return ring.HasPublishedForWait(); });
          poll = 0;
        }
        e = ring.Front();
      }
      Fn* fn = static_cast<Fn*>(e.data);
      const bool end = !*fn;
      if (!end) (*fn)();
      fn->~Fn();
      ring.Pop();
      if (end) break;
      if ((++n & 255) == 0) done.store(n, std::memory_order_release);
    }
    done.store(n, std::memory_order_release);
  }

  RingConsumerWaker waker;
  CellRing ring;
  // Items the consumer has run: stored (release) by the consumer every 256,
  // loaded by the producer every 1,024 pushes for the in-flight limit. Its
  // own line.
  alignas(64) std::atomic<std::uint64_t> done{0};
  // Incremented by the closures, on the consumer thread only; read after
  // the join. Its own line.
  alignas(64) std::uint64_t ran = 0;
};

// Items from the benchmark's thread to a consumer thread, published every
// `batch` items (Commit for 1; CommitUnpublished and Publish otherwise).
void BM_CellRingHandoff(benchmark::State& state) {
  const auto batch = static_cast<std::uint64_t>(state.range(0));
  Handoff h;
  std::thread consumer([&] { h.Consume(); });
  std::uint64_t* counter = &h.ran;
  std::uint64_t pushed = 0;
  for (auto _ : state) {
    new (h.ring.Reserve(1)) Fn([counter] { ++*counter; });
    ++pushed;
    if (batch == 1) {
      h.ring.Commit();
    } else {
      h.ring.CommitUnpublished();
      if (pushed % batch == 0) h.ring.Publish();
    }
    if ((pushed & 1023) == 0 && pushed - h.done.load(std::memory_order_acquire) > kMaxInFlight) {
      h.ring.Publish();
      while (pushed - h.done.load(std::memory_order_acquire) > kMaxInFlight / 2)
        std::this_thread::yield();
    }
  }
  new (h.ring.Reserve(1)) Fn();  // the end
  h.ring.Commit();
  consumer.join();
  if (h.ran != pushed) state.SkipWithError("the ring lost or repeated an item");
  state.SetItemsProcessed(static_cast<std::int64_t>(pushed));
  state.counters["sleeps"] = static_cast<double>(h.waker.SleepsForTesting());
  state.counters["segments"] = static_cast<double>(h.ring.SegmentsAllocatedForTesting());
  state.counters["freed"] = static_cast<double>(h.ring.SegmentsFreedForTesting());
}
BENCHMARK(BM_CellRingHandoff)->ArgName("batch")->Arg(1)->Arg(32)->UseRealTime();

// The ring's own cost on one thread: 32 items pushed (one publish), then
// taken and run, per iteration.
void BM_CellRingPushRunOneThread(benchmark::State& state) {
  RingConsumerWaker waker;
  CellRing ring(Handoff::Options(&waker));
  std::uint64_t ran = 0;
  std::uint64_t* counter = &ran;
  for (auto _ : state) {
    for (int i = 0; i < 32; ++i) {
      new (ring.Reserve(1)) Fn([counter] { ++*counter; });
      ring.CommitUnpublished();
    }
    ring.Publish();
    for (int i = 0; i < 32; ++i) {
      Fn* fn = static_cast<Fn*>(ring.Front().data);
      (*fn)();
      fn->~Fn();
      ring.Pop();
    }
  }
  benchmark::DoNotOptimize(ran);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * 32);
}
BENCHMARK(BM_CellRingPushRunOneThread)->UseRealTime();

}  // namespace
}  // namespace depengine::micro
