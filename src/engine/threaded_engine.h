// ThreadedEngine: the engine core shared by the three engines. It owns the
// dependency tracking (vars, slots, grants), the failure model, WaitForVar /
// WaitForAll, backpressure and the worker loop; an engine kind only decides
// where a ready block runs (Dispatch). See docs/design.md.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/mutex.h"
#include "common/quarantine.h"
#include "depengine/engine.h"
#include "engine/in_flight_limiter.h"
#include "engine/watchdog.h"
#include "exec/worker_pool.h"
#include "profiler/profiler.h"
#include "tracker/failure.h"
#include "tracker/opr_block.h"
#include "tracker/var.h"

namespace depengine::internal {

class ThreadedEngine : public Engine {
 public:
  friend class EngineHandle;  // forwards PushSyncImpl and RecordCallbackError

  explicit ThreadedEngine(const EngineOptions& options);
  ~ThreadedEngine() override;

  void NotifyShutdown() override { shutdown_notified_.store(true, std::memory_order_relaxed); }
  VarHandle NewVariable() override;
  OprHandle NewOperator(AsyncFn fn, const std::vector<VarHandle>& const_vars,
                        const std::vector<VarHandle>& mutable_vars, FnProperty prop,
                        const char* opr_name) override;
  void DeleteOperator(OprHandle op) override;
  void Push(OprHandle op, Context exec_ctx, int priority, bool profiling) override;
  void PushAsync(AsyncFn exec_fun, Context exec_ctx, const std::vector<VarHandle>& const_vars,
                 const std::vector<VarHandle>& mutable_vars, FnProperty prop, int priority,
                 const char* opr_name) override;
  void DeleteVariable(SyncFn delete_fn, Context exec_ctx, VarHandle var) override;
  void WaitForVar(VarHandle var) override;
  void WaitForAll() override;

 protected:
  void PushSyncImpl(SyncFn exec_fn, Context exec_ctx, const std::vector<VarHandle>& const_vars,
                    const std::vector<VarHandle>& mutable_vars, FnProperty prop, int priority,
                    const char* opr_name) override;
  // PushSyncImpl's work, taking the function from `*exec_fn`: EngineHandle
  // forwards its own parameter here, so the closure moves once, into the
  // block, instead of once more per layer.
  void PushSyncFrom(SyncFn* exec_fn, Context exec_ctx, const std::vector<VarHandle>& const_vars,
                    const std::vector<VarHandle>& mutable_vars, FnProperty prop, int priority,
                    const char* opr_name);
  // Logged like the failure of a function that writes no var.
  void RecordCallbackError(std::exception_ptr error) override { RecordFailure(std::move(error)); }
  // An engine-made callback's entry (see CallbackOnComplete): checks the
  // ticket, then finishes the block through FinishCallback.
  static void CompleteCallback(Engine* engine, void* param, std::uint64_t ticket,
                               std::exception_ptr error);
  void FinishCallback(OprBlock* b, std::uint64_t ticket, std::exception_ptr error);

  // Sends a ready block where it runs. Called by whichever thread made it
  // ready: a pusher, a worker, or a thread calling a callback.
  virtual void Dispatch(OprBlock* b) = 0;
  // Called by a push whose context is not CPU(0) or whose property is
  // kCPUPrioritized, after the checks and before anything is counted: an
  // engine kind that creates pools on demand creates the one Dispatch will
  // use for such a function here, so that a failure (std::system_error: the
  // system refused a thread) is the pusher's. Pools for CPU(0)'s other
  // properties must exist from the engine's construction.
  virtual void EnsurePool(const Context& /*ctx*/, FnProperty /*prop*/) {}

  // Runs `b` on the calling thread now, or after the function this thread is
  // already running inline for this engine (a trampoline: no deep recursion).
  void RunInline(OprBlock* b);
  // Queues `b` on `pool`, or keeps it as the calling worker's next block when
  // that worker serves `pool` and nothing of higher priority waits there.
  void DispatchToPool(OprBlock* b, WorkerPool* pool);
  // The loop of every worker thread.
  void WorkerLoop(WorkerPool& pool, int index);

  // Waits until every pushed function has finished, including those pushed
  // meanwhile by running functions. Engine kinds call it first in their
  // destructors, while the pools they own (destroyed, and their threads
  // joined, after it) still exist; EngineHandle calls it before it lets go
  // of the core. Calling it again when nothing runs returns at once.
  void Drain();

  const EngineOptions& options() const { return options_; }
  // How long the engine's idle workers poll before they sleep.
  std::chrono::microseconds WorkerSpin() const {
    return std::chrono::microseconds(options_.worker_spin_us);
  }

