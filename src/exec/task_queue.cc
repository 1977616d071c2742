#include "exec/task_queue.h"

#include <algorithm>
#include <thread>

namespace depengine::internal {
namespace {
bool LowerPriority(const OprBlock* a, const OprBlock* b) { return a->priority < b->priority; }
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
  if (max_priority_.load(std::memory_order_relaxed) != top) {
    max_priority_.store(top, std::memory_order_relaxed);
  }
}

void TaskQueue::Push(OprBlock* b) { PushBatch(&b, 1); }

void TaskQueue::PushBatch(OprBlock* const* blocks, int n) {
  {
    SpinLockGuard lock(mu_);
    for (int i = 0; i < n; ++i) EnqueueLocked(blocks[i]);
    UpdateHintsLocked();
    size_.fetch_add(static_cast<std::size_t>(n), std::memory_order_seq_cst);
  }
  if (n == 1) {
    WakeIfNobodySpins();
  } else if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard<std::mutex> sync(sleep_mu_); }
    sleep_cv_.notify_all();
  }
}

void TaskQueue::WakeIfNobodySpins() {
  if (spinners_.load(std::memory_order_seq_cst) == 0 &&
      sleepers_.load(std::memory_order_seq_cst) > 0) {
    { std::lock_guard<std::mutex> sync(sleep_mu_); }  // the sleeper is in wait() or saw the item
    sleep_cv_.notify_one();
  }
}

OprBlock* TaskQueue::TryDequeue() {
  SpinLockGuard lock(mu_);
  OprBlock* b = DequeueLocked();
  if (b != nullptr) {
    size_.fetch_sub(1, std::memory_order_relaxed);
    UpdateHintsLocked();
  }
  return b;
}

void TaskQueue::SpinWhileEmpty(int round) {
  for (int i = 0; i < 32 && size_.load(std::memory_order_relaxed) == 0; ++i) SpinLock::Pause();
  if (round % 8 == 7) std::this_thread::yield();
}

void TaskQueue::SleepWhileEmpty() {
  std::unique_lock<std::mutex> lock(sleep_mu_);
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  // One wait: a notify (or a spurious wake-up) sends the worker back to the
  // queue, which it re-checks from the top.
  if (size_.load(std::memory_order_seq_cst) == 0 && !stop_.load(std::memory_order_seq_cst)) {
    sleep_cv_.wait(lock);
  }
  sleepers_.fetch_sub(1, std::memory_order_seq_cst);
}

void TaskQueue::Stop() {
  stop_.store(true, std::memory_order_seq_cst);
  { std::lock_guard<std::mutex> sync(sleep_mu_); }
  sleep_cv_.notify_all();
}

}  // namespace depengine::internal
