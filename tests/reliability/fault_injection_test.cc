// Fault injection: functions that throw at random points, async callbacks
// called late from foreign threads or with errors, a thread that pushes
// while another waits, engines created and destroyed in a loop with work in
// flight. Nothing is lost: every function either ran or was skipped because
// a var it uses failed, and the counts prove it against a serial model.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "depengine/engine.h"
#include "reliability_util.h"

namespace depengine::reliability {
namespace {

// Threads the engine does not know, calling callbacks late: each task runs
// after a random delay of up to `max_delay_us`.
class ForeignThreads {
 public:
  ForeignThreads(int n, int max_delay_us, std::uint64_t seed) : max_delay_us_(max_delay_us) {
    for (int i = 0; i < n; ++i) {
      threads_.emplace_back([this, i, seed] { Loop(seed + static_cast<std::uint64_t>(i)); });
    }
  }
  ~ForeignThreads() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  // Notifies under the lock: the caller (an engine thread) must be done
  // with this object before the callback it posts can let the owner destroy it.
  void Post(std::function<void()> task) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
    cv_.notify_one();
  }

 private:
  void Loop(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        // Take from either end: callbacks finish out of push order.
        if (rng() % 2) {
          task = std::move(queue_.front());
          queue_.pop_front();
        } else {
          task = std::move(queue_.back());
          queue_.pop_back();
        }
      }
      if (max_delay_us_ > 0) {
        const auto us = static_cast<int>(rng() % static_cast<std::uint64_t>(max_delay_us_ + 1));
        if (us > max_delay_us_ / 2) std::this_thread::sleep_for(std::chrono::microseconds(us));
      }
      task();
    }
  }
  const int max_delay_us_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  bool stop_ = false;                         // guarded by mu_
  std::vector<std::thread> threads_;
};

// How a function in a random fault program behaves.
enum class Behaviour {
  kSync,             // returns normally
  kThrowBefore,      // throws before writing its vars
  kThrowAfter,       // writes its vars, then throws
  kAsyncLate,        // a foreign thread finishes it later
  kAsyncLateError,   // ... with an error
  kAsyncThrow,       // async, throws without calling the callback
  kThrowNonStd,      // throws an int
};

// A random program of functions with injected faults, checked against a
// serial model of the failure rules (engine.h, "Errors").
class FaultProgram {
 public:
  FaultProgram(Engine* engine, std::uint64_t seed, int nvars, ForeignThreads* foreign)
      : engine_(engine), rng_(seed), foreign_(foreign), vars_(static_cast<std::size_t>(nvars)) {
    for (auto& v : vars_) v.handle = engine_->NewVariable();
  }

  // Pushes one random function; sometimes waits on a random var, or on
  // everything, instead.
  void Step() {
    if (++steps_ % 100 == 0) {
      Checkpoint();
      return;
    }
    if (rng_() % 8 == 0) {
      WaitAndCheck(static_cast<int>(rng_() % vars_.size()));
      return;
    }
    auto& fn = fns_.emplace_back(std::make_unique<Fn>());
    Fn* f = fn.get();
    f->id = fns_.size() - 1;
    const int nr = static_cast<int>(rng_() % 3), nw = rng_() % 4 == 0 ? 2 : 1;
    for (int i = 0; i < nw; ++i) AddUnique(&f->writes, static_cast<int>(rng_() % vars_.size()));
    for (int i = 0; i < nr; ++i) {
      const int v = static_cast<int>(rng_() % vars_.size());
      if (std::find(f->writes.begin(), f->writes.end(), v) == f->writes.end()) AddUnique(&f->reads, v);
    }
    const std::uint64_t r = rng_() % 100;
    const std::uint64_t r1000 = r * 10 + rng_() % 10;  // per mille
    f->behaviour = r1000 < 10    ? Behaviour::kThrowBefore
                   : r1000 < 20  ? Behaviour::kThrowAfter
                   : r1000 < 30  ? Behaviour::kAsyncLateError
                   : r1000 < 35  ? Behaviour::kAsyncThrow
                   : r1000 < 40  ? Behaviour::kThrowNonStd
                   : r1000 < 300 ? Behaviour::kAsyncLate
                                 : Behaviour::kSync;
    std::vector<VarHandle> rh, wh;
    for (int v : f->reads) rh.push_back(vars_[static_cast<std::size_t>(v)].handle);
    for (int v : f->writes) wh.push_back(vars_[static_cast<std::size_t>(v)].handle);
    const bool async = f->behaviour == Behaviour::kAsyncLate ||
                       f->behaviour == Behaviour::kAsyncLateError ||
                       f->behaviour == Behaviour::kAsyncThrow;
    if (async) {
      engine_->PushAsync([this, f](RunContext, CallbackOnComplete cb) { RunAsync(f, cb); },
                         Context::CPU(), rh, wh);
    } else {
      engine_->PushSync([this, f](RunContext) { RunSync(f); }, Context::CPU(), rh, wh);
    }
    Model(f);
  }

