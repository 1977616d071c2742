// TaskQueue: the ready functions of one worker pool, highest priority first
// and, within priority 0 (the common case), first in first out.
//
// Priority 0 goes through an intrusive multi-producer queue linked through
// OprBlock::queue_next (D. Vyukov's non-blocking MPSC design): a producer
// swaps itself in as the tail with one atomic exchange and then links its
// predecessor to itself, so pushers never take a lock and never touch the
// consumers' cache line. Consumers (the pool's workers) serialize on a spin
// lock of their own. A stub node lets the queue run empty without a null
// tail. Other priorities wait in a small max-heap behind its own spin lock;
// they are rare, and they need ordering the FIFO cannot give.
//
// The split is the point: with a single locked queue, the pushing thread and
// every worker fought over one cache line per push and per pop, which was half
// of the per-function cost on the parallel workloads.
//
// Wake-up protocol: a worker that finds the queue empty spins for at most
// the queue's idle spin (EngineOptions::worker_spin_us), then,
// holding sleep_mu_, (1) increments sleepers_ and (2) re-checks Empty(), and
// waits on sleep_cv_ only while the queue stays empty. A pusher (a) publishes
// its block (the tail exchange, or heap_size_ for the heap) and then (b) reads
// sleepers_ and, if non-zero, locks and unlocks sleep_mu_ and notifies.
// (1), (2), (a), (b) are seq_cst: either the pusher sees the sleeper, and its
// lock waits until the sleeper is inside wait() (which released the mutex),
// so the notify reaches it; or the sleeper's (2) comes after (a) and sees the
// block (or sees it already taken by another worker). No lost wake-up, and a
// pusher pays one load when nobody sleeps.
#pragma once

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "tracker/opr_block.h"

namespace depengine::internal {

// For tests: what a queue's idle workers did (TaskQueue::IdleCountsForTesting),
// summed over the queues of an engine by ThreadedEngine::WorkerIdleCountsForTesting.
struct IdleCounts {
  std::uint64_t sleeps = 0;       // times a worker went to sleep
  std::uint64_t timed_spins = 0;  // idle periods that polled past the first round
  IdleCounts& operator+=(const IdleCounts& other) {
    sleeps += other.sleeps;
    timed_spins += other.timed_spins;
    return *this;
  }
};

class TaskQueue {
 public:
  // How long a worker that finds the queue empty polls it before it sleeps
  // (EngineOptions::worker_spin_us); zero: it sleeps at once.
  explicit TaskQueue(std::chrono::microseconds idle_spin);
  TaskQueue(const TaskQueue&) = delete;
  TaskQueue& operator=(const TaskQueue&) = delete;

  // Adds a ready block. Callable from any thread.
  void Push(OprBlock* b);
  // Adds several ready blocks (one tail exchange for the priority-0 ones) and
  // wakes up to that many sleepers.
  void PushBatch(OprBlock* const* blocks, int n);
  // Takes the next block, sleeping while there is none; returns nullptr once
  // Stop() was called and the queue is empty. Calls `on_empty` each time it
  // finds the queue empty, before spinning or sleeping (workers publish
  // batched state there). Worker threads only.
  template <class OnEmpty>
  OprBlock* Pop(OnEmpty&& on_empty);
  // Wakes every worker; Pop returns nullptr once the queue drains.
  void Stop();

  // True when a block of priority `priority` may skip this queue (run next on
  // the worker that made it ready) without overtaking a waiting block of
  // higher priority. A hint: waiting blocks are read without a lock.
  bool MayBypass(int priority) const {
    if (priority < heap_max_.load(std::memory_order_relaxed)) return false;
    return priority >= 0 || FifoEmptyHint();
  }
  // Profiled blocks waiting (in the FIFO and in the heap), a hint for the
  // profiler: every waiting block while every push is profiled. Unprofiled
  // blocks are not counted: that would cost every push an atomic add.
  std::size_t SizeHint() const;

  // For tests: times a worker went to sleep on this queue, and idle periods
  // that went on polling past the first round (the time-bounded spin).
  IdleCounts IdleCountsForTesting() const {
    return {sleeps_.load(std::memory_order_relaxed), timed_spins_.load(std::memory_order_relaxed)};
  }

