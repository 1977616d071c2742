// Backpressure (EngineOptions::max_in_flight): bounds the functions pushed
// and not finished, so that a pusher that runs ahead of the engine waits
// instead of growing memory without bound.
//
// The bound is checked on every push and released on every completion, so
// its cost is on both hot paths. A single counter shared by both sides moved
// its cache line between the pusher and the workers twice per function and
// doubled W1's time per op. Here each side writes only its own lines:
//   - pushers count reservations in `reserved_`, on a line only they touch;
//   - each worker counts its completions in its own WorkerCounter, and
//     other threads (callbacks called from outside, failed pushes) in
//     `external_released_`; an exiting worker's count moves into
//     `retired_released_`, under `mu_`;
//   - a pusher sums the release counters only when the credit it saw last
//     (`released_seen_`) runs out, that is about once per max_in_flight
//     pushes while the engine keeps up.
// Every count only grows, and a sum read at any moment is at most the true
// number of completions, so a pusher that admits itself against a stale sum
// is only more careful than needed: the bound holds with any number of
// pushers (each admission is a CAS on `reserved_`).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/mutex.h"
#include "common/thread_annotations.h"

namespace depengine::internal {

class InFlightLimiter {
 public:
  // One worker thread's completions. Lives as long as the worker (in its
  // WorkerTls) and is registered with the limiter meanwhile.
  struct alignas(64) WorkerCounter {
    // Written by its worker only (a load and a store, no read-modify-write);
    // read by pushers summing the releases. Relaxed: a pusher needs only a
    // value no larger than the true count, which any value read is.
    std::atomic<std::uint64_t> released{0};
    std::uint32_t since_notify = 0;      // its worker only
    std::uint64_t released_at_idle = 0;  // its worker only: `released` at the last WorkerIdle
  };

  // max == 0: no bound; every call is then a no-op.
  explicit InFlightLimiter(std::size_t max);
  InFlightLimiter(const InFlightLimiter&) = delete;
  InFlightLimiter& operator=(const InFlightLimiter&) = delete;

  bool enabled() const { return max_ > 0; }

  // Takes one unit. With may_wait, waits while max units are taken; without,
  // takes it regardless (pushes from engine threads: waiting there could
  // deadlock, since they may be what frees room).
  void Reserve(bool may_wait);
  // Gives one unit back, from any thread. Wakes a waiting pusher at once.
  void Release();
  // Gives one unit back from the worker that owns `c`. Wakes a waiting
  // pusher once per max/4 of this worker's releases (at most kNotifyEvery);
  // WorkerIdle wakes it when the worker runs dry, and a waiting pusher looks
  // again every millisecond in any case.
  void Release(WorkerCounter& c) {
    c.released.store(c.released.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (++c.since_notify >= notify_every_) {
      c.since_notify = 0;
      if (waiters_.load(std::memory_order_relaxed) > 0) Notify();
    }
  }
  // The worker that owns `c` found its queue empty: wakes a waiting pusher
  // if this worker released anything since it last ran dry. Unlike the
  // periodic wake-up this one is never missed, so a pusher waits for room
  // no longer than the engine takes to run dry.
  void WorkerIdle(WorkerCounter& c) {
    const std::uint64_t released = c.released.load(std::memory_order_relaxed);
    if (released != c.released_at_idle) {
      c.released_at_idle = released;
      IdleNotify();
    }
  }

  void Register(WorkerCounter& c);
  // Folds c's count into the exited workers' total.
  void Unregister(WorkerCounter& c);

  static constexpr std::uint32_t kNotifyEvery = 256;

 private:
  std::uint64_t ReleasedSumLocked() REQUIRES(mu_);
  std::uint64_t ReleasedSum();
  // Raises released_seen_ to `sum` unless a pusher already saw more.
  void RaiseSeen(std::uint64_t sum);
  void WaitForRoom();
  void Notify();
  void IdleNotify();

  const std::uint64_t max_;
  const std::uint32_t notify_every_;

  // --- the pushers' line ---
  // Units ever taken. Admission is a CAS on it (relaxed: it orders no data).
  alignas(64) std::atomic<std::uint64_t> reserved_{0};
  // The largest release sum a pusher has computed; only raised. Relaxed.
  std::atomic<std::uint64_t> released_seen_{0};

  // --- read by every release, written when a pusher starts or stops waiting ---
  // Incremented seq_cst and followed by a seq_cst fence (WaitForRoom), so
  // that Release() (a seq_cst add, then a seq_cst load of this) and
  // IdleNotify (a fence, then a load) cannot both miss a waiter. The
  // periodic wake-up in Release(WorkerCounter&) reads it relaxed and may
  // miss one; the waiter's recheck (kRecheck) bounds that. Decremented
  // relaxed: a notify too many is harmless.
  alignas(64) std::atomic<int> waiters_{0};

  // --- releases from threads other than registered workers ---
  // seq_cst: the other half of the Dekker pair with waiters_ in Release().
  alignas(64) std::atomic<std::uint64_t> external_released_{0};

  Mutex mu_;
  std::condition_variable cv_;  // waited on with mu_: a pusher waiting for room
  std::vector<WorkerCounter*> workers_ GUARDED_BY(mu_);
  std::uint64_t retired_released_ GUARDED_BY(mu_) = 0;  // of unregistered workers
};

}  // namespace depengine::internal
