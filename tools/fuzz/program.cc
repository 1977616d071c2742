// Fuzz programs: decoding, the serial model, and the checked run. See
// program.h for what is checked.
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

namespace depengine::fuzz {
namespace {

// Concatenates with a stream: `"literal" + std::to_string(n)` trips GCC 12's
// -Wrestrict false positive (GCC bug 105651) under -O3 -Werror.
template <class... Parts>
std::string Cat(const Parts&... parts) {
  std::ostringstream o;
  (o << ... << parts);
  return o.str();
}

// ---------------------------------------------------------------- the decoded program

constexpr int kSharedVars = 2;     // read by every thread, never written
constexpr int kMaxLiveVars = 12;   // per thread
constexpr int kMaxLiveOps = 4;     // prebuilt operators per thread
constexpr int kMaxSegments = 8;
constexpr int kMaxOpsPerSegment = 24;

enum class Code : std::uint8_t {
  kNewVar, kPushSync, kPushAsync, kNewOperator, kPushOperator, kDeleteOperator, kDeleteVar,
  kWaitForVar, kMisuse
};
enum class Fault : std::uint8_t { kNone, kThrowBefore, kThrowAfter };
// How an async function finishes.
enum class Mode : std::uint8_t {
  kSync,                 // a PushSync function
  kInline,               // calls its callback before returning
  kCompleter,            // a completer thread calls the callback later
  kCompleterError,       // ... with an error
  kThrowBeforeCallback,  // throws without calling the callback
  kCallbackThenThrow,    // calls the callback, then throws (reaches only WaitForAll)
  kCallbackTwice         // a completer calls the callback twice (the second must be rejected)
};
enum class Misuse : std::uint8_t { kNullVar, kBothLists, kPriority, kGpu, kNullFn, kCount };

const char* CodeName(Code c) {
  static const char* const kNames[] = {"NewVar",         "PushSync",   "PushAsync",
                                       "NewOperator",    "Push",       "DeleteOperator",
                                       "DeleteVariable", "WaitForVar", "Misuse"};
  return kNames[static_cast<int>(c)];
}
const char* ModeName(Mode m) {
  static const char* const kNames[] = {"sync",           "inline",          "completer",
                                       "completer+error", "throw-before-cb", "cb-then-throw",
                                       "cb-twice"};
  return kNames[static_cast<int>(m)];
}

// A var reference: >= 0 is one of the thread's own vars (by creation
// index); < 0 is shared var (-1 - ref).
struct Op {
  Code code = Code::kNewVar;
  std::vector<int> reads, writes;
  Fault fault = Fault::kNone;
  Mode mode = Mode::kSync;
  bool wait_inside = false;  // the function calls WaitForAll (must be rejected)
  int delay = 0;             // 0 none, 1 yield, 2 short spin, 3 longer spin
  int priority = 0;
  FnProperty prop = FnProperty::kNormal;
  Context ctx;
  int target = 0;            // var or operator index
  Misuse misuse = Misuse::kNullVar;
};

struct Segment {
  std::vector<std::vector<Op>> threads;
  bool wait_all = true;  // the barrier calls WaitForAll and checks everything
};

struct Program {
  EngineKind kind = EngineKind::kNaive;
  int workers = 1;
  int threads = 1;
  std::size_t max_in_flight = 0;
  int simulated_gpus = 0;
  int completers = 1;
  bool destroy_in_flight = false;
  std::vector<Segment> segments;
};

class Reader {
 public:
  Reader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  std::uint8_t Next() { return pos_ < size_ ? data_[pos_++] : 0; }
  bool Done() const { return pos_ >= size_; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

// What the decoder knows of one thread while decoding: which vars and
// operators are live, so that every op it makes names live objects.
struct DecodeState {
  int next_var = 0;
  std::vector<int> live_vars;
  int next_op = 0;
  std::vector<int> live_ops;
  std::map<int, std::vector<int>> op_vars;  // own vars each live operator uses
};

void DecodeVarSets(Reader& r, const DecodeState& s, Op* op) {
  const int nr = r.Next() % 4;
  for (int i = 0; i < nr; ++i) {
    const std::uint8_t b = r.Next();
    if (s.live_vars.empty() || b % 8 == 7) {
      op->reads.push_back(-1 - (b >> 3) % kSharedVars);
    } else {
      op->reads.push_back(s.live_vars[b % s.live_vars.size()]);
    }
  }
  const int nw = s.live_vars.empty() ? 0 : r.Next() % 3;
  for (int i = 0; i < nw; ++i) op->writes.push_back(s.live_vars[r.Next() % s.live_vars.size()]);
  // A var in both lists is a misuse, tested on purpose elsewhere.
  auto& rd = op->reads;
  rd.erase(std::remove_if(rd.begin(), rd.end(),
                          [&](int v) {
                            return std::find(op->writes.begin(), op->writes.end(), v) !=
                                   op->writes.end();
                          }),
           rd.end());
}

void DecodeFunction(Reader& r, const Program& p, bool async, Op* op) {
  const std::uint8_t f = r.Next();
  op->delay = (f >> 4) & 3;
  if (!async) {
    op->mode = Mode::kSync;
    op->fault = f % 16 == 0 ? Fault::kThrowBefore : f % 16 == 1 ? Fault::kThrowAfter : Fault::kNone;
    op->wait_inside = f % 16 == 2;
  } else {
    static const Mode kModes[16] = {
        Mode::kInline,    Mode::kInline,         Mode::kInline,
        Mode::kInline,    Mode::kInline,         Mode::kCompleter,
        Mode::kCompleter, Mode::kCompleter,      Mode::kCompleter,
        Mode::kCompleter, Mode::kCompleterError, Mode::kThrowBeforeCallback,
        Mode::kCallbackThenThrow, Mode::kCallbackTwice, Mode::kCompleter,
        Mode::kInline};
    op->mode = kModes[f % 16];
    // A second callback call after the engine is gone would be the
    // program's bug, not the engine's.
    if (op->mode == Mode::kCallbackTwice && p.destroy_in_flight) op->mode = Mode::kCompleter;
  }
  const std::uint8_t pr = r.Next() % 8;
  op->prop = pr == 0   ? FnProperty::kCPUPrioritized
             : pr == 1 ? FnProperty::kAsync
             : pr == 2 ? FnProperty::kCopyToGPU
             : pr == 3 ? FnProperty::kCopyFromGPU
                       : FnProperty::kNormal;
}

void DecodePlacement(Reader& r, const Program& p, Op* op) {
  const std::uint8_t b = r.Next();
  op->priority = b % 4 == 0 ? static_cast<int>((b >> 2) % 7) - 3
                 : b == 1   ? kMaxPriority
                 : b == 2   ? kMinPriority
                            : 0;
  const std::uint8_t c = r.Next() % 8;
  if (c == 0) {
    op->ctx = Context::CPU(1);
  } else if (c == 1 && p.simulated_gpus >= 1) {
    op->ctx = Context::GPU(0);
  } else if (c == 2 && p.simulated_gpus >= 2) {
    op->ctx = Context::GPU(1);
  } else if (c == 3) {
    op->ctx = Context::CPUPinned(0);
  } else {
    op->ctx = Context::CPU(0);
  }
}

Op DecodeOp(Reader& r, const Program& p, DecodeState& s) {
  static const Code kTable[16] = {
      Code::kNewVar,       Code::kPushSync,     Code::kPushSync,       Code::kPushSync,
      Code::kPushSync,     Code::kPushAsync,    Code::kPushAsync,      Code::kPushAsync,
      Code::kNewOperator,  Code::kPushOperator, Code::kPushOperator,   Code::kDeleteOperator,
      Code::kDeleteVar,    Code::kWaitForVar,   Code::kWaitForVar,     Code::kMisuse};
  Op op;
  op.code = kTable[r.Next() % 16];
  // Fall back to a push when an op has nothing to act on.
  if (op.code == Code::kNewVar && s.live_vars.size() >= kMaxLiveVars) op.code = Code::kPushSync;
  if (op.code == Code::kNewOperator && s.live_ops.size() >= kMaxLiveOps) op.code = Code::kPushAsync;
  if ((op.code == Code::kPushOperator || op.code == Code::kDeleteOperator) && s.live_ops.empty()) {
    op.code = Code::kPushSync;
  }
  std::vector<int> deletable;
  if (op.code == Code::kDeleteVar) {
    for (int v : s.live_vars) {
      bool used = false;
      for (const auto& [id, vars] : s.op_vars) {
        used = used || std::find(vars.begin(), vars.end(), v) != vars.end();
      }
      if (!used) deletable.push_back(v);
    }
    if (deletable.empty()) op.code = Code::kWaitForVar;
  }
  switch (op.code) {
    case Code::kNewVar:
      op.target = s.next_var++;
      s.live_vars.push_back(op.target);
      break;
    case Code::kPushSync:
    case Code::kPushAsync:
      DecodeVarSets(r, s, &op);
      DecodeFunction(r, p, op.code == Code::kPushAsync, &op);
      DecodePlacement(r, p, &op);
      break;
    case Code::kNewOperator: {
      DecodeVarSets(r, s, &op);
      DecodeFunction(r, p, /*async=*/true, &op);
      op.target = s.next_op++;
      s.live_ops.push_back(op.target);
      std::vector<int>& used = s.op_vars[op.target];
      for (int v : op.reads) {
        if (v >= 0) used.push_back(v);
      }
      used.insert(used.end(), op.writes.begin(), op.writes.end());
      break;
    }
    case Code::kPushOperator:
      op.target = s.live_ops[r.Next() % s.live_ops.size()];
      DecodePlacement(r, p, &op);
      break;
    case Code::kDeleteOperator: {
      const std::size_t i = r.Next() % s.live_ops.size();
      op.target = s.live_ops[i];
      s.live_ops.erase(s.live_ops.begin() + static_cast<std::ptrdiff_t>(i));
      s.op_vars.erase(op.target);
      break;
    }
    case Code::kDeleteVar: {
      op.target = deletable[r.Next() % deletable.size()];
      s.live_vars.erase(std::find(s.live_vars.begin(), s.live_vars.end(), op.target));
      break;
    }
    case Code::kWaitForVar: {
      const std::uint8_t b = r.Next();
      op.target = s.live_vars.empty() || b % 8 == 7 ? -1 - (b >> 3) % kSharedVars
                                                    : s.live_vars[b % s.live_vars.size()];
      break;
    }
    case Code::kMisuse: {
      const std::uint8_t b = r.Next();
      op.misuse = static_cast<Misuse>(b % static_cast<int>(Misuse::kCount));
      if (op.misuse == Misuse::kBothLists && s.live_vars.empty()) op.misuse = Misuse::kNullVar;
      if (op.misuse == Misuse::kBothLists) op.target = s.live_vars[(b >> 3) % s.live_vars.size()];
      op.priority = (b >> 3) % 2 ? kMaxPriority + 1 : kMinPriority - 1;
      break;
    }
  }
  return op;
}

Program Decode(const std::uint8_t* data, std::size_t size) {
  Reader r(data, size);
  Program p;
  const std::uint8_t h0 = r.Next();
  p.kind = static_cast<EngineKind>(h0 % 3);
  p.workers = 1 + (h0 / 3) % 3;
  const std::uint8_t h1 = r.Next();
  p.threads = 1 + h1 % 3;
  p.max_in_flight = (h1 >> 2) % 4 == 0 ? 1 + (h1 >> 4) % 8 : 0;
  p.destroy_in_flight = (h1 >> 7) & 1;
  const std::uint8_t h2 = r.Next();
  p.simulated_gpus = h2 % 3;
  p.completers = 1 + (h2 >> 2) % 2;
  std::vector<DecodeState> states(static_cast<std::size_t>(p.threads));
  while (!r.Done() && static_cast<int>(p.segments.size()) < kMaxSegments) {
    Segment seg;
    seg.threads.resize(static_cast<std::size_t>(p.threads));
    for (int t = 0; t < p.threads && !r.Done(); ++t) {
      const int n = 1 + r.Next() % kMaxOpsPerSegment;
      for (int i = 0; i < n && !r.Done(); ++i) {
        seg.threads[static_cast<std::size_t>(t)].push_back(DecodeOp(r, p, states[static_cast<std::size_t>(t)]));
      }
    }
    seg.wait_all = r.Next() % 4 != 0;
    p.segments.push_back(std::move(seg));
  }
  return p;
}

std::string VarList(const std::vector<int>& vars) {
  std::string s = "{";
  for (std::size_t i = 0; i < vars.size(); ++i) {
    if (i > 0) s += ",";
    s += vars[i] >= 0 ? 'v' : 's';
    s += std::to_string(vars[i] >= 0 ? vars[i] : -1 - vars[i]);
  }
  return s + "}";
}

std::string DescribeOp(const Op& op) {
  std::ostringstream o;
  o << CodeName(op.code);
  switch (op.code) {
    case Code::kNewVar:
    case Code::kDeleteVar:
      o << " v" << op.target;
      break;
    case Code::kWaitForVar:
      o << " " << VarList({op.target});
      break;
    case Code::kPushSync:
    case Code::kPushAsync:
    case Code::kNewOperator:
      o << " reads " << VarList(op.reads) << " writes " << VarList(op.writes) << " "
        << ModeName(op.mode);
      if (op.fault == Fault::kThrowBefore) o << " throw-before";
      if (op.fault == Fault::kThrowAfter) o << " throw-after";
      if (op.wait_inside) o << " wait-inside";
      o << " prop " << static_cast<int>(op.prop) << " delay " << op.delay;
      if (op.code == Code::kNewOperator) o << " -> op" << op.target;
      break;
    case Code::kPushOperator:
    case Code::kDeleteOperator:
      o << " op" << op.target;
      break;
    case Code::kMisuse:
      o << " kind " << static_cast<int>(op.misuse);
      break;
  }
  if (op.code == Code::kPushSync || op.code == Code::kPushAsync || op.code == Code::kPushOperator) {
    o << " ctx " << static_cast<int>(op.ctx.dev_type) << ":" << op.ctx.dev_id << " prio "
      << op.priority;
  }
  return o.str();
}

std::string Describe(const Program& p) {
  std::ostringstream o;
  o << "engine " << EngineKindName(p.kind) << " workers " << p.workers << " threads " << p.threads
    << " max_in_flight " << p.max_in_flight << " simulated_gpus " << p.simulated_gpus
    << " completers " << p.completers << (p.destroy_in_flight ? " destroy-in-flight" : "") << "\n";
  for (std::size_t s = 0; s < p.segments.size(); ++s) {
    o << "segment " << s << (p.segments[s].wait_all ? " (then WaitForAll)" : "") << "\n";
    for (std::size_t t = 0; t < p.segments[s].threads.size(); ++t) {
      for (const Op& op : p.segments[s].threads[t]) o << "  t" << t << ": " << DescribeOp(op) << "\n";
    }
  }
  return o.str();
}

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
  Injected Raise(FnSpec* s, bool weak);
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

  // Failures raised, by instance: (origin, weak). Weak ones were thrown after
  // the callback and reach only WaitForAll, at a time the program cannot know.
  std::mutex raised_mu_;
  std::map<std::uint64_t, std::pair<std::uint64_t, bool>> raised_;
  std::set<std::uint64_t> delivered_;  // strong instances WaitForVar delivered
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

Injected Runner::Raise(FnSpec* s, bool weak) {
  const std::uint64_t instance = next_instance_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(raised_mu_);
    raised_[instance] = {s->origin, weak};
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
    throw Raise(s, false);
  }
  Compute(s);
  Exit(s);
  if (s->fault == Fault::kThrowAfter) throw Raise(s, false);
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
        cb(std::make_exception_ptr(Raise(s, false)));
      });
      return;
    case Mode::kThrowBeforeCallback:
      Exit(s);
      throw Raise(s, false);
    case Mode::kCallbackThenThrow:
      Compute(s);
      Exit(s);
      cb();
      throw Raise(s, true);
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
                          s->mode == Mode::kThrowBeforeCallback;
  if (!no_compute) {
    std::uint64_t h = Mix(s->origin, 0x51ed);
    for (VarState* r : s->reads) h = Mix(h, r->expect);
    for (VarState* w : s->writes) w->expect = Mix(w->expect, h);
  }
  if (fails_vars || s->mode == Mode::kCallbackThenThrow) {
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
    if (it == raised_.end() || it->second.second) {
      Fail("WaitForVar(" + v->name + ") rethrew a failure that was never attached to a var");
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
    bool strong_left = false;
    for (const auto& [inst, info] : raised_) {
      if (!info.second && !delivered_.count(inst)) strong_left = true;
    }
    if (threw) {
      auto it = raised_.find(instance);
      if (it == raised_.end() || (!it->second.second && delivered_.count(instance))) {
        Fail("WaitForAll rethrew a failure that WaitForVar already delivered (or never raised)");
      }
    } else if (strong_left) {
      Fail("WaitForAll did not rethrow a failure that no WaitForVar delivered");
    }
    // Strong failures are all cleared now; a weak one stays possible until
    // a WaitForAll rethrows it.
    for (auto it = raised_.begin(); it != raised_.end();) {
      if (!it->second.second || (threw && it->first == instance)) {
        it = raised_.erase(it);
      } else {
        ++it;
      }
    }
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
