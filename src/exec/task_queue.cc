#include "exec/task_queue.h"

#include <algorithm>
#include <thread>

namespace depengine::internal {
namespace {
bool LowerPriority(const OprBlock* a, const OprBlock* b) { return a->priority < b->priority; }
// Spins before a worker sleeps: a short wait is far cheaper than a futex
// round trip when work arrives at a high rate.
constexpr int kSpinRounds = 64;
}  // namespace

void TaskQueue::EnqueueLocked(OprBlock* b) {
  if (b->priority == 0) {
    b->queue_next = nullptr;
    if (fifo_tail_ == nullptr) {
      fifo_head_ = fifo_tail_ = b;
    } else {
      fifo_tail_->queue_next = b;
      fifo_tail_ = b;
    }
  } else {
    heap_.push_back(b);
    std::push_heap(heap_.begin(), heap_.end(), LowerPriority);
  }
}

OprBlock* TaskQueue::DequeueLocked() {
  const bool heap_first = !heap_.empty() && (heap_.front()->priority > 0 || fifo_head_ == nullptr);
  if (heap_first) {
    std::pop_heap(heap_.begin(), heap_.end(), LowerPriority);
    OprBlock* b = heap_.back();
    heap_.pop_back();
    return b;
  }
  OprBlock* b = fifo_head_;
  if (b == nullptr) return nullptr;
  fifo_head_ = b->queue_next;
  if (fifo_head_ == nullptr) fifo_tail_ = nullptr;
  return b;
}

void TaskQueue::UpdateHintsLocked() {
  int top = INT_MIN;
  if (fifo_head_ != nullptr) top = 0;
  if (!heap_.empty()) top = std::max(top, heap_.front()->priority);
  max_priority_.store(top, std::memory_order_relaxed);
}

void TaskQueue::Push(OprBlock* b) {
  bool wake;
  {
    MutexLock lock(mu_);
    EnqueueLocked(b);
    size_.fetch_add(1, std::memory_order_relaxed);
    UpdateHintsLocked();
    wake = sleepers_ > 0;
  }
  if (wake) cv_.notify_one();
}

void TaskQueue::PushBatch(OprBlock* const* blocks, int n) {
  int wake;
  {
    MutexLock lock(mu_);
    for (int i = 0; i < n; ++i) EnqueueLocked(blocks[i]);
    size_.fetch_add(static_cast<std::size_t>(n), std::memory_order_relaxed);
    UpdateHintsLocked();
    wake = std::min(sleepers_, n);
  }
  if (wake == 1) {
    cv_.notify_one();
  } else if (wake > 1) {
    cv_.notify_all();
  }
}

OprBlock* TaskQueue::Pop() {
  for (int round = 0;; ++round) {
    if (round < kSpinRounds) {
      if (size_.load(std::memory_order_relaxed) == 0) {
        for (int i = 0; i < 32 && size_.load(std::memory_order_relaxed) == 0; ++i) SpinLock::Pause();
        if (round % 8 == 7) std::this_thread::yield();
        continue;
      }
    }
    MutexLock lock(mu_);
    if (EmptyLocked()) {
      if (stop_) return nullptr;
      if (round < kSpinRounds) continue;
      ++sleepers_;
      lock.Wait(cv_, [this]() REQUIRES(mu_) { return !EmptyLocked() || stop_; });
      --sleepers_;
      if (EmptyLocked()) return nullptr;  // stopped
    }
    OprBlock* b = DequeueLocked();
    size_.fetch_sub(1, std::memory_order_relaxed);
    UpdateHintsLocked();
    return b;
  }
}

void TaskQueue::Stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

}  // namespace depengine::internal
