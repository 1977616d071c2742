// depengine: a dependency engine that runs a serial program's functions in
// parallel by following the vars they read and write.
//
// The API mirrors MXNet's engine.h (see docs/design.md for the internals).
// A program pushes functions with the vars they read (`const_vars`) and the
// vars they write (`mutable_vars`). Two functions where one writes a var the
// other uses run in push order; everything else may run in parallel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "depengine/version.h"

namespace depengine {

// The kind of device a function runs on.
enum class DeviceType { kCPU = 1, kGPU = 2, kCPUPinned = 3 };

// Where a function runs: a device type and the device's index. A call given
// a context with a dev_id outside [0, kMaxDevicesPerType), a GPU context
// beyond the GPUs present (or EngineOptions::simulated_gpus), or a
// DeviceType not listed here raises std::invalid_argument. CPUPinned(i) runs
// where CPU(i) does.
inline constexpr int kMaxDevicesPerType = 64;
struct Context {
  DeviceType dev_type = DeviceType::kCPU;
  int dev_id = 0;

  static Context CPU(int dev_id = 0) { return {DeviceType::kCPU, dev_id}; }
  static Context GPU(int dev_id = 0) { return {DeviceType::kGPU, dev_id}; }
  static Context CPUPinned(int dev_id = 0) { return {DeviceType::kCPUPinned, dev_id}; }

  friend bool operator==(const Context& a, const Context& b) {
    return a.dev_type == b.dev_type && a.dev_id == b.dev_id;
  }
  friend bool operator!=(const Context& a, const Context& b) { return !(a == b); }
};

// What a running function learns from the engine: its context, and the
// stream of the thread that runs it on the function's device (a
// cudaStream_t on a real GPU, on every engine kind; nullptr on CPU and on
// simulated GPUs). The engine waits for the stream after a sync function
// returns, so the work it queued there is done before its successors start;
// an async function finishes with depengine::CompleteWhenStreamDone
// (depengine/gpu.h).
struct RunContext {
  Context ctx;
  void* stream = nullptr;
};

// How a function is scheduled.
enum class FnProperty {
  kNormal,          // the context's normal worker pool
  kCopyFromGPU,     // the copy workers of the source GPU
  kCopyToGPU,       // the copy workers of the target GPU
  kCPUPrioritized,  // the CPU priority pool, shared by all CPU devices
  kAsync            // run on the thread that made it ready, no queue hop
};

// Priorities accepted by Push, PushAsync and PushSync; a value outside
// [kMinPriority, kMaxPriority] raises std::invalid_argument.
inline constexpr int kMinPriority = -1'000'000;
inline constexpr int kMaxPriority = 1'000'000;

// The most vars one function may name: entries of const_vars and
// mutable_vars together, counted before duplicates merge. NewOperator,
// PushAsync and PushSync raise std::invalid_argument beyond it.
inline constexpr std::size_t kMaxVarsPerFunction = 65'535;

class Engine;
class Var;  // opaque: a token standing for a resource functions use
class Opr;  // opaque: a prebuilt operator (NewOperator)
using VarHandle = Var*;
using OprHandle = Opr*;

// Finishes an asynchronous function. Copyable; call exactly one copy exactly
// once, from any thread, at any time after the function started.
// Passing a non-null `error` fails the function: every var it writes is
// marked failed (see Engine::WaitForVar). A second call raises
// std::logic_error and changes nothing; so does a call made after the
// function's body threw without having called it (the throw finished the
// function, see Engine::PushAsync). (A callback made by
// Engine::CreateCallback finishes no function: see there.)
// Memory ordering: whatever the caller did before the call is visible to
// every later function that uses a var the function writes or reads.
class CallbackOnComplete {
 public:
  CallbackOnComplete() = default;
  void operator()(std::exception_ptr error = nullptr) const;

 private:
  friend class Engine;
  // Set by Engine::CreateCallback (the seed's form): callback_(engine_,
  // param_), with no error.
  void (*callback_)(Engine*, void*) = nullptr;
  // Engine-made callbacks: complete_(engine_, param_, ticket_, error). A plain
  // function, not a virtual call through engine_, so that a callback called
  // a second time after its engine was destroyed is still told so.
  void (*complete_)(Engine*, void*, std::uint64_t, std::exception_ptr) = nullptr;
  Engine* engine_ = nullptr;
  void* param_ = nullptr;
  // Engine-made callbacks: identifies one execution so that a second call
  // is detected even after the engine reused its internal block.
  std::uint64_t ticket_ = 0;
};

using SyncFn = std::function<void(RunContext)>;
using AsyncFn = std::function<void(RunContext, CallbackOnComplete)>;

// The engine's interface. Create one with CreateEngine(), or use the
// process-wide Engine::Get(). Every member is callable from any thread at the
// same time; the pushes of one thread keep that thread's program order.
class Engine {
 public:
  using CallbackOnComplete = depengine::CallbackOnComplete;
  using SyncFn = depengine::SyncFn;
  using AsyncFn = depengine::AsyncFn;
  using VarHandle = depengine::VarHandle;
  using OprHandle = depengine::OprHandle;

