// WorkerPool: a named set of threads that run the blocks of one TaskQueue.
// The per-thread loop belongs to the engine (it runs continuations and owns
// the device stream), so the pool only owns the queue and the threads.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "exec/task_queue.h"

namespace depengine::internal {

class WorkerPool {
 public:
  // Starts `nthreads` threads, each running body(*this, index). When a
  // thread cannot be started (the system refuses it: EAGAIN, no memory for
  // its stack), stops and joins the threads already started and raises
  // std::system_error naming the pool and the thread. An idle worker polls
  // the queue for `idle_spin` before it sleeps (TaskQueue).
  WorkerPool(std::string name, int nthreads, std::chrono::microseconds idle_spin,
             const std::function<void(WorkerPool&, int)>& body);
  // Stops the queue and joins the threads; blocks still queued are run
  // first (the engine drains before it destroys pools).
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  TaskQueue& queue() { return *queue_; }
  const TaskQueue& queue() const { return *queue_; }
  // "cpu/normal", "cpu/priority", "gpu0/copy"...: names the pool's threads.
  const std::string& name() const { return name_; }
  int size() const { return static_cast<int>(threads_->size()); }

 private:
  std::string name_;
  // By pointer, like threads_: a forked child leaks it (its condition
  // variable may have had waiters in the parent, and destroying it would block).
  std::unique_ptr<TaskQueue> queue_;
  // Written in the constructor only. Held by pointer so that a forked child,
  // which inherits the object but not the threads, can leak it instead of
  // joining threads that do not exist there.
  std::unique_ptr<std::vector<std::thread>> threads_;
  const pid_t creator_pid_;
};

// The name a pool's thread `index` gets from the OS (pthread_setname_np, as
// shown by top -H, gdb and perf): "<pool name>/<index>", the profiler's row
// name, cut to Linux's 15 characters by shortening the pool's name.
std::string WorkerThreadOsName(const std::string& pool_name, int index);

// For tests: after `n` more thread starts (in any pool), every start fails
// as if the system refused it, until called again with n < 0 (the default:
// no limit). Lets tests reach the refusal paths deterministically.
void LimitThreadStartsForTesting(int n);

}  // namespace depengine::internal
