// ThreadedEnginePooled: one normal queue and one copy queue, each with its
// own threads, shared by every device. kAsync functions run where they
// become ready.
#include <string>
#include <thread>

#include "engine/engines.h"

namespace depengine::internal {
namespace {

class PooledEngine final : public ThreadedEngine {
 public:
  explicit PooledEngine(const EngineOptions& options)
      : ThreadedEngine(options),
        normal_(std::make_unique<WorkerPool>(
            "pooled/normal",
            options.cpu_worker_threads > 0 ? options.cpu_worker_threads : DefaultCpuWorkers(),
            WorkerSpin(), [this](WorkerPool& pool, int i) { WorkerLoop(pool, i); })),
        copy_(std::make_unique<WorkerPool>(
            "pooled/copy", options.gpu_copy_threads > 0 ? options.gpu_copy_threads : 1,
            WorkerSpin(), [this](WorkerPool& pool, int i) { WorkerLoop(pool, i); })) {}

  IdleCounts WorkerIdleCountsForTesting() override {
    IdleCounts c;
    for (const WorkerPool* pool : {normal_.get(), copy_.get()})
      c += pool->queue().IdleCountsForTesting();
    return c;
  }

  ~PooledEngine() override {
    Drain();
    normal_.reset();
    copy_.reset();
  }

 protected:
  void Dispatch(OprBlock* b) override {
    switch (b->prop()) {
      case FnProperty::kAsync:
        RunInline(b);
        return;
      case FnProperty::kCopyFromGPU:
      case FnProperty::kCopyToGPU:
        DispatchToPool(b, copy_.get());
        return;
      default:
        DispatchToPool(b, normal_.get());
        return;
    }
  }

 private:
  // Made by the constructor, before any push can dispatch, and read by
  // Dispatch on any thread; reset only by the destructor, after Drain, when
  // nothing dispatches any more.
  std::unique_ptr<WorkerPool> normal_;
  std::unique_ptr<WorkerPool> copy_;
};

}  // namespace

int DefaultCpuWorkers() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 2 : static_cast<int>(n);
}

std::unique_ptr<ThreadedEngine> MakePooledEngine(const EngineOptions& options) {
  return std::make_unique<PooledEngine>(options);
}

}  // namespace depengine::internal