  // WaitForAll and every count and value so far, then deletes the vars.
  void Finish() {
    Checkpoint();
    ran_ = ran_total_;
    skipped_ = skipped_total_;
    for (auto& v : vars_) engine_->DeleteVariable(nullptr, Context::CPU(), v.handle);
    engine_->WaitForAll();
  }

  int ran() const { return ran_; }
  int skipped() const { return skipped_; }
  int raised() const { return raised_total_; }

 private:
  // WaitForAll, then every count and value; clears the model's failures.
  void Checkpoint() {
    bool threw = false;
    std::uint64_t id = 0;
    try {
      engine_->WaitForAll();
    } catch (const InjectedFault& e) {
      threw = true;
      id = e.id;
    } catch (int code) {
      threw = true;
      id = static_cast<std::uint64_t>(code);
    }
    std::set<std::uint64_t> undelivered;
    for (std::uint64_t r : raised_) {
      if (!delivered_.count(r)) undelivered.insert(r);
    }
    EXPECT_EQ(threw, !undelivered.empty()) << "WaitForAll and the undelivered failures disagree";
    raised_total_ += static_cast<int>(raised_.size());
    raised_.clear();
    delivered_.clear();
    for (auto& v : vars_) {
      v.failed = false;
      v.candidates.clear();
    }
    if (threw) {
      EXPECT_TRUE(undelivered.count(id)) << "WaitForAll rethrew failure " << id;
    }
    int ran = 0, skipped = 0;
    for (auto& f : fns_) {
      EXPECT_EQ(f->runs.load(), f->expected_runs)
          << "function " << f->id << " ran " << f->runs.load() << " times, the model says "
          << f->expected_runs;
      (f->expected_runs ? ran : skipped) += 1;
    }
    ran_total_ = ran;
    skipped_total_ = skipped;
    for (std::size_t i = 0; i < vars_.size(); ++i) {
      EXPECT_EQ(vars_[i].value, vars_[i].expect) << "var " << i << " differs from the serial run";
    }
    EXPECT_EQ(violations_.load(), 0) << "conflicting functions overlapped";
    EXPECT_EQ(ran + skipped, static_cast<int>(fns_.size()));
  }

  struct Var {
    VarHandle handle = nullptr;
    std::uint64_t value = 0;  // plain: the engine orders its writers
    std::atomic<int> readers{0};
    std::atomic<int> writers{0};
    // model
    std::uint64_t expect = 0;
    bool failed = false;
    std::set<std::uint64_t> candidates;
  };
  struct Fn {
    std::uint64_t id = 0;
    std::vector<int> reads, writes;
    Behaviour behaviour = Behaviour::kSync;
    std::atomic<int> runs{0};
    int expected_runs = 0;
  };

  static void AddUnique(std::vector<int>* list, int v) {
    if (std::find(list->begin(), list->end(), v) == list->end()) list->push_back(v);
  }

  void Enter(Fn* f) {
    f->runs.fetch_add(1);
    for (int w : f->writes) {
      Var& v = vars_[static_cast<std::size_t>(w)];
      if (v.writers.fetch_add(1) != 0 || v.readers.load() != 0) violations_.fetch_add(1);
    }
    for (int r : f->reads) {
      Var& v = vars_[static_cast<std::size_t>(r)];
      v.readers.fetch_add(1);
      if (v.writers.load() != 0) violations_.fetch_add(1);
    }
  }
  void Exit(Fn* f) {
    for (int w : f->writes) vars_[static_cast<std::size_t>(w)].writers.fetch_sub(1);
    for (int r : f->reads) vars_[static_cast<std::size_t>(r)].readers.fetch_sub(1);
  }
  void Compute(Fn* f) {
    std::uint64_t h = Mix(f->id, 7);
    for (int r : f->reads) h = Mix(h, vars_[static_cast<std::size_t>(r)].value);
    for (int w : f->writes) {
      auto& v = vars_[static_cast<std::size_t>(w)].value;
      v = Mix(v, h);
    }
  }

