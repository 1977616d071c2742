// Hold: keeps vars busy until released, for tests and stress programs.
//
// An async function that takes its vars and keeps its callback until
// Release(). Works on every engine, including the naive one, where a sync
// function that blocks would block the pushing thread. Release() never
// blocks; if the function has not started yet, it completes as soon as it
// starts. The destructor releases, so a failing check never leaves the
// engine waiting forever.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "depengine/engine.h"
#include "wait_timeout.h"

namespace depengine::support {

class Hold {
 public:
  Hold(Engine& engine, const std::vector<VarHandle>& reads, const std::vector<VarHandle>& writes,
       Context ctx = Context::CPU(), FnProperty prop = FnProperty::kNormal, int priority = 0)
      : state_(std::make_shared<State>()) {
    engine.PushAsync(
        [s = state_](RunContext, CallbackOnComplete cb) {
          std::unique_lock<std::mutex> lock(s->mu);
          s->started = true;
          s->cv.notify_all();
          if (s->release_requested) {
            std::exception_ptr err = s->error;
            lock.unlock();
            cb(err);
            return;
          }
          s->cb = cb;
        },
        ctx, reads, writes, prop, priority, "Hold");
  }
  ~Hold() { Release(); }
  Hold(const Hold&) = delete;
  Hold& operator=(const Hold&) = delete;

  // True once the function runs (its vars are then held).
  bool WaitStarted(std::chrono::milliseconds timeout = kWaitTimeout) {
    std::unique_lock<std::mutex> lock(state_->mu);
    return state_->cv.wait_for(lock, timeout, [&] { return state_->started; });
  }
  bool Started() {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->started;
  }
  // Finishes the function (with `error` if set). Idempotent.
  void Release(std::exception_ptr error = nullptr) {
    std::unique_lock<std::mutex> lock(state_->mu);
    if (state_->release_requested) return;
    state_->release_requested = true;
    state_->error = error;
    if (!state_->started) return;  // it completes itself when it starts
    CallbackOnComplete cb = state_->cb;
    lock.unlock();
    cb(error);
  }

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool started = false;            // guarded by mu
    bool release_requested = false;  // guarded by mu
    std::exception_ptr error;        // guarded by mu
    CallbackOnComplete cb;           // guarded by mu
  };
  std::shared_ptr<State> state_;
};

}  // namespace depengine::support
