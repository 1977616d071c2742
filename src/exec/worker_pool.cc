#include "exec/worker_pool.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <string>
#include <system_error>
#include <utility>

namespace depengine::internal {
namespace {
// Starts left before LimitThreadStartsForTesting's refusals begin; < 0: no
// limit. Relaxed: tests set it before they create pools, on the same thread.
std::atomic<int> g_thread_starts_left{-1};

void StartThread(std::vector<std::thread>& threads, std::function<void()> run) {
  int left = g_thread_starts_left.load(std::memory_order_relaxed);
  while (left >= 0) {
    if (left == 0) throw std::system_error(EAGAIN, std::generic_category());
    if (g_thread_starts_left.compare_exchange_weak(left, left - 1, std::memory_order_relaxed)) {
      break;
    }
  }
  threads.emplace_back(std::move(run));
}
}  // namespace

std::string WorkerThreadOsName(const std::string& pool_name, int index) {
  // Linux keeps 15 characters of a thread's name. A longer name keeps its
  // whole index, so the threads of one pool stay apart, and loses the end of
  // the pool's name instead.
  constexpr std::size_t kMaxLength = 15;
  // Not "/" + std::to_string(index): GCC 12 warns (-Wrestrict) on it, wrongly.
  char suffix_chars[16];
  std::snprintf(suffix_chars, sizeof suffix_chars, "/%d", index);
  const std::string suffix = suffix_chars;
  if (pool_name.size() + suffix.size() <= kMaxLength) return pool_name + suffix;
  // The suffix is at most 12 characters ("/-2147483648").
  std::string prefix = pool_name.substr(0, kMaxLength - suffix.size());
  if (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  return prefix + suffix;
}

void LimitThreadStartsForTesting(int n) {
  g_thread_starts_left.store(n < 0 ? -1 : n, std::memory_order_relaxed);
}

WorkerPool::WorkerPool(std::string name, int nthreads, std::chrono::microseconds idle_spin,
                       const std::function<void(WorkerPool&, int)>& body)
    : name_(std::move(name)),
      queue_(std::make_unique<TaskQueue>(idle_spin)),
      threads_(std::make_unique<std::vector<std::thread>>()),
      creator_pid_(getpid()) {
  threads_->reserve(static_cast<std::size_t>(nthreads));
  for (int i = 0; i < nthreads; ++i) {
    try {
      StartThread(*threads_, [this, i, body]() {
        // Best effort: a name is a debugging aid (top -H, gdb, perf), and
        // failing to set one changes nothing else.
        (void)pthread_setname_np(pthread_self(), WorkerThreadOsName(name_, i).c_str());
        body(*this, i);
      });
    } catch (...) {
      // The destructor will not run: undo what the constructor did so far.
      queue_->Stop();
      for (auto& t : *threads_) t.join();
      try {
        throw;
      } catch (const std::system_error& e) {
        throw std::system_error(e.code(), "depengine: worker pool '" + name_ +
                                              "' could not start thread " + std::to_string(i + 1) +
                                              " of " + std::to_string(nthreads));
      }
    }
  }
}

WorkerPool::~WorkerPool() {
  if (getpid() != creator_pid_) {
    (void)threads_.release();  // a forked child: the threads stayed in the parent
    (void)queue_.release();
    return;
  }
  queue_->Stop();
  for (auto& t : *threads_) t.join();
}

}  // namespace depengine::internal
