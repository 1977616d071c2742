// Shared test support: the engine fixture parameterized over engine kinds
// and worker counts, and bounded synchronization helpers.
//
// Rules the tests follow:
// - Every wait is bounded (kTimeout), so a deadlock fails a test instead of
//   hanging it; ctest adds a per-test TIMEOUT on top.
// - No sleep is used to order anything: ordering comes from Events, Counters
//   and Rendezvous. The only timed waits that are expected to expire are the
//   "quiet" checks (ExpectQuiet), which assert that something does NOT happen
//   within kQuiet; they can fail, never pass wrongly when the engine is right.
// - Data written and read by engine functions are plain, non-atomic
//   variables on purpose: ThreadSanitizer then proves the ordering.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "depengine/engine.h"
#include "hold.h"

namespace depengine::test {

using namespace std::chrono_literals;

// How long a bounded wait waits before it reports failure (the same bound
// as Hold's).
inline constexpr std::chrono::milliseconds kTimeout = support::kWaitTimeout;
// How long a "must not happen" check watches.
inline constexpr std::chrono::milliseconds kQuiet{50};

// A one-shot event: Notify() once, WaitFor() from any number of threads.
class Event {
 public:
  // Notifies under the lock: a waiter may destroy the Event as soon as it
  // sees `set_`, so nothing may touch the Event after the unlock.
  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    set_ = true;
    cv_.notify_all();
  }
  // Returns true once notified, false after `timeout`.
  bool WaitFor(std::chrono::milliseconds timeout = kTimeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return set_; });
  }
  bool IsSet() {
    std::lock_guard<std::mutex> lock(mu_);
    return set_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool set_ = false;  // guarded by mu_
};

// A counter that threads can wait on.
class Counter {
 public:
  int Add(int n = 1) {
    std::lock_guard<std::mutex> lock(mu_);  // notify under it: see Event::Notify
    value_ += n;
    cv_.notify_all();
    return value_;
  }
  int Get() {
    std::lock_guard<std::mutex> lock(mu_);
    return value_;
  }
  // Returns true once the value is at least `n`, false after `timeout`.
  bool WaitAtLeast(int n, std::chrono::milliseconds timeout = kTimeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return value_ >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int value_ = 0;  // guarded by mu_
};

// `n` parties meet: ArriveAndWait() returns true when all `n` were present
// at the same time, false if the others did not come within `timeout`.
// Proves that functions run concurrently without measuring time.
class Rendezvous {
 public:
  explicit Rendezvous(int n) : n_(n) {}
  bool ArriveAndWait(std::chrono::milliseconds timeout = kTimeout) {
    std::unique_lock<std::mutex> lock(mu_);
    ++arrived_;
    cv_.notify_all();
    return cv_.wait_for(lock, timeout, [&] { return arrived_ >= n_; });
  }

 private:
  const int n_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;  // guarded by mu_
};

// The set of threads that ran something.
class ThreadSet {
 public:
  void AddCurrent() {
    std::lock_guard<std::mutex> lock(mu_);
    ids_.insert(std::this_thread::get_id());
  }
  std::set<std::thread::id> Get() {
    std::lock_guard<std::mutex> lock(mu_);
    return ids_;
  }

 private:
  std::mutex mu_;
  std::set<std::thread::id> ids_;  // guarded by mu_
};

inline bool Disjoint(const std::set<std::thread::id>& a, const std::set<std::thread::id>& b) {
  for (const auto& id : a) {
    if (b.count(id) != 0) return false;
  }
  return true;
}

// Keeps vars busy until Release() (tools/common/hold.h).
using support::Hold;

// A sync function body that blocks its worker until Open() (bounded by
// kTimeout). Only for threaded engines: on the naive engine it would block
// the pushing thread. The destructor opens the gate.
class Gate {
 public:
  Gate() : s_(std::make_shared<State>()) {}
  ~Gate() { Open(); }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  // The function to push (any number of times): signals that it started,
  // then waits for Open().
  SyncFn Body() {
    return [s = s_](RunContext) {
      s->started.Add();
      if (!s->open.WaitFor()) s->timed_out.store(true);
    };
  }
  // True once `n` bodies started.
  bool WaitStarted(int n = 1) { return s_->started.WaitAtLeast(n); }
  void Open() { s_->open.Notify(); }
  // True if a body gave up waiting: the test did not open it in time.
  bool TimedOut() const { return s_->timed_out.load(); }