  void RunSync(Fn* f) {
    Enter(f);
    if (f->behaviour == Behaviour::kThrowBefore) {
      Exit(f);
      throw InjectedFault(f->id);
    }
    if (f->behaviour == Behaviour::kThrowNonStd) {
      Exit(f);
      throw static_cast<int>(f->id);
    }
    Compute(f);
    Exit(f);
    if (f->behaviour == Behaviour::kThrowAfter) throw InjectedFault(f->id);
  }

  void RunAsync(Fn* f, CallbackOnComplete cb) {
    Enter(f);
    if (f->behaviour == Behaviour::kAsyncThrow) {
      Exit(f);
      throw InjectedFault(f->id);
    }
    const bool error = f->behaviour == Behaviour::kAsyncLateError;
    foreign_->Post([this, f, cb, error] {
      if (!error) Compute(f);
      Exit(f);
      if (error) {
        cb(std::make_exception_ptr(InjectedFault(f->id)));
      } else {
        cb();
      }
    });
  }

  // The serial meaning of pushing f.
  void Model(Fn* f) {
    std::set<std::uint64_t> reaching;
    bool skip = false;
    for (const auto* list : {&f->reads, &f->writes}) {
      for (int i : *list) {
        Var& v = vars_[static_cast<std::size_t>(i)];
        if (v.failed) {
          skip = true;
          reaching.insert(v.candidates.begin(), v.candidates.end());
        }
      }
    }
    if (skip) {
      for (int w : f->writes) {
        vars_[static_cast<std::size_t>(w)].failed = true;
        vars_[static_cast<std::size_t>(w)].candidates = reaching;
      }
      return;
    }
    f->expected_runs = 1;
    const Behaviour b = f->behaviour;
    const bool computes = b == Behaviour::kSync || b == Behaviour::kThrowAfter ||
                          b == Behaviour::kAsyncLate;
    if (computes) {
      std::uint64_t h = Mix(f->id, 7);
      for (int r : f->reads) h = Mix(h, vars_[static_cast<std::size_t>(r)].expect);
      for (int w : f->writes) {
        auto& v = vars_[static_cast<std::size_t>(w)].expect;
        v = Mix(v, h);
      }
    }
    const bool fails = b != Behaviour::kSync && b != Behaviour::kAsyncLate;
    if (fails) {
      raised_.insert(f->id);
      for (int w : f->writes) {
        vars_[static_cast<std::size_t>(w)].failed = true;
        vars_[static_cast<std::size_t>(w)].candidates = {f->id};
      }
    }
  }

  void WaitAndCheck(int i) {
    Var& v = vars_[static_cast<std::size_t>(i)];
    bool threw = false;
    std::uint64_t id = 0;
    try {
      if (IgnoreBug3()) {
        // A no-op writer makes WaitForVar wait for the earlier readers.
        engine_->PushSync([](RunContext) {}, Context::CPU(), {}, {v.handle});
      }
      engine_->WaitForVar(v.handle);
    } catch (const InjectedFault& e) {
      threw = true;
      id = e.id;
    } catch (int code) {
      threw = true;
      id = static_cast<std::uint64_t>(code);
    }
    EXPECT_EQ(threw, v.failed) << "WaitForVar(var " << i << ") and the model disagree";
    if (threw) {
      EXPECT_TRUE(v.candidates.count(id)) << "failure " << id << " cannot have reached var " << i;
      delivered_.insert(id);
    }
    v.failed = false;
    v.candidates.clear();
    EXPECT_EQ(v.value, v.expect) << "var " << i << " after WaitForVar differs from the serial run";
  }

  Engine* engine_;
  std::mt19937_64 rng_;
  ForeignThreads* foreign_;
  std::vector<Var> vars_;
  std::vector<std::unique_ptr<Fn>> fns_;
  std::set<std::uint64_t> raised_;     // failures raised (by function id)
  std::set<std::uint64_t> delivered_;  // failures WaitForVar delivered
  std::atomic<int> violations_{0};
  int steps_ = 0;
  int ran_ = 0, skipped_ = 0;
  int ran_total_ = 0, skipped_total_ = 0, raised_total_ = 0;
};

class FaultInjection : public ::testing::TestWithParam<EngineConfig> {};

