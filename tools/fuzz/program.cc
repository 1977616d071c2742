// Fuzz programs: the serial model and the checked run (the decoder is in
// program_decode.cc). See program.h for what is checked.
#include "program.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sys/prctl.h>
#include <unistd.h>

#include "depengine/engine.h"

#include "program_decode.h"

namespace depengine::fuzz {
namespace {

using namespace internal;  // NOLINT: the decoded program's types

// ---------------------------------------------------------------- run-time state

std::uint64_t Mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t z = a + 0x9e3779b97f4a7c15ull + (b << 6) + (b >> 2);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The failure a function raises: its origin (the function) and a unique
// instance number.
struct Injected : std::runtime_error {
  Injected(std::uint64_t o, std::uint64_t i)
      : std::runtime_error(Cat("injected failure ", o)), origin(o), instance(i) {}
  std::uint64_t origin;
  std::uint64_t instance;
};

struct VarState {
  // --- run time: written by the functions that use the var ---
  VarHandle handle = nullptr;
  std::string name;
  std::uint64_t value = 0;  // plain on purpose: the engine orders its writers
  std::atomic<int> readers{0};
  std::atomic<int> writers{0};
  std::uint64_t value_at_delete = 0;  // written by the DeleteVariable function
  std::atomic<int> deletions{0};
  // --- model: the pushing thread only ---
  bool shared = false;
  bool live = false;
  std::uint64_t expect = 0;
  bool failed = false;
  std::set<std::uint64_t> candidates;  // origins of the failures that can be on it
  bool deleted = false;
  std::uint64_t expect_at_delete = 0;
};

// One function: a one-shot push, or a prebuilt operator (pushed many times).
struct FnSpec {
  std::string label;
  std::uint64_t origin = 0;
  std::vector<VarState*> reads, writes;  // deduplicated
  Fault fault = Fault::kNone;
  Mode mode = Mode::kSync;
  bool wait_inside = false;
  int delay = 0;
  std::atomic<int> runs{0};
  std::atomic<int> raises{0};
  // model
  int expected_runs = 0;
  int expected_raises = 0;
};

struct ThreadState {
  int index = 0;
  std::deque<VarState> vars;  // by creation index
  std::deque<FnSpec> specs;
  std::map<int, FnSpec*> op_specs;
  std::map<int, OprHandle> op_handles;
  std::atomic<const char*> phase{"not started"};
  std::uint64_t next_origin = 0;
  RunStats stats;
};

// Foreign threads that finish async functions later (the engine does not
// know them).
class Completers {
 public:
  explicit Completers(int n) {
    for (int i = 0; i < n; ++i) {
      workers_.push_back(std::make_unique<Worker>());
      Worker* w = workers_.back().get();
      w->thread = std::thread([this, w] { Loop(w); });
    }
  }
  ~Completers() {
    for (auto& w : workers_) {
      {
        std::lock_guard<std::mutex> lock(w->mu);
        w->stop = true;
      }
      w->cv.notify_all();
      w->thread.join();
    }
  }
  void Post(std::uint64_t key, std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(idle_mu_);
      ++outstanding_;
    }
    // Notify under the lock: once the task runs, the program may end and
    // destroy this object, while the poster (an engine thread) returns.
    Worker* w = workers_[key % workers_.size()].get();
    std::lock_guard<std::mutex> lock(w->mu);
    w->queue.push_back(std::move(task));
    w->cv.notify_one();
  }
  // Returns once every posted task has finished.
  void WaitIdle() {
    std::unique_lock<std::mutex> lock(idle_mu_);
    idle_cv_.wait(lock, [this] { return outstanding_ == 0; });
  }