 private:
  struct State {
    Counter started;
    Event open;
    std::atomic<bool> timed_out{false};
  };
  std::shared_ptr<State> s_;
};

// A thread outside the engine that runs posted tasks in order: used to call
// async functions' callbacks "later, from another thread". The destructor
// runs what is left, then joins.
class Completer {
 public:
  Completer() : thread_([this] { Loop(); }) {}
  ~Completer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    thread_.join();
  }
  Completer(const Completer&) = delete;
  Completer& operator=(const Completer&) = delete;

  void Post(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);  // notify under it: see Event::Notify
    tasks_.push_back(std::move(task));
    cv_.notify_all();
  }
  std::thread::id id() const { return thread_.get_id(); }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || head_ < tasks_.size(); });
      if (head_ == tasks_.size()) return;  // stopped and drained
      std::function<void()> task = std::move(tasks_[head_++]);
      lock.unlock();
      task();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::function<void()>> tasks_;  // guarded by mu_
  std::size_t head_ = 0;                      // guarded by mu_
  bool stop_ = false;                         // guarded by mu_
  std::thread thread_;
};

// Pushes n async writers of `v`, each finishing on `completer`'s thread after
// it increments *value: the writes happen off the engine's threads, so a
// later wait or deletion must see them through the callbacks' ordering.
inline void PushAsyncIncrementsOnCompleter(Engine& engine, Completer& completer, VarHandle v,
                                           int* value, int n) {
  for (int i = 0; i < n; ++i) {
    engine.PushAsync(
        [&completer, value](RunContext, CallbackOnComplete cb) {
          completer.Post([value, cb] {
            ++*value;
            cb();
          });
        },
        Context::CPU(), {}, {v});
  }
}

// Pushes an async function that writes `v` and, instead of finishing, hands
// out its callback: returns that callback once the function runs (raises if
// it does not start in time). The function is finished by calling it.
inline CallbackOnComplete PushAsyncAndHoldItsCallback(Engine& engine, VarHandle v) {
  struct Held {
    CallbackOnComplete callback;  // written before `got`
    Event got;
  };
  auto held = std::make_shared<Held>();
  engine.PushAsync(
      [held](RunContext, CallbackOnComplete cb) {
        held->callback = cb;
        held->got.Notify();
      },
      Context::CPU(), {}, {v});
  if (!held->got.WaitFor()) throw std::runtime_error("the held async function did not start");
  return held->callback;
}

// Runs `f` and returns the message of the exception of type E it throws,
// "<no exception>" if it throws nothing, or a description of another
// exception, so that EXPECT_THAT(..., HasSubstr(...)) reports clearly.
template <class E, class F>
std::string MessageOf(F&& f) {
  try {
    f();
  } catch (const std::exception& e) {
    if constexpr (std::is_same_v<E, std::exception>) {
      return e.what();
    } else {
      if (dynamic_cast<const E*>(&e) != nullptr) return e.what();
      return std::string("<other exception: ") + e.what() + ">";
    }
  } catch (...) {
    return "<non-std exception>";
  }
  return "<no exception>";
}