TEST_P(FaultInjection, RandomThrowsLateCallbacksAndErrors) {
  Deadline deadline(240, "RandomThrowsLateCallbacksAndErrors");
  const int programs = Scaled(8, 2);
  const int steps = Scaled(3000, 300);
  int total_ran = 0, total_skipped = 0, total_raised = 0;
  for (int p = 0; p < programs; ++p) {
    const std::uint64_t seed = 1000 + static_cast<std::uint64_t>(p);
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto engine = MakeEngine(GetParam());
    ForeignThreads foreign(3, 50, seed);
    FaultProgram prog(engine.get(), seed, 64, &foreign);
    for (int s = 0; s < steps; ++s) prog.Step();
    prog.Finish();
    total_ran += prog.ran();
    total_skipped += prog.skipped();
    total_raised += prog.raised();
    if (HasFailure()) break;
  }
  // The programs must exercise both outcomes, or they prove nothing.
  EXPECT_GT(total_raised, 0);
  EXPECT_GT(total_skipped, 0);
  EXPECT_GT(total_ran, total_skipped);
  std::printf("  %d functions: %d ran, %d skipped because a var they use failed; %d failures "
              "raised\n",
              total_ran + total_skipped, total_ran, total_skipped, total_raised);
}

// Callbacks held until every function has returned, then called from
// foreign threads in random order: successors wait for their callbacks,
// independent functions do not.
TEST_P(FaultInjection, CallbacksCalledLateInRandomOrder) {
  Deadline deadline(120, "CallbacksCalledLateInRandomOrder");
  auto engine = MakeEngine(GetParam());
  constexpr int kVars = 64;
  std::vector<VarHandle> vars;
  for (int i = 0; i < kVars; ++i) vars.push_back(engine->NewVariable());
  std::mutex mu;
  std::vector<CallbackOnComplete> held;  // guarded by mu
  std::atomic<int> started{0};
  std::vector<long> value(kVars, 0);
  for (int i = 0; i < kVars; ++i) {
    engine->PushAsync(
        [&, i](RunContext, CallbackOnComplete cb) {
          value[static_cast<std::size_t>(i)] = 1;
          std::lock_guard<std::mutex> lock(mu);
          held.push_back(cb);
          // Counted only once the callback is in `held`: counting first let
          // the main thread copy `held` before the last callback was in it,
          // and that function then never finished (the test hung).
          started.fetch_add(1);
        },
        Context::CPU(), {}, {vars[static_cast<std::size_t>(i)]});
  }
  // Successors: each doubles its var, only after its callback.
  std::atomic<int> early{0};
  for (int i = 0; i < kVars; ++i) {
    engine->PushSync(
        [&, i](RunContext) {
          auto& v = value[static_cast<std::size_t>(i)];
          if (v != 1) early.fetch_add(1);
          v *= 2;
        },
        Context::CPU(), {}, {vars[static_cast<std::size_t>(i)]});
  }
  while (started.load() < kVars) std::this_thread::yield();  // no callback was needed
  std::vector<CallbackOnComplete> cbs;
  {
    std::lock_guard<std::mutex> lock(mu);
    cbs = held;
  }
  std::shuffle(cbs.begin(), cbs.end(), std::mt19937(7));
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      for (std::size_t i = static_cast<std::size_t>(t); i < cbs.size(); i += 4) cbs[i]();
    });
  }
  for (auto& c : callers) c.join();
  engine->WaitForAll();
  EXPECT_EQ(early.load(), 0) << "a successor ran before its predecessor's callback";
  for (int i = 0; i < kVars; ++i) EXPECT_EQ(value[static_cast<std::size_t>(i)], 2);
}