 private:
  struct Worker {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<std::function<void()>> queue;
    bool stop = false;
    std::thread thread;
  };
  void Loop(Worker* w) {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(w->mu);
        w->cv.wait(lock, [w] { return w->stop || !w->queue.empty(); });
        if (w->queue.empty()) return;
        task = std::move(w->queue.front());
        w->queue.pop_front();
      }
      task();
      task = nullptr;
      std::lock_guard<std::mutex> lock(idle_mu_);
      if (--outstanding_ == 0) idle_cv_.notify_all();
    }
  }
  std::vector<std::unique_ptr<Worker>> workers_;
  std::mutex idle_mu_;
  std::condition_variable idle_cv_;
  int outstanding_ = 0;  // guarded by idle_mu_
};

void Delay(int kind) {
  switch (kind) {
    case 1:
      std::this_thread::yield();
      break;
    case 2:
      for (int i = 0; i < 200; ++i) asm volatile("" ::: "memory");
      break;
    case 3:
      for (int i = 0; i < 5000; ++i) asm volatile("" ::: "memory");
      break;
    default:
      break;
  }
}

// ---------------------------------------------------------------- the runner

class Runner {
 public:
  Runner(const Program& p, const RunOptions& o) : program_(p), options_(o) {}

  RunResult Run();

 private:
  // --- checks ---
  void Fail(const std::string& what) {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (error_.empty()) error_ = what;
    failed_.store(true);
  }
  bool Failed() const { return failed_.load(); }

  // --- function bodies (engine and completer threads) ---
  void Enter(FnSpec* s);
  void Exit(FnSpec* s);
  void Compute(FnSpec* s);
  Injected Raise(FnSpec* s);
  void SyncBody(FnSpec* s);
  void AsyncBody(FnSpec* s, const CallbackOnComplete& cb);

  // --- pushing threads ---
  void RunThread(ThreadState* ts, const std::vector<Op>& ops);
  void Exec(ThreadState* ts, const Op& op);
  VarState* Ref(ThreadState* ts, int ref);
  FnSpec* MakeSpec(ThreadState* ts, const Op& op, const std::string& label);
  void ModelRun(ThreadState* ts, FnSpec* s);
  void CheckWaitForVar(ThreadState* ts, VarState* v);
  void ExpectRejected(ThreadState* ts, const char* what, const std::function<void()>& call,
                      bool logic);

  // --- main thread ---
  void Barrier();
  void CheckState(const char* when);
  void Watchdog();

  const Program& program_;
  const RunOptions& options_;
  // The engine, used by functions even while its destructor runs (a
  // unique_ptr reads null during reset()); owned by owner_.
  Engine* engine_ = nullptr;
  std::unique_ptr<Engine> owner_;
  std::unique_ptr<Completers> completers_;
  std::deque<VarState> shared_;
  std::vector<std::unique_ptr<ThreadState>> threads_;

  std::mutex error_mu_;
  std::string error_;
  std::atomic<bool> failed_{false};

  // Failures raised and not yet cleared by a WaitForAll, by instance: their
  // origin. Every one fails the vars its function writes.
  std::mutex raised_mu_;
  std::map<std::uint64_t, std::uint64_t> raised_;
  std::set<std::uint64_t> delivered_;  // instances WaitForVar delivered
  std::atomic<std::uint64_t> next_instance_{1};

  std::atomic<const char*> main_phase_{"setup"};
  std::mutex done_mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
};

void Runner::Enter(FnSpec* s) {
  for (VarState* w : s->writes) {
    const int n = w->writers.fetch_add(1) + 1;
    if (n != 1 || w->readers.load() != 0) {
      Fail(s->label + ": writes " + w->name + " while another function uses it");
    }
  }
  for (VarState* r : s->reads) {
    r->readers.fetch_add(1);
    if (r->writers.load() != 0) Fail(s->label + ": reads " + r->name + " while it is written");
  }
}

void Runner::Exit(FnSpec* s) {
  for (VarState* w : s->writes) w->writers.fetch_sub(1);
  for (VarState* r : s->reads) r->readers.fetch_sub(1);
}

void Runner::Compute(FnSpec* s) {
  std::uint64_t h = Mix(s->origin, 0x51ed);
  for (VarState* r : s->reads) h = Mix(h, r->value);
  for (VarState* w : s->writes) w->value = Mix(w->value, h);
}