  // Tells the engine the process is shutting down, so it prints less.
  // Optional.
  virtual void NotifyShutdown() = 0;

  // Returns a new var, owned by this engine until DeleteVariable.
  virtual VarHandle NewVariable() = 0;

  // Builds an operator that Push can run many times without allocating a
  // closure or a var list per push. Duplicate vars within one list are
  // merged; a var in both lists, a null var, a null `fn` or more than
  // kMaxVarsPerFunction vars raises std::invalid_argument. `opr_name` must
  // outlive the operator.
  virtual OprHandle NewOperator(AsyncFn fn, const std::vector<VarHandle>& const_vars,
                                const std::vector<VarHandle>& mutable_vars,
                                FnProperty prop = FnProperty::kNormal,
                                const char* opr_name = nullptr) = 0;

  // Deletes `op` once every push of it made before this call has finished.
  // Pushing or deleting it afterwards raises std::logic_error (reliably
  // until 1,024 more operators of this engine have been deleted; its memory
  // is not reused before that).
  virtual void DeleteOperator(OprHandle op) = 0;

  // Runs the prebuilt operator `op` on `exec_ctx`, ordered against other
  // functions by its vars exactly as PushAsync would be.
  virtual void Push(OprHandle op, Context exec_ctx, int priority = 0, bool profiling = false) = 0;

  // Runs `exec_fun` after every earlier function that writes a var in
  // `const_vars`, and after every earlier function that reads or writes a
  // var in `mutable_vars`; the function is finished when its callback is
  // called, or, when the body itself calls it, once the body returns (so an
  // exception the body throws after calling it still fails the function).
  // A body that throws before its callback was called finishes the function
  // then, failed; a copy of the callback called later (say, by a thread the
  // body handed it to) raises std::logic_error and changes nothing.
  // An exception thrown after a callback called elsewhere finished the
  // function reaches only WaitForAll, and only once the body has returned:
  // WaitForAll does not wait for that body (the function is already
  // finished), so one that returns before the throw is caught does not
  // report it; the next one does. Returns at once (unless
  // EngineOptions::max_in_flight is reached).
  // Memory ordering: whatever a function did before it finished is visible
  // to every later function that uses one of its written vars, and to the
  // caller of WaitForVar on them.
  virtual void PushAsync(AsyncFn exec_fun, Context exec_ctx,
                         const std::vector<VarHandle>& const_vars,
                         const std::vector<VarHandle>& mutable_vars,
                         FnProperty prop = FnProperty::kNormal, int priority = 0,
                         const char* opr_name = nullptr) = 0;

  // Runs `delete_fn` after every earlier function that uses `var`, then
  // frees `var`. Any use of `var` after this call raises
  // std::invalid_argument (reliably until 1,024 more vars of this engine
  // have been freed; its memory is not reused before that).
  // Deletions are queued ahead of normal work so memory comes back promptly.
  // A deletion counts toward EngineOptions::max_in_flight but never waits
  // for room, for the same reason.
  virtual void DeleteVariable(SyncFn delete_fn, Context exec_ctx, VarHandle var) = 0;

  // Returns once every function pushed before this call that uses `var` has
  // finished. If `var` failed, rethrows its failure and clears it.
  // Calling it from a function running on this engine, or on one of its
  // worker threads (from a destructor in a deleted operator's closure, say),
  // raises std::logic_error (it would deadlock).
  virtual void WaitForVar(VarHandle var) = 0;

  // Returns once every function pushed before this call has finished, then
  // rethrows the first failure raised since the previous WaitForAll that no
  // WaitForVar delivered, and clears the failures of every var. A failure
  // counts as delivered once a WaitForVar has taken it off its var, even if
  // that call, on another thread, has not returned yet. One
  // exception carries one failure: any further undelivered ones are named on
  // stderr (WaitForVar on each var delivers each failure as an exception).
  // Calling it from a function running on this engine, on one of its worker
  // threads, or while a callback call finishes one of its functions (from a
  // destructor in the function's closure, say), raises std::logic_error (it
  // would deadlock).
  virtual void WaitForAll() = 0;

