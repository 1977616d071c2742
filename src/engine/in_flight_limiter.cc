#include "engine/in_flight_limiter.h"

#include <algorithm>
#include <chrono>

#include "common/seq_cst_fence.h"

namespace depengine::internal {
namespace {

// A waiting pusher sums the releases again this often even if nobody woke
// it: the periodic wake-up of Release(WorkerCounter&) reads `waiters_`
// relaxed and may miss a pusher that has just started to wait.
constexpr std::chrono::milliseconds kRecheck{1};

}  // namespace

InFlightLimiter::InFlightLimiter(std::size_t max)
    : max_(max),
      // A quarter of the bound: a woken pusher finds room for a batch of
      // pushes (one wake-up per batch, not per function), while the
      // functions still queued keep the workers busy until it refills.
      notify_every_(static_cast<std::uint32_t>(
          std::clamp<std::size_t>(max / 4, 1, kNotifyEvery))) {}

void InFlightLimiter::Reserve(bool may_wait) {
  if (!may_wait) {
    reserved_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::uint64_t r = reserved_.load(std::memory_order_relaxed);
  for (;;) {
    // Signed: a sum read after `r` may exceed it (others' units finished).
    const std::uint64_t seen = released_seen_.load(std::memory_order_relaxed);
    if (static_cast<std::int64_t>(r - seen) < static_cast<std::int64_t>(max_)) {
      // Units taken after this one: r + 1, finished: at least `seen`.
      if (reserved_.compare_exchange_weak(r, r + 1, std::memory_order_relaxed)) return;
      continue;  // r now holds the current count
    }
    const std::uint64_t sum = ReleasedSum();
    RaiseSeen(sum);
    if (static_cast<std::int64_t>(r - sum) < static_cast<std::int64_t>(max_)) continue;
    WaitForRoom();
    r = reserved_.load(std::memory_order_relaxed);
  }
}

void InFlightLimiter::WaitForRoom() {
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  // Pairs with the fence in IdleNotify (and Release's seq_cst add): either
  // the releaser sees this waiter, or the sums below see its release.
  SeqCstFence();
  {
    MutexLock lock(mu_);
    for (;;) {
      const std::uint64_t sum = ReleasedSumLocked();
      const std::uint64_t r = reserved_.load(std::memory_order_relaxed);
      if (static_cast<std::int64_t>(r - sum) < static_cast<std::int64_t>(max_)) {
        RaiseSeen(sum);
        break;
      }
      lock.WaitFor(cv_, kRecheck);
    }
  }
  waiters_.fetch_sub(1, std::memory_order_relaxed);
}

void InFlightLimiter::Release() {
  external_released_.fetch_add(1, std::memory_order_seq_cst);
  if (waiters_.load(std::memory_order_seq_cst) > 0) Notify();
}

void InFlightLimiter::IdleNotify() {
  SeqCstFence();  // see WaitForRoom
  if (waiters_.load(std::memory_order_relaxed) > 0) Notify();
}

void InFlightLimiter::Notify() {
  // Taking the mutex orders this after a waiter's check or before it: a
  // waiter that found no room is inside wait() by the time we get it.
  { MutexLock lock(mu_); }
  cv_.notify_all();
}

void InFlightLimiter::Register(WorkerCounter& c) {
  MutexLock lock(mu_);
  workers_.push_back(&c);
}

void InFlightLimiter::Unregister(WorkerCounter& c) {
  {
    MutexLock lock(mu_);
    retired_released_ += c.released.load(std::memory_order_relaxed);
    workers_.erase(std::find(workers_.begin(), workers_.end(), &c));
  }
  IdleNotify();
}

std::uint64_t InFlightLimiter::ReleasedSumLocked() {
  std::uint64_t sum = retired_released_ + external_released_.load(std::memory_order_seq_cst);
  for (const WorkerCounter* c : workers_) sum += c->released.load(std::memory_order_relaxed);
  return sum;
}

std::uint64_t InFlightLimiter::ReleasedSum() {
  MutexLock lock(mu_);
  return ReleasedSumLocked();
}

void InFlightLimiter::RaiseSeen(std::uint64_t sum) {
  std::uint64_t seen = released_seen_.load(std::memory_order_relaxed);
  while (seen < sum &&
         !released_seen_.compare_exchange_weak(seen, sum, std::memory_order_relaxed)) {
  }
}

}  // namespace depengine::internal