Injected Runner::Raise(FnSpec* s) {
  const std::uint64_t instance = next_instance_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(raised_mu_);
    raised_[instance] = s->origin;
  }
  s->raises.fetch_add(1);
  return Injected(s->origin, instance);
}

void Runner::SyncBody(FnSpec* s) {
  s->runs.fetch_add(1);
  Enter(s);
  Delay(s->delay);
  if (s->wait_inside) {
    try {
      engine_->WaitForAll();
      Fail(s->label + ": WaitForAll inside a function returned instead of raising");
    } catch (const std::logic_error&) {
    } catch (const std::exception& e) {
      Fail(s->label + ": WaitForAll inside a function raised " + e.what());
    }
  }
  if (s->fault == Fault::kThrowBefore) {
    Exit(s);
    throw Raise(s);
  }
  Compute(s);
  Exit(s);
  if (s->fault == Fault::kThrowAfter) throw Raise(s);
}

void Runner::AsyncBody(FnSpec* s, const CallbackOnComplete& cb) {
  s->runs.fetch_add(1);
  Enter(s);
  Delay(s->delay);
  switch (s->mode) {
    case Mode::kSync:
    case Mode::kInline:
      Compute(s);
      Exit(s);
      cb();
      return;
    case Mode::kCompleter:
      completers_->Post(s->origin, [this, s, cb] {
        Delay(s->delay);
        Compute(s);
        Exit(s);
        cb();
      });
      return;
    case Mode::kCompleterError:
      completers_->Post(s->origin, [this, s, cb] {
        Exit(s);
        cb(std::make_exception_ptr(Raise(s)));
      });
      return;
    case Mode::kThrowBeforeCallback:
      Exit(s);
      throw Raise(s);
    case Mode::kCallbackThenThrow:
      // The callback is called inside the body, so the function finishes
      // when the body returns: the throw fails its written vars.
      Compute(s);
      Exit(s);
      cb();
      throw Raise(s);
    case Mode::kCallbackTwice:
      Compute(s);
      Exit(s);
      completers_->Post(s->origin, [this, s, cb] {
        cb();
        try {
          cb();
          Fail(s->label + ": a second callback call was accepted");
        } catch (const std::logic_error&) {
        }
      });
      return;
  }
}

VarState* Runner::Ref(ThreadState* ts, int ref) {
  if (ref < 0) return &shared_[static_cast<std::size_t>(-1 - ref)];
  return &ts->vars[static_cast<std::size_t>(ref)];
}

FnSpec* Runner::MakeSpec(ThreadState* ts, const Op& op, const std::string& label) {
  FnSpec& s = ts->specs.emplace_back();
  s.label = label;
  s.origin = (static_cast<std::uint64_t>(ts->index) << 32) | ts->next_origin++;
  auto dedup = [&](const std::vector<int>& refs, std::vector<VarState*>* out) {
    for (int ref : refs) {
      VarState* v = Ref(ts, ref);
      if (std::find(out->begin(), out->end(), v) == out->end()) out->push_back(v);
    }
  };
  dedup(op.reads, &s.reads);
  dedup(op.writes, &s.writes);
  s.fault = op.fault;
  s.mode = op.mode;
  s.wait_inside = op.wait_inside;
  s.delay = op.delay;
  return &s;
}

