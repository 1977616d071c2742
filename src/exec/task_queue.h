// TaskQueue: the ready functions of one worker pool, highest priority first
// and, within priority 0 (the common case), first in first out.
//
// Wake-up protocol: a worker that finds the queue empty spins briefly, then
// registers as a sleeper under mu_ and waits on cv_. A pusher enqueues under
// mu_ and, if it saw a sleeper there, notifies after unlocking. Because the
// sleeper count and the queue are read and written under the same mutex, a
// push either sees the sleeper (and wakes it) or happens before the
// sleeper's check of the queue (which then finds the item): no lost wake-up.
#pragma once

#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstddef>
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
  // Stop() was called and the queue is empty. Worker threads only.
  OprBlock* Pop() EXCLUDES(mu_);
  // Wakes every worker; Pop returns nullptr once the queue drains.
  void Stop() EXCLUDES(mu_);

  // The highest priority waiting, or INT_MIN when empty. A hint: read
  // without the lock (relaxed), written under mu_.
  int MaxWaitingPriority() const { return max_priority_.load(std::memory_order_relaxed); }
  // Blocks waiting, a hint for spinning workers and profiling counters.
  std::size_t SizeHint() const { return size_.load(std::memory_order_relaxed); }

 private:
  void EnqueueLocked(OprBlock* b) REQUIRES(mu_);
  OprBlock* DequeueLocked() REQUIRES(mu_);
  void UpdateHintsLocked() REQUIRES(mu_);
  bool EmptyLocked() const REQUIRES(mu_) { return fifo_head_ == nullptr && heap_.empty(); }

  Mutex mu_;
  std::condition_variable cv_;                     // waited on with mu_
  OprBlock* fifo_head_ GUARDED_BY(mu_) = nullptr;  // priority 0, oldest first
  OprBlock* fifo_tail_ GUARDED_BY(mu_) = nullptr;
  std::vector<OprBlock*> heap_ GUARDED_BY(mu_);    // other priorities, max-heap
  int sleepers_ GUARDED_BY(mu_) = 0;
  bool stop_ GUARDED_BY(mu_) = false;
  std::atomic<int> max_priority_{INT_MIN};   // see MaxWaitingPriority
  std::atomic<std::size_t> size_{0};         // see SizeHint
};

}  // namespace depengine::internal