// An error passed to a callback from a foreign thread fails exactly the
// vars it should, reaches WaitForVar once per var, and the vars are usable
// again after.
TEST_P(FaultInjection, CallbackErrorPropagatesAndClears) {
  auto engine = MakeEngine(GetParam());
  VarHandle a = engine->NewVariable(), b = engine->NewVariable(), c = engine->NewVariable(),
            d = engine->NewVariable();
  std::atomic<int> ran_b{0}, ran_c{0}, ran_d{0}, ran_after{0};
  std::promise<CallbackOnComplete> handed;
  std::thread foreign([fut = handed.get_future()]() mutable {
    CallbackOnComplete cb = fut.get();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    cb(std::make_exception_ptr(std::runtime_error("disk on fire")));
  });
  engine->PushAsync([&](RunContext, CallbackOnComplete cb) { handed.set_value(cb); },
                    Context::CPU(), {}, {a});
  engine->PushSync([&](RunContext) { ran_b++; }, Context::CPU(), {a}, {b});  // skipped
  engine->PushSync([&](RunContext) { ran_c++; }, Context::CPU(), {b}, {c});  // skipped
  engine->PushSync([&](RunContext) { ran_d++; }, Context::CPU(), {}, {d});   // runs
  std::string msg;
  try {
    engine->WaitForVar(c);
  } catch (const std::runtime_error& e) {
    msg = e.what();
  }
  EXPECT_EQ(msg, "disk on fire") << "the failure did not travel a -> b -> c";
  EXPECT_THROW(engine->WaitForVar(a), std::runtime_error);
  EXPECT_THROW(engine->WaitForVar(b), std::runtime_error);
  EXPECT_NO_THROW(engine->WaitForVar(c)) << "WaitForVar must clear the failure it delivered";
  EXPECT_NO_THROW(engine->WaitForVar(d));
  for (VarHandle v : {a, b, c}) {
    engine->PushSync([&](RunContext) { ran_after++; }, Context::CPU(), {}, {v});
  }
  EXPECT_NO_THROW(engine->WaitForAll()) << "a delivered failure was delivered again";
  foreign.join();
  EXPECT_EQ(ran_b.load(), 0);
  EXPECT_EQ(ran_c.load(), 0);
  EXPECT_EQ(ran_d.load(), 1);
  EXPECT_EQ(ran_after.load(), 3);
}

// A delete function that throws does not kill the process or the engine.
TEST_P(FaultInjection, ThrowingDeleteFunction) {
  auto engine = MakeEngine(GetParam());
  VarHandle v = engine->NewVariable();
  VarHandle w = engine->NewVariable();
  engine->DeleteVariable([](RunContext) { throw std::runtime_error("delete failed"); },
                         Context::CPU(), v);
  try {
    engine->WaitForAll();  // may report the delete function's failure
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "delete failed");
  }
  long x = 0;
  engine->PushSync([&](RunContext) { x = 5; }, Context::CPU(), {}, {w});
  engine->WaitForVar(w);
  EXPECT_EQ(x, 5);
  EXPECT_THROW(engine->WaitForVar(v), std::invalid_argument);
}