// The serial meaning of one accepted push of `s`.
void Runner::ModelRun(ThreadState* ts, FnSpec* s) {
  ++ts->stats.functions;
  std::set<std::uint64_t> reaching;
  bool skip = false;
  for (auto* list : {&s->reads, &s->writes}) {
    for (VarState* v : *list) {
      if (v->failed) {
        skip = true;
        reaching.insert(v->candidates.begin(), v->candidates.end());
      }
    }
  }
  if (skip) {
    ++ts->stats.skipped;
    for (VarState* w : s->writes) {
      w->failed = true;
      w->candidates = reaching;
    }
    return;
  }
  ++ts->stats.ran;
  ++s->expected_runs;
  const bool no_compute = s->fault == Fault::kThrowBefore || s->mode == Mode::kCompleterError ||
                          s->mode == Mode::kThrowBeforeCallback;
  const bool fails_vars = s->fault != Fault::kNone || s->mode == Mode::kCompleterError ||
                          s->mode == Mode::kThrowBeforeCallback ||
                          s->mode == Mode::kCallbackThenThrow;
  if (!no_compute) {
    std::uint64_t h = Mix(s->origin, 0x51ed);
    for (VarState* r : s->reads) h = Mix(h, r->expect);
    for (VarState* w : s->writes) w->expect = Mix(w->expect, h);
  }
  if (fails_vars) {
    ++s->expected_raises;
    ++ts->stats.failures;
  }
  if (fails_vars) {
    for (VarState* w : s->writes) {
      w->failed = true;
      w->candidates = {s->origin};
    }
  }
}

void Runner::CheckWaitForVar(ThreadState* ts, VarState* v) {
  ++ts->stats.waits;
  bool threw = false;
  std::uint64_t origin = 0, instance = 0;
  try {
    if (!options_.check_wait_for_readers && !v->shared) {
      // Works around bug 3: a no-op writer makes WaitForVar wait for the
      // earlier readers (and lets them see the var's failure first).
      engine_->PushSync([](RunContext) {}, Context::CPU(), {}, {v->handle});
    }
    engine_->WaitForVar(v->handle);
  } catch (const Injected& e) {
    threw = true;
    origin = e.origin;
    instance = e.instance;
  } catch (const std::exception& e) {
    Fail("WaitForVar(" + v->name + ") raised an unexpected " + e.what());
    return;
  }
  if (threw != v->failed) {
    Fail("WaitForVar(" + v->name + ") " + (threw ? "rethrew a failure the var does not have"
                                                 : "did not rethrow the var's failure"));
  } else if (threw) {
    if (!v->candidates.count(origin)) {
      Fail("WaitForVar(" + v->name + ") rethrew failure " + std::to_string(origin) +
           ", which cannot have reached the var");
    }
    std::lock_guard<std::mutex> lock(raised_mu_);
    auto it = raised_.find(instance);
    if (it == raised_.end()) {
      Fail("WaitForVar(" + v->name + ") rethrew a failure that was never raised or was cleared");
    }
    delivered_.insert(instance);
  }
  if (!v->shared) {  // shared vars never fail, and several threads wait on them
    v->failed = false;
    v->candidates.clear();
  }
  if (v->value != v->expect) {
    Fail("after WaitForVar(" + v->name + "): value differs from the serial run");
  }
  if (!v->shared && v->writers.load() != 0) {
    Fail("after WaitForVar(" + v->name + "): an earlier function writing the var still runs");
  }
  if (!v->shared && v->readers.load() != 0 && options_.check_wait_for_readers) {
    Fail("after WaitForVar(" + v->name + "): an earlier function reading the var still runs");
  }
}

void Runner::ExpectRejected(ThreadState* ts, const char* what, const std::function<void()>& call,
                            bool logic) {
  try {
    call();
  } catch (const std::invalid_argument&) {
    ++ts->stats.rejected;
    return;
  } catch (const std::logic_error&) {
    if (logic) {
      ++ts->stats.rejected;
      return;
    }
    Fail(std::string(what) + ": raised logic_error, expected invalid_argument");
    return;
  } catch (const std::exception& e) {
    Fail(std::string(what) + ": raised an unexpected " + e.what());
    return;
  }
  Fail(std::string(what) + ": was accepted");
}