 public:
  // The profiler behind include/depengine/profiler.h.
  Profiler& profiler() { return *profiler_; }
  // internal::MarkScratchVar (engine/internal_hooks.h) for this engine.
  void MarkScratch(VarHandle var);
  // internal::MayHaveFailedVars / PushClearFailures for this engine.
  bool MayHaveFailedVars() const { return failed_var_count_.load(std::memory_order_acquire) > 0; }
  void PushClearFailures(Context ctx, const std::vector<VarHandle>& vars);

  // Whether destroying the engine now would wait for the calling thread:
  // it runs one of the engine's functions, is one of its workers, or is
  // finishing one of its functions through a callback.
  bool DestroyingWouldWaitForItself() const;

  // For tests: WaitForAll calls (and Drain rounds) that have started, each
  // counting only the functions pushed before it (see generation_).
  std::uint64_t WaitForAllsStartedForTesting() const {
    return generation_.load(std::memory_order_seq_cst);
  }

  // For tests: WaitForAll calls (and Drain rounds) blocked now, their spin
  // over (see WaitPendingZero).
  int BlockedWaitForAllsForTesting() const { return idle_waiters_.load(std::memory_order_seq_cst); }

  // For tests: what the engine's idle workers did, summed over its queues
  // (IdleCounts, exec/task_queue.h); zeros for an engine without workers.
  using IdleCounts = internal::IdleCounts;
  virtual IdleCounts WorkerIdleCountsForTesting() { return {}; }

  void SetProfileAll(bool on) { profile_all_.store(on, std::memory_order_relaxed); }
  // SetVarName (depengine/profiler.h): checks `var`, then names it in the
  // profiler's dumps.
  void NameVarInProfile(VarHandle var, const std::string& name) {
    CheckLiveVar(var, "SetVarName");
    profiler_->NameVar(var->profile_id, name);
  }
  bool ProfileAll() const { return profile_all_.load(std::memory_order_relaxed); }

 protected:
  // Validates a context for this engine; GPU ids must be simulated or present.
  void CheckContext(const Context& ctx, const char* call) const;

 private:
  struct WorkerTls;
  struct InlineFrame;

  // A list of vars as a push takes it: the API's vectors, or the engine's
  // own one-var pushes (WaitForVar, DeleteVariable) without building one.
  using VarList = std::span<Var* const>;
  // Starts fetching the cache lines a push of these vars will lock.
  static void PrefetchVars(VarList const_vars, VarList mutable_vars);
  // Exactly one of sync_fn / async_fn is non-null; it is moved from.
  void PushOneShot(SyncFn* sync_fn, AsyncFn* async_fn, Context ctx, VarList const_vars,
                   VarList mutable_vars, FnProperty prop, int priority, const char* name,
                   OprKind kind, const char* call);
  // Checks the handles of b's slots, locks their vars in address order,
  // queues every slot and dispatches b if all were granted. On an error
  // nothing is queued, b is recycled and the error is thrown. `profiling`:
  // record this push even when the engine is not recording everything.
  void Enqueue(OprBlock* b, const char* call, bool mark_deleted, bool profiling);
  // Takes one grant for each block in `granted` and dispatches those that
  // became ready, except `self` (a block whose push is still under way):
  // returns how many of the grants were self's. Most pushes and completions
  // grant nothing: that case costs a test, not a call.
  int HandOutGrants(const GrantList& granted, const OprBlock* self) {
    return granted.size == 0 ? 0 : HandOutGrantsTo(granted, self);
  }
  int HandOutGrantsTo(const GrantList& granted, const OprBlock* self);
  // HandOutGrants for a completion that is being profiled: also records in
  // `releaser` a flow to each profiled block whose last grant this was
  // (`vars[i]`: the var of granted.data[i]).
  void HandOutGrantsProfiled(const GrantList& granted, const std::vector<std::uint64_t>& vars,
                             ProfileRecord* releaser);
  // Enqueue after its checks: locks every var's push side, appends, settles.
  void EnqueueGeneral(OprBlock* b, const char* call, bool mark_deleted);
  // Enqueue for a one-var push that is not profiled, without its loops;
  // false: not taken, nothing done.
  bool TryEnqueueOneVar(OprBlock* b, const char* call);
  // Enqueue's fast path for a function with one var; false: not taken.
  bool PushSingle(OprBlock* b, const char* call);
  // Runs b's function (or skips it, when a var it uses failed). A function
  // on a real GPU gets the running thread's stream on its device
  // (gpu::ThreadStream), whatever the engine kind.
  void Execute(OprBlock* b);
  // The stream b's function gets: the running thread's own on b's device
  // for a function on a real GPU (may throw: the body's try covers it),
  // nullptr otherwise. Reads the block's context first, so that a CPU
  // function never touches real_gpus_.
  void* StreamFor(const OprBlock& b) const;
  // After a sync GPU function: waits for its stream, and turns a CUDA error
  // found there into the function's failure (unless its body threw first).
  [[gnu::cold, gnu::noinline]] void WaitForGpuStream(OprBlock* b, void* stream,
                                                     std::exception_ptr& error);
  // Execute's report to the watchdog (when one runs): the block and its
  // vars. Out of line, off the path of an engine without one.
  [[gnu::cold, gnu::noinline]] void TellWatchdogStarted(const OprBlock& b);
  // Finishes b: marks its written vars failed if `failure`, releases its
  // vars, dispatches what that made ready.
  void Complete(OprBlock* b, const FailurePtr& failure);
  // Complete's release of the vars of a block that failed, is profiled or
  // deletes its var (the common case is a loop inside Complete).
  void CompleteVarsGeneral(OprBlock* b, const FailurePtr& failure, GrantList* grants);
  // Starts fetching what b's completion will touch (see the definition).
  static void PrefetchSlots(const OprBlock& b);
  void ReleaseExecution(OprBlock* b);
  void RecycleBlock(OprBlock* b);
  // Adds n to op->finished (n finished pushes, or DeleteOperator's share);
  // frees op when that completes a requested deletion.
  void FinishPushes(Opr* op, std::uint64_t n);
  // Adds a worker's batched finished pushes to their operator.
  void FlushReleasedPushes(WorkerTls& w);
  void FreeOpr(Opr* op);
  void FreeVar(Var* v);

