#include "exec/task_queue.h"

#include <algorithm>
#include <thread>

// Tests widen the window between a producer's tail exchange and its link:
// tests/exec/task_queue_test.cc builds this file with
// DEPENGINE_TASK_QUEUE_TEST_HOOK and a hook that sometimes yields there.
#ifdef DEPENGINE_TASK_QUEUE_TEST_HOOK
namespace depengine::internal {
void TaskQueueLinkHook();
}
#define DEPENGINE_TASK_QUEUE_LINK_HOOK() TaskQueueLinkHook()
#else
#define DEPENGINE_TASK_QUEUE_LINK_HOOK() \
  do {                                   \
  } while (false)
#endif

namespace depengine::internal {
namespace {
bool LowerPriority(const OprBlock* a, const OprBlock* b) { return a->priority < b->priority; }
}  // namespace

TaskQueue::TaskQueue(std::chrono::microseconds idle_spin)
    : idle_spin_(idle_spin), tail_(&stub_), head_(&stub_) {
  stub_.queue_next = nullptr;
}

void TaskQueue::LinkFifo(OprBlock* first, OprBlock* last) {
  Next(last).store(nullptr, std::memory_order_relaxed);
  // seq_cst: step (a) of the wake-up protocol (task_queue.h). It also
  // releases the chain's contents to whoever links after us, and acquires
  // the predecessor so that linking it is ordered after its push.
  OprBlock* prev = tail_.exchange(last, std::memory_order_seq_cst);
  DEPENGINE_TASK_QUEUE_LINK_HOOK();
  // Until this store, consumers see the queue non-empty but cannot reach
  // `first`; they retry. release: publishes the chain to the consumer.
  Next(prev).store(first, std::memory_order_release);
}

void TaskQueue::PushHeap(OprBlock* b) {
  SpinLockGuard lock(heap_mu_);
  heap_.push_back(b);
  std::push_heap(heap_.begin(), heap_.end(), LowerPriority);
  if (b->profile != nullptr) {
    profiled_in_heap_.store(profiled_in_heap_.load(std::memory_order_relaxed) + 1,
                            std::memory_order_relaxed);
  }
  heap_max_.store(heap_.front()->priority, std::memory_order_relaxed);
  heap_size_.store(static_cast<int>(heap_.size()), std::memory_order_seq_cst);
}

void TaskQueue::Push(OprBlock* b) {
  if (b->priority == 0) {
    if (b->profile != nullptr) profiled_pushed_.fetch_add(1, std::memory_order_relaxed);
    LinkFifo(b, b);
  } else {
    PushHeap(b);
  }
  WakeIfNobodySpins();
}

void TaskQueue::PushBatch(OprBlock* const* blocks, int n) {
  OprBlock* first = nullptr;
  OprBlock* last = nullptr;
  int profiled = 0;
  for (int i = 0; i < n; ++i) {
    OprBlock* b = blocks[i];
    if (b->priority != 0) {
      PushHeap(b);
      continue;
    }
    if (first == nullptr) {
      first = b;
    } else {
      Next(last).store(b, std::memory_order_relaxed);  // private until LinkFifo publishes it
    }
    last = b;
    if (b->profile != nullptr) ++profiled;
  }
  if (first != nullptr) {
    if (profiled > 0) {
      profiled_pushed_.fetch_add(static_cast<std::uint64_t>(profiled), std::memory_order_relaxed);
    }
    LinkFifo(first, last);
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
    { std::lock_guard<std::mutex> sync(sleep_mu_); }  // the sleeper is in wait() or saw the block
    sleep_cv_.notify_one();
  }
}

std::size_t TaskQueue::SizeHint() const {
  const std::uint64_t popped = profiled_popped_.load(std::memory_order_relaxed);
  const std::uint64_t pushed = profiled_pushed_.load(std::memory_order_relaxed);
  const std::size_t fifo = pushed > popped ? static_cast<std::size_t>(pushed - popped) : 0;
  return fifo + static_cast<std::size_t>(profiled_in_heap_.load(std::memory_order_relaxed));
}

OprBlock* TaskQueue::TryDequeue() {
  // Priorities above 0 go first; below 0, only when the FIFO is empty.
  if (heap_max_.load(std::memory_order_relaxed) > 0) {
    if (OprBlock* b = TryDequeueHeap()) return b;
  }
  if (!FifoEmptyHint()) {
    SpinLockGuard lock(consumer_mu_);
    if (OprBlock* b = TryDequeueFifo()) return b;
  }
  return heap_size_.load(std::memory_order_relaxed) > 0 ? TryDequeueHeap() : nullptr;
}

// The next block to be taken was written by its pusher on another core: start
// its two lines on their way while this one runs.
void TaskQueue::PrefetchBlock(const OprBlock* b) {
  if (b == &stub_) return;
  __builtin_prefetch(b);
  __builtin_prefetch(reinterpret_cast<const char*>(b) + 64);
}

OprBlock* TaskQueue::TryDequeueFifo() {
  OprBlock* h = head_.load(std::memory_order_relaxed);
  OprBlock* next = Next(h).load(std::memory_order_acquire);
  if (h == &stub_) {
    if (next == nullptr) return nullptr;  // empty, or the first producer has not linked yet
    h = next;
    head_.store(h, std::memory_order_seq_cst);
    next = Next(h).load(std::memory_order_acquire);
  }
  if (next == nullptr) {
    // h looks like the last block. If a producer already swapped in a newer
    // tail, it has not linked h to it yet: come back later.
    if (tail_.load(std::memory_order_acquire) != h) return nullptr;
    // Put the stub behind h so that h can leave the queue.
    LinkFifo(&stub_, &stub_);
    next = Next(h).load(std::memory_order_acquire);
    if (next == nullptr) return nullptr;  // a producer got between: it links h soon
  }
  head_.store(next, std::memory_order_seq_cst);
  PrefetchBlock(next);
  if (h->profile != nullptr) {
    profiled_popped_.store(profiled_popped_.load(std::memory_order_relaxed) + 1,
                           std::memory_order_relaxed);
  }
  return h;
}

OprBlock* TaskQueue::TryDequeueHeap() {
  SpinLockGuard lock(heap_mu_);
  if (heap_.empty()) return nullptr;
  std::pop_heap(heap_.begin(), heap_.end(), LowerPriority);
  OprBlock* b = heap_.back();
  heap_.pop_back();
  if (b->profile != nullptr) {
    profiled_in_heap_.store(profiled_in_heap_.load(std::memory_order_relaxed) - 1,
                            std::memory_order_relaxed);
  }
  heap_max_.store(heap_.empty() ? INT_MIN : heap_.front()->priority, std::memory_order_relaxed);
  heap_size_.store(static_cast<int>(heap_.size()), std::memory_order_seq_cst);
  return b;
}

void TaskQueue::SpinWhileEmpty(int round) {
  for (int i = 0; i < 32 && EmptyHint(); ++i) SpinLock::Pause();
  if (round % 8 == 7) std::this_thread::yield();
}

void TaskQueue::SleepWhileEmpty() {
  std::unique_lock<std::mutex> lock(sleep_mu_);
  sleeps_.fetch_add(1, std::memory_order_relaxed);
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  // One wait: a notify (or a spurious wake-up) sends the worker back to the
  // queue, which it re-checks from the top.
  if (Empty() && !stop_.load(std::memory_order_seq_cst)) sleep_cv_.wait(lock);
  sleepers_.fetch_sub(1, std::memory_order_seq_cst);
}

void TaskQueue::Stop() {
  stop_.store(true, std::memory_order_seq_cst);
  { std::lock_guard<std::mutex> sync(sleep_mu_); }
  sleep_cv_.notify_all();
}

}  // namespace depengine::internal