void Runner::Exec(ThreadState* ts, const Op& op) {
  const std::string label = Cat("t", ts->index, " ", DescribeOp(op));
  try {
    switch (op.code) {
      case Code::kNewVar: {
        VarState& v = ts->vars.emplace_back();
        v.name = Cat("t", ts->index, ".v", op.target);
        v.handle = engine_->NewVariable();
        v.live = true;
        return;
      }
      case Code::kPushSync: {
        FnSpec* s = MakeSpec(ts, op, label);
        std::vector<VarHandle> r, w;
        for (VarState* v : s->reads) r.push_back(v->handle);
        for (VarState* v : s->writes) w.push_back(v->handle);
        engine_->PushSync([this, s](RunContext) { SyncBody(s); }, op.ctx, r, w, op.prop,
                          op.priority, "fuzz-sync");
        ModelRun(ts, s);
        return;
      }
      case Code::kPushAsync: {
        FnSpec* s = MakeSpec(ts, op, label);
        std::vector<VarHandle> r, w;
        for (VarState* v : s->reads) r.push_back(v->handle);
        for (VarState* v : s->writes) w.push_back(v->handle);
        engine_->PushAsync([this, s](RunContext, CallbackOnComplete cb) { AsyncBody(s, cb); },
                           op.ctx, r, w, op.prop, op.priority, "fuzz-async");
        ModelRun(ts, s);
        return;
      }
      case Code::kNewOperator: {
        FnSpec* s = MakeSpec(ts, op, label);
        std::vector<VarHandle> r, w;
        for (VarState* v : s->reads) r.push_back(v->handle);
        for (VarState* v : s->writes) w.push_back(v->handle);
        ts->op_specs[op.target] = s;
        ts->op_handles[op.target] = engine_->NewOperator(
            [this, s](RunContext, CallbackOnComplete cb) { AsyncBody(s, cb); }, r, w, op.prop,
            "fuzz-operator");
        return;
      }
      case Code::kPushOperator:
        engine_->Push(ts->op_handles.at(op.target), op.ctx, op.priority);
        ModelRun(ts, ts->op_specs.at(op.target));
        return;
      case Code::kDeleteOperator:
        engine_->DeleteOperator(ts->op_handles.at(op.target));
        ts->op_handles.erase(op.target);
        return;
      case Code::kDeleteVar: {
        VarState* v = Ref(ts, op.target);
        engine_->DeleteVariable(
            [this, v](RunContext) {
              if (v->readers.load() != 0 || v->writers.load() != 0) {
                Fail("DeleteVariable(" + v->name + ") ran while a function used the var");
              }
              v->value_at_delete = v->value;
              v->deletions.fetch_add(1);
            },
            Context::CPU(), v->handle);
        v->live = false;
        v->deleted = true;
        v->expect_at_delete = v->expect;
        v->failed = false;
        v->candidates.clear();
        return;
      }
      case Code::kWaitForVar:
        CheckWaitForVar(ts, Ref(ts, op.target));
        return;
      case Code::kMisuse: {
        auto noop = [](RunContext) {};
        switch (op.misuse) {
          case Misuse::kNullVar:
            ExpectRejected(ts, "push with a null var",
                           [&] { engine_->PushSync(noop, Context::CPU(), {nullptr}, {}); }, false);
            return;
          case Misuse::kBothLists: {
            VarHandle h = Ref(ts, op.target)->handle;
            ExpectRejected(ts, "push with a var in both lists",
                           [&] { engine_->PushSync(noop, Context::CPU(), {h}, {h}); }, false);
            return;
          }
          case Misuse::kPriority:
            ExpectRejected(ts, "push with a priority out of range", [&] {
              engine_->PushSync(noop, Context::CPU(), {}, {}, FnProperty::kNormal, op.priority);
            }, false);
            return;
          case Misuse::kGpu:
            ExpectRejected(ts, "push on a GPU that does not exist", [&] {
              engine_->PushSync(noop, Context::GPU(100 + program_.simulated_gpus), {}, {});
            }, false);
            return;
          case Misuse::kNullFn:
          case Misuse::kCount:
            ExpectRejected(ts, "push of a null function",
                           [&] { engine_->PushSync(SyncFn(), Context::CPU(), {}, {}); }, false);
            return;
        }
        return;
      }
    }
  } catch (const std::exception& e) {
    Fail(label + ": the engine rejected a valid call: " + e.what());
  }
}