  void CountPush(OprBlock* b);
  void FinishPending(int slot);
  void SubtractPending(int slot, std::int64_t n);
  // Backpressure (EngineOptions::max_in_flight): a push holds one unit of
  // in_flight_ (engine/in_flight_limiter.h) from before it is queued until
  // its completion. A push from outside the engine waits for a unit; other
  // pushes take one regardless.
  class InFlightReservation {
   public:
    // Inline: with no bound (the default) a push pays one load and a test.
    InFlightReservation(ThreadedEngine* engine, bool may_wait)
        : engine_(engine), held_(engine->in_flight_.enabled()) {
      if (held_) [[unlikely]] {
        Reserve(may_wait);
      }
    }
    ~InFlightReservation() {  // gives the unit back unless committed
      if (held_) [[unlikely]] {
        engine_->in_flight_.Release();
      }
    }
    InFlightReservation(const InFlightReservation&) = delete;
    InFlightReservation& operator=(const InFlightReservation&) = delete;
    void Commit() { held_ = false; }  // the queued block gives it back

   private:
    void Reserve(bool may_wait);
    ThreadedEngine* engine_;
    bool held_;
  };
  // Gives back the unit of a finished function (from Complete).
  void ReleaseInFlight();
  void WaitPendingZero(int slot);

  FailurePtr RecordFailure(std::exception_ptr error);
  // Names on stderr, after `text`, the failures a WaitForAll clears without
  // rethrowing, or that an engine still holds when it is destroyed.
  static void ReportUndelivered(std::string text, const std::vector<FailurePtr>& others);
  FailurePtr FindFailure(OprBlock* b);
  // Clears v's failure and returns it (null when it had none), keeping
  // failed_var_count_ in step.
  FailurePtr TakeFailure(Var* v);
  // TakeFailure for WaitForVar: also marks the failure delivered, under
  // failures_mu_, so that a WaitForAll that looks after the take skips it.
  FailurePtr DeliverFailure(Var* v) EXCLUDES(failures_mu_);
  void CheckVar(VarHandle v, const char* call) const;
  // The fast, non-throwing form of CheckVar.
  bool IsOwnLiveHandle(VarHandle v) const {
    return v != nullptr && v->magic.load(std::memory_order_relaxed) == Var::kLive &&
           v->engine == this;
  }
  // CheckVar, and not pending deletion (takes the var's lock).
  void CheckLiveVar(VarHandle v, const char* call) const;
  // The push path's checks: a comparison inline, the message out of line.
  static void CheckPriority(int priority, const char* call) {
    if (priority < kMinPriority || priority > kMaxPriority) [[unlikely]] {
      ThrowBadPriority(priority, call);
    }
  }
  // At most OprBlock::kMaxVars entries in a function's var lists.
  static void CheckVarCount(std::size_t entries, const char* call) {
    if (entries > OprBlock::kMaxVars) [[unlikely]] {
      ThrowTooManyVars(entries, call);
    }
  }
  [[noreturn, gnu::cold]] static void ThrowBadPriority(int priority, const char* call);
  [[noreturn, gnu::cold]] static void ThrowTooManyVars(std::size_t entries, const char* call);
  bool OnOwnThread() const;
  // On one of this engine's worker threads, inside a function or not (a
  // worker frees a deleted operator, and so destroys its closure, between
  // functions: a wait there would wait for the worker's own unflushed
  // completions).
  bool OnOwnWorker() const;
  // A callback called on this thread is finishing a function of this engine
  // (the function counts as pending until that completion returns).
  bool CompletingCallbackHere() const;
  // Throws std::logic_error, naming `call` (WaitForAll or WaitForVar), when
  // a wait on this thread would wait for itself: the thread runs one of
  // this engine's functions, or is one of its workers.
  void CheckWaitFromHere(const char* call) const;

