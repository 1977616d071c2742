// CompleteWhenStreamDone on CUDA: records an event on the function's stream,
// queues a stream callback behind it, and hands the event and the function's
// CallbackOnComplete to the process-wide Completer (gpu/completer.h), which
// polls the event and calls the callback.
//
// Why a thread of our own: the engine may run a successor on the thread that
// calls the callback, and CUDA forbids CUDA calls on its callback thread.
// Why events polled, with a stream callback only to wake the completer: a
// stream callback takes about 10 µs to arrive on an H100 where an event
// query sees the same work done in about 1 µs (docs/performance.md, "GPU
// functions"); the completer polls while it makes progress and sleeps, until
// a stream callback wakes it, only after Completer::kSpin without any.
// cudaStreamAddCallback rather than cudaLaunchHostFunc: after a device fault
// CUDA still calls the former, so the completer wakes, and the event's query
// then returns the fault, which fails the function.
#include "depengine/gpu.h"

#if DEPENGINE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "gpu/completer.h"
#endif

namespace depengine {

#if DEPENGINE_HAVE_CUDA
namespace {

using internal::Mutex;
using internal::MutexLock;
using internal::gpu::Completer;

// Recycled events, by device.
class EventPool {
 public:
  static EventPool& Get() {
    static EventPool* const pool = new EventPool();  // never destroyed, as the completer
    return *pool;
  }

  // An event of `dev` to record on a stream of `dev`, made on `dev` whatever
  // the calling thread's current device, which it keeps.
  cudaEvent_t Take(int dev) {
    {
      MutexLock lock(mu_);
      if (static_cast<std::size_t>(dev) < free_.size() && !free_[dev].empty()) {
        cudaEvent_t e = free_[dev].back();
        free_[dev].pop_back();
        return e;
      }
    }
    int current = 0;
    cudaError_t status = cudaGetDevice(&current);
    if (status == cudaSuccess && current != dev) status = cudaSetDevice(dev);
    cudaEvent_t e = nullptr;
    if (status == cudaSuccess) status = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    if (current != dev) cudaSetDevice(current);
    if (status != cudaSuccess) {
      throw std::runtime_error(std::string("CompleteWhenStreamDone: cudaEventCreateWithFlags: ") +
                               cudaGetErrorString(status));
    }
    return e;
  }

  void Give(int dev, cudaEvent_t e) {
    MutexLock lock(mu_);
    if (static_cast<std::size_t>(dev) >= free_.size()) free_.resize(dev + 1);
    free_[dev].push_back(e);
  }

 private:
  Mutex mu_;
  std::vector<std::vector<cudaEvent_t>> free_ GUARDED_BY(mu_);
};

Completer::EventState QueryEvent(void* event, std::string* error) {
  const cudaError_t status = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (status == cudaSuccess) return Completer::EventState::kDone;
  if (status == cudaErrorNotReady) return Completer::EventState::kNotReady;
  *error = std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
  return Completer::EventState::kFailed;
}

void ReleaseEvent(int dev, void* event) {
  EventPool::Get().Give(dev, static_cast<cudaEvent_t>(event));
}

// Never destroyed: a stream callback may arrive while the process exits.
Completer& TheCompleter() {
  static Completer* const completer = new Completer(Completer::Hooks{QueryEvent, ReleaseEvent});
  return *completer;
}

void CUDART_CB OnStreamDone(cudaStream_t, cudaError_t, void*) { TheCompleter().Signal(); }

}  // namespace

void CompleteWhenStreamDone(const RunContext& rctx, CallbackOnComplete done) {
  if (rctx.stream == nullptr) {
    done();
    return;
  }
  auto stream = static_cast<cudaStream_t>(rctx.stream);
  Completer& completer = TheCompleter();  // before the callback can need it
  const int dev = rctx.ctx.dev_id;
  cudaEvent_t event = EventPool::Get().Take(dev);
  cudaError_t e = cudaEventRecord(event, stream);
  if (e == cudaSuccess) e = cudaStreamAddCallback(stream, OnStreamDone, nullptr, 0);
  if (e != cudaSuccess) {
    // No completion is queued; the body's exception fails the function.
    EventPool::Get().Give(dev, event);
    throw std::runtime_error(
        std::string("CompleteWhenStreamDone: cudaEventRecord or cudaStreamAddCallback: ") +
        cudaGetErrorString(e));
  }
  completer.Add(done, dev, event);
}
#else
void CompleteWhenStreamDone(const RunContext&, CallbackOnComplete done) {
  // Without CUDA no function has a stream: nothing is queued anywhere.
  done();
}
#endif

}  // namespace depengine