// Asserts that `done` stays false for kQuiet: something must not happen yet.
// Pushes a kAsync function that writes `var` and whose closure holds
// `keep` (which the caller then drops: the closure has the last
// reference), and calls its callback on a thread of its own, which thus
// destroys the closure. Returns whether that call returned within kTimeout.
// If it did not, the thread is detached and the engine leaked, so that the
// test fails instead of hanging.
template <class T>
bool CallbackCallerDestroysTheClosure(std::unique_ptr<Engine>& engine, VarHandle var,
                                      std::shared_ptr<T> keep) {
  struct Call {
    Event got_callback;
    CallbackOnComplete callback;  // written before got_callback
    Event returned;
  };
  auto call = std::make_shared<Call>();
  // kAsync: the body runs and returns inside PushAsync, on this thread, so
  // that the callback's caller is the one to destroy the closure.
  engine->PushAsync(
      [keep = std::move(keep), call](RunContext, CallbackOnComplete cb) {
        call->callback = cb;
        call->got_callback.Notify();
      },
      Context::CPU(), {}, {var}, FnProperty::kAsync);
  if (!call->got_callback.WaitFor()) {
    ADD_FAILURE() << "the kAsync function did not run";
    return false;
  }
  std::thread caller([call] {
    call->callback();
    call->returned.Notify();
  });
  if (!call->returned.WaitFor()) {
    caller.detach();
    (void)engine.release();
    return false;
  }
  caller.join();
  return true;
}

inline void ExpectQuiet(Event& done, const char* what) {
  EXPECT_FALSE(done.WaitFor(kQuiet)) << what;
}

// ---------------------------------------------------------------- fixture

struct EngineParam {
  EngineKind kind;
  int workers;  // CPU workers per pool; ignored by the naive engine
};

inline std::vector<EngineParam> AllEngineParams() {
  return {{EngineKind::kNaive, 0},
          {EngineKind::kPooled, 1},
          {EngineKind::kPooled, 2},
          {EngineKind::kPerDevice, 1},
          {EngineKind::kPerDevice, 2}};
}

inline std::string ParamName(const ::testing::TestParamInfo<EngineParam>& info) {
  switch (info.param.kind) {
    case EngineKind::kNaive:
      return "Naive";
    case EngineKind::kPooled:
      return "Pooled" + std::to_string(info.param.workers) + "Workers";
    case EngineKind::kPerDevice:
      return "PerDevice" + std::to_string(info.param.workers) + "Workers";
  }
  return "Unknown";
}

// The engine under test, built in SetUp from Options() and destroyed in
// TearDown. Every test of a suite derived from it runs on all engines.
class EngineTest : public ::testing::TestWithParam<EngineParam> {
 protected:
  EngineKind kind() const { return GetParam().kind; }
  int workers() const { return GetParam().workers; }
  bool threaded() const { return kind() != EngineKind::kNaive; }

  // Every pool gets the parameter's worker count so that tests can block all
  // workers of a pool deterministically.
  virtual EngineOptions Options() const {
    EngineOptions o;
    o.kind = kind();
    o.cpu_worker_threads = workers();
    o.cpu_priority_threads = workers();
    o.gpu_worker_threads = workers();
    o.gpu_copy_threads = 1;
    return o;
  }

  void SetUp() override { engine_ = CreateEngine(Options()); }
  void TearDown() override { engine_.reset(); }

  Engine& engine() { return *engine_; }

  // Calls WaitForAll when destroyed (swallowing failures): declare it after
  // the locals that pushed functions capture, so that an early return from a
  // failed ASSERT never leaves a function running on destroyed locals.
  class DrainGuard {
   public:
    explicit DrainGuard(Engine& e) : e_(e) {}
    ~DrainGuard() {
      try {
        e_.WaitForAll();
      } catch (...) {
      }
    }
    DrainGuard(const DrainGuard&) = delete;
    DrainGuard& operator=(const DrainGuard&) = delete;

   private:
    Engine& e_;
  };

  std::unique_ptr<Engine> engine_;
};

#define DEPENGINE_INSTANTIATE_ALL_ENGINES(suite)                                      \
  INSTANTIATE_TEST_SUITE_P(Engines, suite,                                            \
                           ::testing::ValuesIn(::depengine::test::AllEngineParams()), \
                           ::depengine::test::ParamName)

}  // namespace depengine::test