  // Finishes every pushed function, then joins the engine's threads.
  // Failures that no WaitForVar or WaitForAll delivered are named on stderr
  // (not after NotifyShutdown). An engine from CreateEngine released on one
  // of its own threads, inside one of its functions or while a callback
  // finishes one (for example when a function's closure holds the engine's
  // last shared_ptr and releases it as the function finishes) cannot wait
  // for itself there: the destructor returns at once, and a thread of the
  // engine's own finishes the pushed work and joins the workers once that
  // function is done.
  virtual ~Engine() = default;

  // The process-wide engine, built from EngineOptions::FromEnv() on first
  // use and destroyed at exit. Functions that run while it finishes its work
  // at exit may still call Get(). Raises std::logic_error once the engine
  // has been destroyed at exit (a static destroyed after it calling Get()).
  static Engine* Get();
  // A shared reference to Get()'s engine, for singletons that must be
  // destroyed before it. Most users should not call this. Raises
  // std::logic_error once the engine is being destroyed at exit, or has been.
  static std::shared_ptr<Engine> _GetSharedRef();

  // PushAsync for a synchronous function: finished when `exec_fn` returns
  // (or throws, which fails it).
  void PushSync(SyncFn exec_fn, Context exec_ctx, const std::vector<VarHandle>& const_vars,
                const std::vector<VarHandle>& mutable_vars, FnProperty prop = FnProperty::kNormal,
                int priority = 0, const char* opr_name = nullptr) {
    PushSyncImpl(std::move(exec_fn), exec_ctx, const_vars, mutable_vars, prop, priority, opr_name);
  }

  // Makes a callback that calls `callback(this, param)` (the seed's form).
  // It finishes no function of the engine: each call calls `callback` again
  // (a second call is not detected). An `error` passed to it belongs to no
  // var, so it reaches the program through the next WaitForAll, like the
  // failure of a function that writes no var; it is recorded before
  // `callback` is called.
  CallbackOnComplete CreateCallback(void (*callback)(Engine*, void*), void* param) {
    CallbackOnComplete ret;
    ret.callback_ = callback;
    ret.engine_ = this;
    ret.param_ = param;
    return ret;
  }

