#include "exec/worker_pool.h"

#include <unistd.h>

#include <utility>

namespace depengine::internal {

WorkerPool::WorkerPool(std::string name, int nthreads, std::function<void(WorkerPool&, int)> body)
    : name_(std::move(name)),
      threads_(std::make_unique<std::vector<std::thread>>()),
      creator_pid_(getpid()) {
  threads_->reserve(static_cast<std::size_t>(nthreads));
  for (int i = 0; i < nthreads; ++i) {
    threads_->emplace_back([this, i, body]() { body(*this, i); });
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