// One thread pushes (and waits on its own vars) while another keeps calling
// WaitForAll and WaitForVar on a var both use: no wait hangs, nothing is
// lost, values match the serial order.
TEST_P(FaultInjection, PushWhileAnotherThreadWaits) {
  Deadline deadline(180, "PushWhileAnotherThreadWaits");
  auto engine = MakeEngine(GetParam());
  VarHandle shared = engine->NewVariable();
  constexpr int kPushers = 2, kVarsEach = 8;
  const int per_pusher = Scaled(20000, 2000);
  std::vector<std::vector<VarHandle>> vars(kPushers);
  std::vector<std::vector<std::uint64_t>> values(kPushers, std::vector<std::uint64_t>(kVarsEach, 0));
  for (auto& vs : vars) {
    for (int i = 0; i < kVarsEach; ++i) vs.push_back(engine->NewVariable());
  }
  std::atomic<bool> done{false};
  std::atomic<long> waits{0};
  std::thread waiter([&] {
    while (!done.load()) {
      engine->WaitForAll();
      engine->WaitForVar(shared);
      waits.fetch_add(1);
    }
  });
  std::vector<std::thread> pushers;
  std::atomic<int> mismatches{0};
  for (int p = 0; p < kPushers; ++p) {
    pushers.emplace_back([&, p] {
      std::mt19937 rng(static_cast<unsigned>(p));
      std::vector<std::uint64_t> expect(kVarsEach, 0);
      auto& val = values[static_cast<std::size_t>(p)];
      for (int i = 0; i < per_pusher; ++i) {
        const int k = static_cast<int>(rng() % kVarsEach);
        VarHandle v = vars[static_cast<std::size_t>(p)][static_cast<std::size_t>(k)];
        engine->PushSync(
            [&val, k, i](RunContext) {
              auto& x = val[static_cast<std::size_t>(k)];
              x = x * 31 + static_cast<std::uint64_t>(i);
            },
            Context::CPU(), {shared}, {v});
        expect[static_cast<std::size_t>(k)] =
            expect[static_cast<std::size_t>(k)] * 31 + static_cast<std::uint64_t>(i);
        if (i % 997 == 0) {
          engine->WaitForVar(v);
          if (val[static_cast<std::size_t>(k)] != expect[static_cast<std::size_t>(k)]) {
            mismatches.fetch_add(1);
          }
        }
      }
      for (int k = 0; k < kVarsEach; ++k) {
        engine->WaitForVar(vars[static_cast<std::size_t>(p)][static_cast<std::size_t>(k)]);
        if (val[static_cast<std::size_t>(k)] != expect[static_cast<std::size_t>(k)]) {
          mismatches.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : pushers) t.join();
  done.store(true);
  waiter.join();
  engine->WaitForAll();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_GT(waits.load(), 0);
}

// A thread blocked in WaitForVar on a busy var must not block pushes and
// waits on other vars by other threads.
TEST_P(FaultInjection, BlockedWaiterDoesNotBlockOthers) {
  Deadline deadline(120, "BlockedWaiterDoesNotBlockOthers");
  auto engine = MakeEngine(GetParam());
  VarHandle gated = engine->NewVariable();
  VarHandle other = engine->NewVariable();
  auto gate =
      std::make_unique<Hold>(*engine, std::vector<VarHandle>{}, std::vector<VarHandle>{gated});
  std::atomic<bool> waiter_returned{false};
  std::thread waiter([&] {
    engine->WaitForVar(gated);
    waiter_returned.store(true);
  });
  long x = 0;
  for (int i = 0; i < Scaled(10000, 1000); ++i) {
    engine->PushSync([&](RunContext) { ++x; }, Context::CPU(), {}, {other});
  }
  engine->WaitForVar(other);
  EXPECT_EQ(x, Scaled(10000, 1000));
  EXPECT_FALSE(waiter_returned.load());
  gate->Release();
  waiter.join();
  EXPECT_TRUE(waiter_returned.load());
  gate.reset();
  engine->WaitForAll();
}

// Engines created and destroyed in a loop with work in flight: sync chains,
// async functions finished late by foreign threads, failures, functions
// that push more, deletions. The destructor must finish all of it.
TEST_P(FaultInjection, EnginesDestroyedWithWorkInFlight) {
  Deadline deadline(240, "EnginesDestroyedWithWorkInFlight");
  const int rounds = Scaled(40, 5);
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::atomic<int> ran{0}, nested_ran{0}, deleted{0}, late_done{0};
    long chain = 0;
    int expected_ran = 0;
    {
      ForeignThreads foreign(2, 300, static_cast<std::uint64_t>(round));
      auto engine = MakeEngine(GetParam());
      VarHandle c = engine->NewVariable();
      VarHandle f = engine->NewVariable();
      std::vector<VarHandle> temp;
      for (int i = 0; i < 8; ++i) temp.push_back(engine->NewVariable());
      for (int i = 0; i < 200; ++i) {
        engine->PushSync([&](RunContext) { ++chain; ran++; }, Context::CPU(), {}, {c});
        ++expected_ran;
        if (i % 10 == 0) {
          engine->PushAsync(
              [&](RunContext, CallbackOnComplete cb) {
                ran++;
                foreign.Post([&late_done, cb] {
                  late_done++;
                  cb();
                });
              },
              Context::CPU(), {c}, {temp[static_cast<std::size_t>(i / 10 % 8)]});
          ++expected_ran;
        }
        if (i % 50 == 0) {
          // A function that pushes another function onto the same engine.
          Engine* e = engine.get();
          engine->PushSync(
              [&, e, c](RunContext) {
                ran++;
                e->PushSync([&](RunContext) { nested_ran++; }, Context::CPU(), {c}, {});
              },
              Context::CPU(), {}, {temp[0]});
          ++expected_ran;
        }
      }
      // A failure on f: its successors are skipped, not lost.
      engine->PushSync([&](RunContext) {
        ran++;
        throw std::runtime_error("boom");
      }, Context::CPU(), {}, {f});
      ++expected_ran;
      for (int i = 0; i < 20; ++i) {
        engine->PushSync([&](RunContext) { ran++; }, Context::CPU(), {f}, {temp[1]});
      }
      for (VarHandle v : temp) {
        engine->DeleteVariable([&](RunContext) { deleted++; }, Context::CPU(), v);
      }
      // Destroyed here, with most of the above still pending.
    }
    EXPECT_EQ(chain, 200);
    EXPECT_EQ(ran.load(), expected_ran) << "functions lost by the destructor";
    EXPECT_EQ(nested_ran.load(), 4);
    EXPECT_EQ(deleted.load(), 8);
    EXPECT_EQ(late_done.load(), 20);
    if (HasFailure()) break;
  }
}

INSTANTIATE_TEST_SUITE_P(AllEngines, FaultInjection, ::testing::ValuesIn(AllEngineConfigs()),
                         ConfigName);

}  // namespace
}  // namespace depengine::reliability