 protected:
  friend class depengine::CallbackOnComplete;  // calls RecordCallbackError
  // PushSync without wrapping `exec_fn` in a second closure.
  virtual void PushSyncImpl(SyncFn exec_fn, Context exec_ctx,
                            const std::vector<VarHandle>& const_vars,
                            const std::vector<VarHandle>& mutable_vars, FnProperty prop,
                            int priority, const char* opr_name) = 0;
  // Keeps an error passed to a CreateCallback callback for the next
  // WaitForAll. The engines of this library override it; the default, for
  // an Engine implemented elsewhere, names the error on stderr.
  virtual void RecordCallbackError(std::exception_ptr error);
  // Builds an engine-made callback: calling it calls
  // complete(this, param, ticket, error).
  CallbackOnComplete MakeCallback(void (*complete)(Engine*, void*, std::uint64_t,
                                                   std::exception_ptr),
                                  void* param, std::uint64_t ticket) {
    CallbackOnComplete ret;
    ret.complete_ = complete;
    ret.engine_ = this;
    ret.param_ = param;
    ret.ticket_ = ticket;
    return ret;
  }
};

// The three engines.
enum class EngineKind {
  // Runs each function on the thread that makes it ready, one at a time:
  // one pushed from inside a running function runs once that function
  // returns (a trampoline, so long chains do not recurse). For debugging.
  kNaive,
  kPooled,    // one normal and one copy queue shared by all devices
  kPerDevice  // worker pools per device, a CPU priority pool, GPU copy workers
};

// How to build an engine; 0 means a sensible default.
struct EngineOptions {
  EngineKind kind = EngineKind::kPerDevice;
  // The pooled engine has one normal pool (cpu_worker_threads, for every
  // device) and one copy pool (gpu_copy_threads); the naive engine no threads.
  // Each worker thread is named for the OS (top -H, gdb, perf) by its pool
  // and index, as in the profiler's trace: "cpu/normal/0", "cpu1/normal/0",
  // "cpu/priority/1", "gpu0/normal/0", "gpu0/copy/0", "pooled/normal/1",
  // "pooled/copy/0"; a name over Linux's 15 characters loses the end of the
  // pool's name and keeps the index ("pooled/norma/12").
  int cpu_worker_threads = 0;    // per CPU device (default: hardware threads)
  int cpu_priority_threads = 0;  // CPU priority pool (default: 2, per-device only)
  int gpu_worker_threads = 0;    // per GPU (default: 2, per-device only)
  int gpu_copy_threads = 0;      // per GPU (default: 1)
  // Bound on pushed-but-unfinished functions; 0 = none. A function's room
  // is back before its closure is destroyed, so a destructor in the closure
  // may push even when its function was the one filling the bound.
  std::size_t max_in_flight = 0;
  // Number of simulated GPUs: GPU contexts below this index run on CPU
  // threads with the GPU pools' routing, and RunContext::stream = nullptr.
  // Lets the per-device routing be tested without a GPU. Environment:
  // DEPENGINE_SIMULATED_GPUS.
  int simulated_gpus = 0;
  // When set, the engine records every function and writes a Chrome trace
  // here when it is destroyed (see depengine/profiler.h); when an earlier
  // engine of the process wrote its trace here, this one is added to the
  // file as another trace process. Environment: DEPENGINE_PROFILE.
  // CreateEngine raises std::invalid_argument, naming the path and the
  // reason, when the trace could not be written there (its directory is
  // missing or not writable, or the path is a directory), so that a long
  // run does not lose its trace at the end; a write that still fails then
  // (a full disk) is reported on stderr.
  std::string profile_path;
  // Debugging aid, 0 = off: report to stderr, once, every function that has
  // run longer than this many seconds (e.g. an async function whose
  // callback is never called). Environment: DEPENGINE_WATCHDOG_SECONDS.
  // CreateEngine raises std::invalid_argument for a negative value or NaN.
  double watchdog_seconds = 0;
  // How long, in microseconds, a worker that runs out of work keeps polling
  // its queue before it sleeps. A polling worker starts a new function
  // within a microsecond of its push; a sleeping one waits for the pusher's
  // wake-up call and the scheduler (1-20 us, more on a busy machine). But
  // polling holds a core while no work comes: a program that pushes one
  // function now and then pays about this much CPU time per worker per
  // pause. 0 = sleep at once (the least CPU for a trickle of work). Not 0
  // means a spin, unlike the fields above. Environment:
  // DEPENGINE_WORKER_SPIN_US. CreateEngine raises std::invalid_argument
  // outside [0, kMaxWorkerSpinUs].
  static constexpr int kDefaultWorkerSpinUs = 50;
  static constexpr int kMaxWorkerSpinUs = 10'000'000;
  int worker_spin_us = kDefaultWorkerSpinUs;

  // Reads DEPENGINE_ENGINE_TYPE (NaiveEngine, ThreadedEnginePooled or its
  // alias ThreadedEngine, ThreadedEnginePerDevice),
  // DEPENGINE_CPU_WORKER_NTHREADS, DEPENGINE_CPU_PRIORITY_NTHREADS,
  // DEPENGINE_GPU_WORKER_NTHREADS, DEPENGINE_GPU_COPY_NTHREADS,
  // DEPENGINE_MAX_IN_FLIGHT, DEPENGINE_SIMULATED_GPUS, DEPENGINE_PROFILE,
  // DEPENGINE_WATCHDOG_SECONDS and DEPENGINE_WORKER_SPIN_US. Surrounding whitespace is ignored
  // (except in DEPENGINE_PROFILE, a path), and a variable that is unset, empty or blank keeps its
  // default. Counts are decimal digits with an optional leading '+', up to the field's largest
  // value. An unknown value raises std::invalid_argument naming the variable
  // and what it accepts (a count too large for its field: "too large").
  static EngineOptions FromEnv();
};

// Builds an engine. Raises std::invalid_argument for a negative thread count
// or a profile_path where no trace can be written,
// and std::system_error, naming the pool, when the system refuses to start
// one of the engine's worker threads. The per-device engine starts the pools
// of other devices, and its CPU priority pool, at the first push that needs
// them: such a push raises that std::system_error instead, queues nothing,
// and the engine keeps working.
std::unique_ptr<Engine> CreateEngine(const EngineOptions& options = {});

// The name of an engine kind as DEPENGINE_ENGINE_TYPE spells it.
const char* EngineKindName(EngineKind kind);

}  // namespace depengine
