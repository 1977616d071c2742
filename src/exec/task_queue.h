// TaskQueue: the ready functions of one worker pool, highest priority first
// and, within priority 0 (the common case), first in first out.
//
// The queue itself is guarded by a spin lock (critical sections are a few
// pointer moves; a sleeping mutex made pushers and workers trade futex
// sleeps under contention). Idle workers sleep on a condition variable:
//
// Wake-up protocol: a worker that finds the queue empty spins briefly, then,
// holding sleep_mu_, (1) increments sleepers_ and (2) re-checks size_, and
// waits on sleep_cv_ only while the queue stays empty. A pusher (a)
// enqueues and increments size_, then (b) reads sleepers_ and, if non-zero,
// locks and unlocks sleep_mu_ and notifies. (1), (2), (a), (b) are seq_cst:
// either the pusher sees the sleeper, and then its lock waits until the
// sleeper is inside wait() (which released the mutex), so the notify
// reaches it; or the sleeper's (2) comes after (a) and sees the item.
// No lost wake-up, and a pusher pays one load when nobody sleeps.
#pragma once

#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "common/mutex.h"
#include "tracker/opr_block.h"

namespace depengine::internal {

class TaskQueue {
 public:
  // Adds a ready block. Callable from any thread.
  void Push(OprBlock* b) EXCLUDES(mu_);
  // Adds several ready blocks under one lock and wakes up to that many
  // sleepers.
  void PushBatch(OprBlock* const* blocks, int n) EXCLUDES(mu_);
  // Takes the next block, sleeping while there is none; returns nullptr once
  // Stop() was called and the queue is empty. Calls `on_empty` each time it
  // finds the queue empty, before spinning or sleeping (workers publish
  // batched state there). Worker threads only.
  template <class OnEmpty>
  OprBlock* Pop(OnEmpty&& on_empty) EXCLUDES(mu_);
  // Wakes every worker; Pop returns nullptr once the queue drains.
  void Stop() EXCLUDES(mu_);

  // The highest priority waiting, or INT_MIN when empty. A hint: read
  // without the lock (relaxed), written under mu_.
  int MaxWaitingPriority() const { return max_priority_.load(std::memory_order_relaxed); }
  // Blocks waiting, a hint for spinning workers and profiling counters.
  std::size_t SizeHint() const { return size_.load(std::memory_order_relaxed); }

 private:
  // Spins before a worker sleeps: a short wait is far cheaper than a futex
  // round trip when work arrives at a high rate.
  static constexpr int kSpinRounds = 64;
  OprBlock* TryDequeue() EXCLUDES(mu_);
  void SpinWhileEmpty(int round);
  void SleepWhileEmpty();
  // Wakes one sleeper unless a worker is spinning (it will find the work).
  void WakeIfNobodySpins();
  void EnqueueLocked(OprBlock* b) REQUIRES(mu_);
  OprBlock* DequeueLocked() REQUIRES(mu_);
  void UpdateHintsLocked() REQUIRES(mu_);
  bool EmptyLocked() const REQUIRES(mu_) { return fifo_head_ == nullptr && heap_.empty(); }

  SpinLock mu_;
  OprBlock* fifo_head_ GUARDED_BY(mu_) = nullptr;  // priority 0, oldest first
  OprBlock* fifo_tail_ GUARDED_BY(mu_) = nullptr;
  std::vector<OprBlock*> heap_ GUARDED_BY(mu_);  // other priorities, max-heap
  std::atomic<int> max_priority_{INT_MIN};       // see MaxWaitingPriority
  std::atomic<std::size_t> size_{0};             // blocks queued; seq_cst in the wake-up protocol
  // Event count (see the wake-up protocol above), on its own cache line:
  // pushers only read it in the common case.
  alignas(64) std::atomic<int> sleepers_{0};
  // Workers in their spin phase. A pusher that sees one does not wake a
  // sleeper: a worker leaves the spin phase (decrement) before it registers
  // as a sleeper and re-checks size_, all seq_cst, so either the pusher sees
  // no spinner (and wakes a sleeper) or that worker sees the item.
  std::atomic<int> spinners_{0};
  std::mutex sleep_mu_;  // pairs with sleep_cv_; see the protocol
  std::condition_variable sleep_cv_;
  std::atomic<bool> stop_{false};  // set once by Stop()
};

template <class OnEmpty>
OprBlock* TaskQueue::Pop(OnEmpty&& on_empty) {
  bool reported_empty = false;
  bool spinning = false;  // counted in spinners_
  for (int round = 0;; ++round) {
    if (size_.load(std::memory_order_relaxed) > 0) {
      if (spinning) {
        spinners_.fetch_sub(1, std::memory_order_seq_cst);
        spinning = false;
      }
      if (OprBlock* b = TryDequeue()) {
        // A pusher skips waking sleepers while someone spins; if work is
        // left now that this spinner took its block, wake a sleeper for it.
        if (size_.load(std::memory_order_relaxed) > 0) WakeIfNobodySpins();
        return b;
      }
      continue;
    }
    if (!reported_empty) {
      on_empty();
      reported_empty = true;
    }
    if (stop_.load(std::memory_order_acquire)) {
      if (spinning) spinners_.fetch_sub(1, std::memory_order_seq_cst);
      return nullptr;
    }
    if (round < kSpinRounds) {
      if (!spinning) {
        spinners_.fetch_add(1, std::memory_order_seq_cst);
        spinning = true;
      }
      SpinWhileEmpty(round);
      continue;
    }
    if (spinning) {
      spinners_.fetch_sub(1, std::memory_order_seq_cst);
      spinning = false;
    }
    SleepWhileEmpty();
    round = 0;
  }
}

}  // namespace depengine::internal
