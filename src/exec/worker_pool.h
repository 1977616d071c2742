// WorkerPool: a named set of threads that run the blocks of one TaskQueue.
// The per-thread loop belongs to the engine (it runs continuations and owns
// the device stream), so the pool only owns the queue and the threads.
#pragma once

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "exec/task_queue.h"

namespace depengine::internal {

class WorkerPool {
 public:
  // Starts `nthreads` threads, each running body(*this, index).
  WorkerPool(std::string name, int nthreads, std::function<void(WorkerPool&, int)> body);
  // Stops the queue and joins the threads; blocks still queued are run
  // first (the engine drains before it destroys pools).
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  TaskQueue& queue() { return queue_; }
  // "cpu/normal", "cpu/priority", "gpu0/copy"...: names the pool's threads.
  const std::string& name() const { return name_; }
  int size() const { return static_cast<int>(threads_.size()); }

 private:
  std::string name_;
  TaskQueue queue_;
  std::vector<std::thread> threads_;  // written in the constructor only
};

}  // namespace depengine::internal
