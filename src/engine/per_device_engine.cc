// ThreadedEnginePerDevice: worker pools per device, kept in one table keyed
// by (pool kind, device id); a CPU priority pool shared by all CPU devices;
// copy workers per GPU. Each GPU worker owns a stream on its device, handed
// to its functions in RunContext::stream (gpu::ThreadStream). CPU(0)'s
// normal pool starts with the engine, every other pool at the first push
// that needs it.
#include <array>
#include <atomic>
#include <memory>
#include <string>

#include "engine/engines.h"

namespace depengine::internal {
namespace {

enum PoolKind { kCpuNormal = 0, kGpuNormal = 1, kGpuCopy = 2, kNumPoolKinds = 3 };
constexpr int kMaxDevices = kMaxDevicesPerType;

class PerDeviceEngine final : public ThreadedEngine {
 public:
  explicit PerDeviceEngine(const EngineOptions& options) : ThreadedEngine(options) {
    for (auto& row : table_) {
      for (auto& p : row) p.store(nullptr, std::memory_order_relaxed);
    }
    // The default context's pool, so that a push to it never creates one.
    (void)PoolFor(kCpuNormal, 0);
  }

  IdleCounts WorkerIdleCountsForTesting() override {
    MutexLock lock(create_mu_);
    IdleCounts c;
    for (const auto& pool : owned_) c += pool->queue().IdleCountsForTesting();
    return c;
  }

  ~PerDeviceEngine() override {
    Drain();
    MutexLock lock(create_mu_);
    owned_.clear();  // joins every pool's threads
  }

 protected:
  // Creates the pool at the push, so that a refused thread start reaches the
  // pusher (std::system_error) before anything is queued; Dispatch then only
  // ever finds published pools, and never creates one on a worker.
  void EnsurePool(const Context& ctx, FnProperty prop) override { (void)Route(ctx, prop); }

  void Dispatch(OprBlock* b) override {
    WorkerPool* pool = Route(b->ctx, b->prop());
    if (pool == nullptr) {
      RunInline(b);
    } else {
      DispatchToPool(b, pool);
    }
  }

 private:
  // Where a function of this context and property runs: nullptr for kAsync
  // (inline, on the thread that made it ready).
  WorkerPool* Route(const Context& ctx, FnProperty prop) {
    if (prop == FnProperty::kAsync) return nullptr;
    if (ctx.dev_type != DeviceType::kGPU) {
      return prop == FnProperty::kCPUPrioritized ? PriorityPool() : PoolFor(kCpuNormal, ctx.dev_id);
    }
    const bool copy = prop == FnProperty::kCopyFromGPU || prop == FnProperty::kCopyToGPU;
    return PoolFor(copy ? kGpuCopy : kGpuNormal, ctx.dev_id);
  }

  WorkerPool* PoolFor(PoolKind kind, int dev_id) {
    // acquire: pairs with the release store that publishes a new pool.
    WorkerPool* p = table_[kind][dev_id].load(std::memory_order_acquire);
    return p != nullptr ? p : CreatePool(kind, dev_id);
  }

  WorkerPool* PriorityPool() {
    WorkerPool* p = priority_.load(std::memory_order_acquire);
    if (p != nullptr) return p;
    MutexLock lock(create_mu_);
    p = priority_.load(std::memory_order_relaxed);
    if (p == nullptr) {
      const int n = options().cpu_priority_threads > 0 ? options().cpu_priority_threads : 2;
      owned_.push_back(
          std::make_unique<WorkerPool>("cpu/priority", n, WorkerSpin(),
                                       [this](WorkerPool& pool, int i) { WorkerLoop(pool, i); }));
      p = owned_.back().get();
      priority_.store(p, std::memory_order_release);
    }
    return p;
  }

  WorkerPool* CreatePool(PoolKind kind, int dev_id) {
    MutexLock lock(create_mu_);
    WorkerPool* p = table_[kind][dev_id].load(std::memory_order_relaxed);
    if (p != nullptr) return p;
    const EngineOptions& o = options();
    std::string name;
    int threads = 0;
    switch (kind) {
      case kCpuNormal:
        name = dev_id == 0 ? "cpu/normal" : "cpu" + std::to_string(dev_id) + "/normal";
        threads = o.cpu_worker_threads > 0 ? o.cpu_worker_threads : DefaultCpuWorkers();
        break;
      case kGpuNormal:
        name = "gpu" + std::to_string(dev_id) + "/normal";
        threads = o.gpu_worker_threads > 0 ? o.gpu_worker_threads : 2;
        break;
      default:
        name = "gpu" + std::to_string(dev_id) + "/copy";
        threads = o.gpu_copy_threads > 0 ? o.gpu_copy_threads : 1;
        break;
    }
    // A GPU worker's stream is made on its first function (gpu::ThreadStream).
    owned_.push_back(std::make_unique<WorkerPool>(
        name, threads, WorkerSpin(), [this](WorkerPool& pool, int i) { WorkerLoop(pool, i); }));
    p = owned_.back().get();
    table_[kind][dev_id].store(p, std::memory_order_release);
    return p;
  }

  Mutex create_mu_;  // serializes pool creation
  std::vector<std::unique_ptr<WorkerPool>> owned_ GUARDED_BY(create_mu_);
  // Published pools; written once under create_mu_ (release), read anywhere.
  std::array<std::array<std::atomic<WorkerPool*>, kMaxDevices>, kNumPoolKinds> table_;
  // Like table_: written once under create_mu_ (release), read anywhere
  // (acquire).
  std::atomic<WorkerPool*> priority_{nullptr};
};

}  // namespace

std::unique_ptr<ThreadedEngine> MakePerDeviceEngine(const EngineOptions& options) {
  return std::make_unique<PerDeviceEngine>(options);
}

}  // namespace depengine::internal
