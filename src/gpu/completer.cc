#include "gpu/completer.h"

#include <exception>
#include <stdexcept>

namespace depengine::internal::gpu {

Completer::Completer(Hooks hooks) : hooks_(hooks), thread_([this] { Run(); }) {}

Completer::~Completer() {
  {
    MutexLock lock(mu_);
    stop_ = true;
    cv_.notify_one();
  }
  thread_.join();
}

// Both notify under the mutex: once a caller lets go of it, it touches the
// completer no more, so a completer whose owner destroys it right after
// (a test's) is never notified through freed memory.
void Completer::Add(CallbackOnComplete done, int dev, void* event) {
  MutexLock lock(mu_);
  added_.push_back(Pending{done, dev, event});
  cv_.notify_one();
}

void Completer::Signal() {
  MutexLock lock(mu_);
  signaled_ = true;
  cv_.notify_one();
}

void Completer::Run() {
  using Clock = std::chrono::steady_clock;
  std::vector<Pending> pending;  // this thread's alone
  Clock::time_point last_progress = Clock::now();
  std::string error;
  for (;;) {
    {
      MutexLock lock(mu_);
      if (pending.empty() || Clock::now() - last_progress > kSpin) {
        if (stop_ && pending.empty() && added_.empty()) return;
        // Once stopped it sleeps no more: it polls what is left, and ends.
        lock.Wait(cv_, [this]() REQUIRES(mu_) { return !added_.empty() || signaled_ || stop_; });
        last_progress = Clock::now();
      }
      // No wake-up is lost: a Signal made before this point follows its
      // event's completion (a stream callback runs after the work before it,
      // the event included), so the queries below see that event done; one
      // made after it sets signaled_ again, and the next sleep does not
      // start.
      signaled_ = false;
      pending.insert(pending.end(), added_.begin(), added_.end());
      added_.clear();
    }
    bool progress = false;
    for (std::size_t i = 0; i < pending.size();) {
      const EventState state = hooks_.query(pending[i].event, &error);
      if (state == EventState::kNotReady) {
        ++i;
        continue;
      }
      Finish(pending[i], state, error);
      pending[i] = pending.back();
      pending.pop_back();
      progress = true;
    }
    if (progress) {
      last_progress = Clock::now();
    } else {
      SpinLock::Pause();
    }
  }
}

void Completer::Finish(const Pending& p, EventState state, const std::string& error) {
  std::exception_ptr failure;
  if (state == EventState::kDone) {
    hooks_.release(p.dev, p.event);
  } else {
    // A fault: the device's context is gone, and the event with it.
    failure =
        std::make_exception_ptr(std::runtime_error("CompleteWhenStreamDone: the stream of gpu(" +
                                                   std::to_string(p.dev) + ") reported " + error));
  }
  try {
    p.done(failure);
  } catch (...) {
    // A callback already called (CallbackOnComplete throws then) is the
    // caller's bug, and has nowhere to go from this thread.
  }
}

}  // namespace depengine::internal::gpu
