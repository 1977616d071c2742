// CompleteWhenStreamDone: a CUDA stream callback hands the function's
// CallbackOnComplete to one process-wide completer thread, which calls it.
// The stream callback itself only queues (CUDA forbids CUDA calls there, and
// what a completion runs inline may make some); cudaStreamAddCallback, not
// cudaLaunchHostFunc, because it is still called, with the error, after a
// device fault, so a faulted function finishes failed instead of never.
#include "depengine/gpu.h"

#if DEPENGINE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <condition_variable>
#include <deque>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "common/mutex.h"
#endif

namespace depengine {

#if DEPENGINE_HAVE_CUDA
namespace {

struct PendingCompletion {
  CallbackOnComplete done;
  int dev_id;
  cudaError_t status = cudaSuccess;  // set by the stream callback
};

class Completer {
 public:
  // Never destroyed: a stream callback may still arrive while the process
  // exits, and the thread must outlive it. Made at the first use.
  static Completer& Get() {
    static Completer* const completer = new Completer();
    return *completer;
  }

  // On CUDA's callback thread: queue only.
  void Add(PendingCompletion* p) {
    {
      internal::MutexLock lock(mu_);
      ready_.push_back(p);
    }
    cv_.notify_one();
  }

 private:
  Completer() {
    std::thread([this] { Run(); }).detach();
  }

  void Run() {
    for (;;) {
      PendingCompletion* p;
      {
        internal::MutexLock lock(mu_);
        lock.Wait(cv_, [this]() REQUIRES(mu_) { return !ready_.empty(); });
        p = ready_.front();
        ready_.pop_front();
      }
      std::exception_ptr error;
      if (p->status != cudaSuccess) {
        error = std::make_exception_ptr(std::runtime_error(
            "CompleteWhenStreamDone: the stream of gpu(" + std::to_string(p->dev_id) +
            ") reported " + cudaGetErrorName(p->status) + ": " + cudaGetErrorString(p->status)));
      }
      try {
        p->done(error);
      } catch (...) {
        // A callback already called (CallbackOnComplete throws then) is the
        // caller's bug, and has nowhere to go from this thread.
      }
      delete p;
    }
  }

  internal::Mutex mu_;
  std::condition_variable cv_;
  std::deque<PendingCompletion*> ready_ GUARDED_BY(mu_);
};

void CUDART_CB OnStreamDone(cudaStream_t, cudaError_t status, void* data) {
  auto* p = static_cast<PendingCompletion*>(data);
  p->status = status;
  Completer::Get().Add(p);
}

}  // namespace

void CompleteWhenStreamDone(const RunContext& rctx, CallbackOnComplete done) {
  if (rctx.stream == nullptr) {
    done();
    return;
  }
  Completer::Get();  // started before any stream callback can need it
  auto* p = new PendingCompletion{std::move(done), rctx.ctx.dev_id};
  const cudaError_t e =
      cudaStreamAddCallback(static_cast<cudaStream_t>(rctx.stream), OnStreamDone, p, 0);
  if (e != cudaSuccess) {
    delete p;
    throw std::runtime_error(std::string("CompleteWhenStreamDone: cudaStreamAddCallback: ") +
                             cudaGetErrorString(e));
  }
}
#else
void CompleteWhenStreamDone(const RunContext&, CallbackOnComplete done) {
  // Without CUDA no function has a stream: nothing is queued anywhere.
  done();
}
#endif

}  // namespace depengine