 private:
  // Spins before a worker sleeps: a short wait is far cheaper than a futex
  // round trip when work arrives at a high rate. Bounded by time, not by a
  // count of pause instructions, whose length differs about 14x between
  // x86 cores (about 26 ns here, 140 cycles on recent Intel, 10 on older).
  const std::chrono::microseconds idle_spin_;

  // Whether an idle worker in spin round `round` polls once more: always
  // in round 0, which reads no clock (32 pauses, about a microsecond: a
  // worker that keeps pace with a pusher finds its next block there, and a
  // clock read, 20-30 ns, would delay it); from round 1 on, until
  // idle_spin_ has passed since round 1 began (`spin_end`, set then, one
  // clock read per round). Never when idle_spin_ is zero.
  bool KeepSpinning(int round, std::chrono::steady_clock::time_point* spin_end) {
    if (idle_spin_.count() == 0) return false;
    if (round == 0) return true;
    const auto now = std::chrono::steady_clock::now();
    if (round == 1) {
      *spin_end = now + idle_spin_;
      timed_spins_.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
    return now < *spin_end;
  }

  static std::atomic_ref<OprBlock*> Next(OprBlock* b) {
    return std::atomic_ref<OprBlock*>(b->queue_next);
  }
  // Appends the chain first..last (already linked) to the FIFO.
  void LinkFifo(OprBlock* first, OprBlock* last);
  void PushHeap(OprBlock* b);
  // Takes the next block, or nullptr when none is available right now (the
  // queue may also be between a producer's exchange and its link).
  OprBlock* TryDequeue();
  OprBlock* TryDequeueFifo() REQUIRES(consumer_mu_);
  void PrefetchBlock(const OprBlock* b);
  OprBlock* TryDequeueHeap();
  // A hint for spinning workers: reads only the consumers' head and the
  // stub's link, which a producer writes only when the FIFO was empty (the
  // tail changes on every push; polling it would pull the producers' line
  // away from them). A producer between its exchange and its link is missed
  // here; Empty() sees it.
  bool FifoEmptyHint() const {
    return head_.load(std::memory_order_relaxed) == &stub_ &&
           std::atomic_ref<OprBlock*>(stub_.queue_next).load(std::memory_order_relaxed) == nullptr;
  }
  // Empty, for the wake-up protocol (seq_cst loads: the tail first, then the
  // head, against the producers' seq_cst exchanges and the head_ stores).
  // The tail alone is not enough: when a consumer re-pushes the stub behind
  // the last block while a producer appends, blocks wait ahead of a stub that
  // is the tail. Invariant: a block is waiting only if head_ != &stub_ or
  // tail_ != &stub_.
  bool Empty() const {
    return tail_.load(std::memory_order_seq_cst) == &stub_ &&
           head_.load(std::memory_order_seq_cst) == &stub_ &&
           heap_size_.load(std::memory_order_seq_cst) == 0;
  }
  bool EmptyHint() const {
    return FifoEmptyHint() && heap_size_.load(std::memory_order_relaxed) == 0;
  }
  void SpinWhileEmpty(int round);
  void SleepWhileEmpty();
  // Wakes one sleeper unless a worker is spinning (it will find the work).
  void WakeIfNobodySpins();

  // --- producers' line ---
  // The newest block of the FIFO, or &stub_. Exchanged by every producer
  // (seq_cst: step (a) of the wake-up protocol); the consumer re-pushes the
  // stub through it when it takes the last block.
  alignas(64) std::atomic<OprBlock*> tail_;
  // Profiled priority-0 blocks pushed, for SizeHint only (relaxed). Only
  // profiled ones: counting every push here cost a contended atomic add.
  std::atomic<std::uint64_t> profiled_pushed_{0};

  // --- consumers' line ---
  alignas(64) SpinLock consumer_mu_;
  // The oldest block not yet taken, or &stub_ (then stub_.queue_next is it).
  // Written under consumer_mu_ (seq_cst: Empty() reads it without the lock).
  std::atomic<OprBlock*> head_;
  // Profiled priority-0 blocks taken; written under consumer_mu_, read
  // relaxed.
  std::atomic<std::uint64_t> profiled_popped_{0};
  // A node that is never run; see head_ and tail_. Mutable: FifoEmptyHint
  // reads its link through an atomic_ref.
  mutable OprBlock stub_;  // a node that is never run; see head_ and tail_

  // --- other priorities ---
  alignas(64) SpinLock heap_mu_;
  std::vector<OprBlock*> heap_ GUARDED_BY(heap_mu_);  // max-heap by priority
  // Size and top of heap_, written under heap_mu_. heap_size_ is seq_cst in
  // the wake-up protocol; heap_max_ (INT_MIN when empty) is a relaxed hint.
  std::atomic<int> heap_size_{0};
  std::atomic<int> heap_max_{INT_MIN};
  // Profiled blocks in heap_, for SizeHint only: written under heap_mu_,
  // read relaxed.
  std::atomic<int> profiled_in_heap_{0};

  // --- sleeping ---
  // Event count (see the wake-up protocol above). Pushers only read it in
  // the common case.
  alignas(64) std::atomic<int> sleepers_{0};
  // Workers in their spin phase. A pusher that sees one does not wake a
  // sleeper: a worker leaves the spin phase (decrement) before it registers
  // as a sleeper and re-checks Empty(), all seq_cst, so either the pusher sees
  // no spinner (and wakes a sleeper) or that worker sees the block.
  std::atomic<int> spinners_{0};
  std::mutex sleep_mu_;  // pairs with sleep_cv_; see the protocol
  std::condition_variable sleep_cv_;
  // Set once by Stop(): stored seq_cst, then sleep_mu_ is locked and
  // unlocked, so a worker deciding to sleep (which reads it under sleep_mu_)
  // either sees it or is woken by Stop's notify_all. Pop's acquire read only
  // starts the drain.
  std::atomic<bool> stop_{false};

  // --- counts for tests (relaxed: nothing orders by them) ---
  // Written once per idle period at most, on a line of their own so that
  // the pushers' line above is not written more often than before.
  alignas(64) std::atomic<std::uint64_t> sleeps_{0};
  std::atomic<std::uint64_t> timed_spins_{0};
};

template <class OnEmpty>
OprBlock* TaskQueue::Pop(OnEmpty&& on_empty) {
  bool reported_empty = false;
  bool spinning = false;  // counted in spinners_
  int missed = 0;         // TryDequeue found nothing although the queue was not empty
  std::chrono::steady_clock::time_point spin_end;  // set by round 1 (KeepSpinning)
  for (int round = 0;; ++round) {
    if (!EmptyHint()) {
      if (spinning) {
        spinners_.fetch_sub(1, std::memory_order_seq_cst);
        spinning = false;
      }
      if (OprBlock* b = TryDequeue()) {
        // A pusher skips waking sleepers while someone spins; if work is
        // left now that this spinner took its block, wake a sleeper for it.
        if (!EmptyHint()) WakeIfNobodySpins();
        return b;
      }
      // Another worker took it, or a producer is between its exchange and
      // its link: look again, and give the core up now and then in case
      // that producer was preempted there (more threads than cores).
      SpinLock::Pause();
      if (++missed % 16 == 0) std::this_thread::yield();
      continue;
    }
    if (!reported_empty) {
      on_empty();
      reported_empty = true;
    }
    if (stop_.load(std::memory_order_acquire)) {
      if (spinning) {
        spinners_.fetch_sub(1, std::memory_order_seq_cst);
        spinning = false;
      }
      if (!Empty()) continue;  // a block pushed before Stop still runs
      return nullptr;
    }
    if (KeepSpinning(round, &spin_end)) {
      // The first round spins unregistered: a worker that keeps pace with a
      // pusher finds its next block within it, and registering would write
      // the line every pusher reads on every push. An unregistered spinner
      // only fails to suppress a wake-up, which is always safe.
      if (!spinning && round > 0) {
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