  const EngineOptions options_;
  // A forked child inherits engines but not their threads: it neither
  // drains nor joins them (see Drain and WorkerPool).
  const pid_t creator_pid_;
  const int gpu_count_;  // simulated, or present when built with CUDA
  // GPU contexts run on real devices (not simulated): their functions get
  // streams.
  const bool real_gpus_;

  // --- WaitForAll accounting ---
  // Pushes count in pending_[generation_ & 1]; WaitForAll (and Drain) bump
  // generation_ (under wait_all_mu_) and wait for the old counter to drain,
  // so pushes made after it started never delay it. seq_cst for every access
  // of the counting protocol (CountPush, SubtractPending, WaitPendingZero,
  // Drain): CountPush re-reads generation_ after its increment, and the
  // flip-then-read in WaitForAll must see that increment or be seen by that
  // re-read. The profiler's and the watchdog's snapshots of pending_ read it
  // relaxed: a rough count is all they show.
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<std::int64_t> pending_[2] = {0, 0};
  // Threads waiting in WaitPendingZero. A completer reads it
  // (seq_cst) after its decrement and, if non-zero, notifies under idle_mu_.
  std::atomic<int> idle_waiters_{0};
  // Threads outside the pools inside SubtractPending; Drain waits for 0.
  // Incremented (seq_cst) before their decrement of pending_, so a Drain
  // that saw pending_ reach 0 also sees them. Decremented with release and
  // read by Drain with acquire: the completer's last touch of the engine
  // (idle_mu_, idle_cv_) happens before Drain returns and the engine dies.
  std::atomic<int> external_completers_{0};
  // Units of functions pushed and not finished (max_in_flight > 0 only).
  InFlightLimiter in_flight_;
  Mutex idle_mu_;
  std::condition_variable idle_cv_;  // waited on with idle_mu_
  Mutex wait_all_mu_;                // serializes the generation flips of WaitForAll and Drain

  // --- failures ---
  // Upper bound on the vars holding a failure, so that the common no-failure
  // path skips the per-var check. Incremented before a failure is written
  // into a var (so a successor granted by that write sees it: the grant
  // orders it), decremented after one is cleared. acquire/release.
  std::atomic<int> failed_var_count_{0};
  Mutex failures_mu_;
  std::vector<FailurePtr> failure_log_ GUARDED_BY(failures_mu_);   // since last WaitForAll
  std::unordered_set<Var*> failed_vars_ GUARDED_BY(failures_mu_);  // may hold cleared vars

  // --- live objects, freed when the engine is destroyed ---
  Mutex live_mu_;
  Var* live_vars_ GUARDED_BY(live_mu_) = nullptr;  // intrusive list via Var::live_*
  Opr* live_oprs_ GUARDED_BY(live_mu_) = nullptr;  // intrusive list via Opr::live_*
  // Deleted ones, held back from their pools so that stale handles keep
  // being reported (common/quarantine.h); freed when displaced.
  static constexpr std::size_t kQuarantined = 1024;
  Quarantine<Var, kQuarantined> dead_vars_ GUARDED_BY(live_mu_);
  Quarantine<Opr, kQuarantined> dead_oprs_ GUARDED_BY(live_mu_);

  // Set by NotifyShutdown from any thread. Relaxed: it only silences the
  // stderr reports of undelivered failures and orders no data.
  std::atomic<bool> shutdown_notified_{false};

  // --- profiling ---
  const std::unique_ptr<Profiler> profiler_;
  // Record every push (SetProfiling / DEPENGINE_PROFILE); read relaxed on
  // each push: a push racing with the switch may go either way.
  std::atomic<bool> profile_all_{false};

  // Set when options.watchdog_seconds > 0; immutable after construction.
  const std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace depengine::internal