void Runner::RunThread(ThreadState* ts, const std::vector<Op>& ops) {
  for (const Op& op : ops) {
    if (Failed()) break;
    ts->phase.store(CodeName(op.code));
    Exec(ts, op);
  }
  ts->phase.store("segment done");
}

// Every value and count the model predicts; called when nothing is in
// flight (after WaitForAll, or after the engine was destroyed).
void Runner::CheckState(const char* when) {
  for (auto& ts : threads_) {
    for (VarState& v : ts->vars) {
      if (v.live && v.value != v.expect) Fail(std::string(when) + ": " + v.name + " differs from the serial run");
      if (v.readers.load() != 0 || v.writers.load() != 0) {
        Fail(std::string(when) + ": a function still uses " + v.name);
      }
      if (v.deleted) {
        if (v.deletions.load() != 1) {
          Fail(std::string(when) + ": DeleteVariable(" + v.name + ") ran " +
               std::to_string(v.deletions.load()) + " times");
        } else if (v.value_at_delete != v.expect_at_delete) {
          Fail(std::string(when) + ": " + v.name + " was deleted with a value that differs from the serial run");
        }
      }
    }
    for (FnSpec& s : ts->specs) {
      if (s.runs.load() != s.expected_runs) {
        Fail(std::string(when) + ": " + s.label + " ran " + std::to_string(s.runs.load()) +
             " times, the model says " + std::to_string(s.expected_runs) +
             " (the others were skipped because a var it uses failed)");
      }
      if (s.raises.load() != s.expected_raises) {
        Fail(std::string(when) + ": " + s.label + " raised " + std::to_string(s.raises.load()) +
             " failures, the model says " + std::to_string(s.expected_raises));
      }
    }
  }
}

void Runner::Barrier() {
  main_phase_.store("WaitForAll");
  bool threw = false;
  std::uint64_t instance = 0;
  try {
    engine_->WaitForAll();
  } catch (const Injected& e) {
    threw = true;
    instance = e.instance;
  } catch (const std::exception& e) {
    Fail(std::string("WaitForAll raised an unexpected ") + e.what());
  }
  main_phase_.store("checking");
  {
    std::lock_guard<std::mutex> lock(raised_mu_);
    bool undelivered_left = false;
    for (const auto& [inst, origin] : raised_) {
      if (!delivered_.count(inst)) undelivered_left = true;
    }
    if (threw) {
      if (!raised_.count(instance) || delivered_.count(instance)) {
        Fail("WaitForAll rethrew a failure that WaitForVar already delivered (or never raised)");
      }
    } else if (undelivered_left) {
      Fail("WaitForAll did not rethrow a failure that no WaitForVar delivered");
    }
    raised_.clear();  // WaitForAll cleared them all
    delivered_.clear();
  }
  for (auto& ts : threads_) {
    for (VarState& v : ts->vars) {
      v.failed = false;
      v.candidates.clear();
    }
  }
  ++threads_.front()->stats.waits;
  CheckState("after WaitForAll");
}

void Runner::Watchdog() {
  std::unique_lock<std::mutex> lock(done_mu_);
  if (done_cv_.wait_for(lock, std::chrono::duration<double>(options_.deadline_seconds),
                        [this] { return done_; })) {
    return;
  }
  std::fprintf(stderr, "fuzz program hung for %.0f s; main thread in %s\n",
               options_.deadline_seconds, main_phase_.load());
  for (auto& ts : threads_) {
    std::fprintf(stderr, "  pushing thread %d in %s\n", ts->index, ts->phase.load());
  }
  std::fprintf(stderr, "%s", Describe(program_).c_str());
  std::fflush(stderr);
  // Every thread's stack, through gdb when it is installed.
  if (::access("/usr/bin/gdb", X_OK) == 0) {
    ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    const std::string cmd = Cat("/usr/bin/gdb -p ", ::getpid(),
                                " -batch -ex 'thread apply all bt 15' 2>/dev/null "
                                "| grep '^#\\|^Thread' 1>&2");
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "(gdb could not attach)\n");
  }
  std::abort();
}

