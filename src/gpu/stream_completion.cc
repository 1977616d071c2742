// CompleteWhenStreamDone: one process-wide completer thread finishes async
// GPU functions. Each call records an event on the function's stream and
// hands the completer the event and the function's CallbackOnComplete; the
// completer polls its events and calls the callbacks of those done.
//
// Why a thread of our own: the engine may run a successor on the thread that
// calls the callback, and CUDA forbids CUDA calls on its callback thread.
// Why events polled, with a stream callback only to wake the completer: a
// stream callback takes about 10 µs to arrive on an H100 where an event
// query sees the same work done in about 1 µs (docs/performance.md, "GPU
// functions"). So the completer polls while it makes progress, for up to
// kSpin after the last, then sleeps until a stream callback (or a new
// event) wakes it: short GPU steps finish fast, long kernels cost no spinning
// core. cudaStreamAddCallback rather than cudaLaunchHostFunc: after a device
// fault CUDA still calls the former, so the completer wakes, and the event's
// query then returns the fault, which fails the function.
#include "depengine/gpu.h"

#if DEPENGINE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <chrono>
#include <condition_variable>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#endif

namespace depengine {

#if DEPENGINE_HAVE_CUDA
namespace {

using internal::Mutex;
using internal::MutexLock;

struct PendingCompletion {
  CallbackOnComplete done;
  int dev_id;
  cudaEvent_t event;
};

class Completer {
 public:
  // Never destroyed: a stream callback may still arrive while the process
  // exits, and the thread must outlive it. Made at the first use.
  static Completer& Get() {
    static Completer* const completer = new Completer();
    return *completer;
  }

  // An event of `dev` to record on a stream of `dev`.
  cudaEvent_t TakeEvent(int dev) {
    {
      MutexLock lock(mu_);
      if (static_cast<std::size_t>(dev) < free_events_.size() && !free_events_[dev].empty()) {
        cudaEvent_t e = free_events_[dev].back();
        free_events_[dev].pop_back();
        return e;
      }
    }
    // Made on `dev`, whatever the calling thread's device, which it keeps.
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

  void GiveBackEvent(int dev, cudaEvent_t e) {
    MutexLock lock(mu_);
    if (static_cast<std::size_t>(dev) >= free_events_.size()) free_events_.resize(dev + 1);
    free_events_[dev].push_back(e);
  }

  void Add(PendingCompletion* p) {
    {
      MutexLock lock(mu_);
      added_.push_back(p);
    }
    cv_.notify_one();
  }

  // On CUDA's callback thread: no CUDA calls, only the wake-up.
  void Signal() {
    {
      MutexLock lock(mu_);
      signaled_ = true;
    }
    cv_.notify_one();
  }

 private:
  // How long the completer polls after its last finished function before it
  // sleeps until a stream callback: a few short GPU steps' worth.
  static constexpr std::chrono::microseconds kSpin{50};

  Completer() {
    std::thread([this] { Run(); }).detach();
  }

  void Run() {
    using Clock = std::chrono::steady_clock;
    std::vector<PendingCompletion*> pending;  // only this thread's
    Clock::time_point last_progress = Clock::now();
    for (;;) {
      {
        MutexLock lock(mu_);
        if (pending.empty() || Clock::now() - last_progress > kSpin) {
          lock.Wait(cv_, [this]() REQUIRES(mu_) { return !added_.empty() || signaled_; });
          last_progress = Clock::now();
        }
        // A stream callback that fired before this point follows its event's
        // work, so the queries below see that event done; one after it sets
        // signaled_ again, and the next sleep does not start.
        signaled_ = false;
        pending.insert(pending.end(), added_.begin(), added_.end());
        added_.clear();
      }
      bool progress = false;
      for (std::size_t i = 0; i < pending.size();) {
        const cudaError_t status = cudaEventQuery(pending[i]->event);
        if (status == cudaErrorNotReady) {
          ++i;
          continue;
        }
        Finish(pending[i], status);
        pending[i] = pending.back();
        pending.pop_back();
        progress = true;
      }
      if (progress) {
        last_progress = Clock::now();
      } else {
        internal::SpinLock::Pause();
      }
    }
  }

  void Finish(PendingCompletion* p, cudaError_t status) {
    std::exception_ptr error;
    if (status == cudaSuccess) {
      GiveBackEvent(p->dev_id, p->event);
    } else {
      // A fault: the context is gone, and so is the event with it.
      error = std::make_exception_ptr(std::runtime_error(
          "CompleteWhenStreamDone: the stream of gpu(" + std::to_string(p->dev_id) + ") reported " +
          cudaGetErrorName(status) + ": " + cudaGetErrorString(status)));
    }
    try {
      p->done(error);
    } catch (...) {
      // A callback already called (CallbackOnComplete throws then) is the
      // caller's bug, and has nowhere to go from this thread.
    }
    delete p;
  }

  Mutex mu_;
  std::condition_variable cv_;                             // added_ grew, or signaled_ was set
  std::vector<PendingCompletion*> added_ GUARDED_BY(mu_);  // not yet seen by the thread
  bool signaled_ GUARDED_BY(mu_) = false;  // a stream callback ran since the thread looked
  std::vector<std::vector<cudaEvent_t>> free_events_ GUARDED_BY(mu_);  // by device
};

void CUDART_CB OnStreamDone(cudaStream_t, cudaError_t, void*) { Completer::Get().Signal(); }

std::runtime_error CudaError(const char* call, cudaError_t e) {
  return std::runtime_error(std::string("CompleteWhenStreamDone: ") + call + ": " +
                            cudaGetErrorString(e));
}

}  // namespace

void CompleteWhenStreamDone(const RunContext& rctx, CallbackOnComplete done) {
  if (rctx.stream == nullptr) {
    done();
    return;
  }
  auto stream = static_cast<cudaStream_t>(rctx.stream);
  Completer& completer = Completer::Get();
  const int dev = rctx.ctx.dev_id;
  cudaEvent_t event = completer.TakeEvent(dev);
  cudaError_t e = cudaEventRecord(event, stream);
  if (e == cudaSuccess) e = cudaStreamAddCallback(stream, OnStreamDone, nullptr, 0);
  if (e != cudaSuccess) {
    // Nothing waits on the event if the callback was refused: no completion
    // is queued, and the body's exception fails the function.
    completer.GiveBackEvent(dev, event);
    throw CudaError("cudaEventRecord or cudaStreamAddCallback", e);
  }
  completer.Add(new PendingCompletion{done, dev, event});
}
#else
void CompleteWhenStreamDone(const RunContext&, CallbackOnComplete done) {
  // Without CUDA no function has a stream: nothing is queued anywhere.
  done();
}
#endif

}  // namespace depengine
