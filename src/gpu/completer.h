// The thread that finishes async GPU functions (CompleteWhenStreamDone): it
// polls the events of its pending completions and calls the callbacks of
// those done, in any order. CUDA-free: it sees events only through Hooks,
// so that tests/gpu/completer_test.cc checks its protocol on any machine,
// under TSan too. stream_completion.cc gives it CUDA's events.
#pragma once

#include <chrono>
#include <condition_variable>
#include <string>
#include <thread>
#include <vector>

#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "depengine/engine.h"

namespace depengine::internal::gpu {

class Completer {
 public:
  enum class EventState { kDone, kNotReady, kFailed };
  struct Hooks {
    // The state of `event`; for kFailed, the error's text in *error.
    EventState (*query)(void* event, std::string* error);
    // A done event, the completer's no more (back to a pool, say).
    void (*release)(int dev, void* event);
  };

  // How long the thread polls after its last finished function before it
  // sleeps until Signal (or Add): a few short GPU steps' worth.
  static constexpr std::chrono::microseconds kSpin{50};

  // Starts the thread.
  explicit Completer(Hooks hooks);
  // Polls until every completion added has finished, then joins the thread.
  // Nothing may call Add or Signal once it started. (The process-wide one is
  // never destroyed: a stream callback may call Signal while the process
  // exits.)
  ~Completer();
  Completer(const Completer&) = delete;
  Completer& operator=(const Completer&) = delete;

  // Calls `done` once `event` (of device `dev`) is done, with the event's
  // error if it failed. Any thread.
  void Add(CallbackOnComplete done, int dev, void* event);
  // Something was done: wakes the thread if it sleeps. Any thread, CUDA's
  // callback thread too (it takes only the mutex).
  void Signal();

 private:
  struct Pending {
    CallbackOnComplete done;
    int dev;
    void* event;
  };

  void Run();
  void Finish(const Pending& p, EventState state, const std::string& error);

  const Hooks hooks_;
  Mutex mu_;
  std::condition_variable cv_;  // added_ grew, signaled_ was set, or stop_; notified under mu_
  std::vector<Pending> added_ GUARDED_BY(mu_);  // not yet seen by the thread
  bool signaled_ GUARDED_BY(mu_) = false;       // a Signal since the thread last looked
  bool stop_ GUARDED_BY(mu_) = false;           // the destructor waits to join
  std::thread thread_;                          // last: started once the rest exists
};

}  // namespace depengine::internal::gpu
