// ThreadedEngine's checks of its callers' input: each names the call and the
// problem in its exception (std::invalid_argument), before anything is
// queued.
#include <stdexcept>
#include <string>

#include "engine/threaded_engine.h"
#include "engine/threaded_engine_impl.h"
#include "gpu/device.h"

namespace depengine::internal {

void ThreadedEngine::CheckContext(const Context& ctx, const char* call) const {
  switch (ctx.dev_type) {
    case DeviceType::kCPU:
    case DeviceType::kCPUPinned:
      if (ctx.dev_id < 0 || ctx.dev_id >= kMaxDevicesPerType) {
        const char* type = ctx.dev_type == DeviceType::kCPU ? "CPU" : "CPUPinned";
        throw std::invalid_argument(
            Named(call, std::string(type) + " dev_id " + std::to_string(ctx.dev_id) +
                            " is out of range [0, " + std::to_string(kMaxDevicesPerType) + ")"));
      }
      return;
    case DeviceType::kGPU:
      if (ctx.dev_id < 0 || ctx.dev_id >= gpu_count_ || ctx.dev_id >= kMaxDevicesPerType) {
        std::string why;
        if (!gpu::Built() && options_.simulated_gpus == 0) {
          why =
              "depengine was built without GPU support (CUDA not found) and no simulated GPUs "
              "are configured (EngineOptions::simulated_gpus)";
        } else {
          why = std::to_string(gpu_count_) + " GPU(s) available, at most " +
                std::to_string(kMaxDevicesPerType) + " supported";
        }
        throw std::invalid_argument(Named(
            call, "GPU context gpu(" + std::to_string(ctx.dev_id) + ") is not usable: " + why));
      }
      return;
  }
  throw std::invalid_argument(
      Named(call, "unknown DeviceType " + std::to_string(static_cast<int>(ctx.dev_type))));
}

void ThreadedEngine::ThrowBadPriority(int priority, const char* call) {
  throw std::invalid_argument(Named(call, "priority " + std::to_string(priority) +
                                              " is outside [kMinPriority, kMaxPriority] = [" +
                                              std::to_string(kMinPriority) + ", " +
                                              std::to_string(kMaxPriority) + "]"));
}

void ThreadedEngine::ThrowTooManyVars(std::size_t entries, const char* call) {
  throw std::invalid_argument(Named(call, "too many vars (" + std::to_string(entries) +
                                              "); at most " + std::to_string(OprBlock::kMaxVars)));
}

void ThreadedEngine::CheckVar(VarHandle v, const char* call) const {
  if (v == nullptr) throw std::invalid_argument(Named(call, "null var"));
  if (v->magic.load(std::memory_order_relaxed) != Var::kLive) {
    throw std::invalid_argument(Named(call, "var was deleted (or is not a var)"));
  }
  if (v->engine != this) {
    // Vars of all engines share one pool: a handle deleted here may now name
    // another engine's var.
    throw std::invalid_argument(
        Named(call, "var belongs to another engine (or was deleted and its memory reused)"));
  }
}

void ThreadedEngine::CheckLiveVar(VarHandle v, const char* call) const {
  CheckVar(v, call);
  SpinLockGuard g(v->push_lock);
  if (v->deleted.load(std::memory_order_relaxed)) {
    throw std::invalid_argument(Named(call, "var was deleted"));
  }
}

}  // namespace depengine::internal