RunResult Runner::Run() {
  for (int i = 0; i < program_.threads; ++i) {
    threads_.push_back(std::make_unique<ThreadState>());
    threads_.back()->index = i;
  }
  std::thread watchdog([this] { Watchdog(); });
  EngineOptions o;
  o.kind = program_.kind;
  o.cpu_worker_threads = program_.workers;
  o.cpu_priority_threads = 1;
  o.gpu_worker_threads = 1;
  o.gpu_copy_threads = 1;
  o.max_in_flight = program_.max_in_flight;
  o.simulated_gpus = program_.simulated_gpus;
  o.worker_spin_us = program_.worker_spin_us;
  completers_ = std::make_unique<Completers>(program_.completers);
  try {
    owner_ = CreateEngine(o);
    engine_ = owner_.get();
  } catch (const std::exception& e) {
    Fail(std::string("CreateEngine: ") + e.what());
  }
  if (engine_ != nullptr) {
    for (int k = 0; k < kSharedVars; ++k) {
      VarState& v = shared_.emplace_back();
      v.name = Cat("s", k);
      v.handle = engine_->NewVariable();
      v.shared = true;
      v.live = true;
      v.value = v.expect = 0x5eed0000ull + static_cast<std::uint64_t>(k);
    }
    for (const Segment& seg : program_.segments) {
      main_phase_.store("segment");
      std::vector<std::thread> pushers;
      for (int t = 0; t < program_.threads; ++t) {
        pushers.emplace_back([this, t, &seg] {
          RunThread(threads_[static_cast<std::size_t>(t)].get(), seg.threads[static_cast<std::size_t>(t)]);
        });
      }
      for (auto& th : pushers) th.join();
      if (Failed()) break;
      if (seg.wait_all) Barrier();
      if (Failed()) break;
    }
    const bool destroy_in_flight =
        program_.destroy_in_flight && options_.allow_destroy_in_flight && !Failed();
    if (destroy_in_flight) {
      // The destructor must finish every pushed function (completers keep
      // finishing async ones meanwhile).
      main_phase_.store("destroying the engine with work in flight");
      owner_.reset();
      completers_->WaitIdle();
      CheckState("after the engine was destroyed");
    } else {
      if (!Failed()) Barrier();
      main_phase_.store("final WaitForAll");
      try {
        engine_->WaitForAll();
      } catch (const std::exception&) {
      }
      main_phase_.store("waiting for completers");
      completers_->WaitIdle();
      main_phase_.store("destroying the engine");
      owner_.reset();
    }
  }
  completers_.reset();
  {
    std::lock_guard<std::mutex> lock(done_mu_);
    done_ = true;
  }
  done_cv_.notify_all();
  watchdog.join();

  RunResult result;
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    result.ok = error_.empty();
    result.error = error_;
  }
  for (auto& ts : threads_) {
    result.stats.functions += ts->stats.functions;
    result.stats.ran += ts->stats.ran;
    result.stats.skipped += ts->stats.skipped;
    result.stats.failures += ts->stats.failures;
    result.stats.waits += ts->stats.waits;
    result.stats.rejected += ts->stats.rejected;
  }
  return result;
}

}  // namespace

RunOptions OptionsFromEnv() {
  RunOptions o;
  auto on = [](const char* name) {
    const char* s = std::getenv(name);
    return s != nullptr && s[0] == '1';
  };
  if (on("DEPENGINE_IGNORE_BUG5")) o.allow_destroy_in_flight = false;
  if (on("DEPENGINE_IGNORE_BUG3")) o.check_wait_for_readers = false;
  return o;
}

RunResult RunProgram(const std::uint8_t* data, std::size_t size, const RunOptions& options) {
  const Program program = Decode(data, size);
  Runner runner(program, options);
  return runner.Run();
}

std::string DescribeProgram(const std::uint8_t* data, std::size_t size) {
  return Describe(Decode(data, size));
}

}  // namespace depengine::fuzz
