// ThreadedEngine's waits and failures: WaitForAll and WaitForVar, the
// pending counters they wait on, and the failure log they deliver from
// (docs/design.md, "WaitForAll and backpressure" and "Failures"). Counting a push and its
// completion (CountPush, FinishPending) is on the path of every function, in
// threaded_engine.cc.
#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/one_shot_event.h"
#include "common/spin_wait.h"
#include "engine/threaded_engine.h"
#include "engine/threaded_engine_impl.h"

namespace depengine::internal {
namespace {

// A WaitForVar or WaitForAll of the calling thread, recorded in the
// profiler's trace when it ends (returning or throwing) while the whole
// engine is profiled (docs/profiler.md). Inert when `profiler` is null.
class WaitSpan {
 public:
  WaitSpan(Profiler* profiler, const char* name, const Var* var)
      : profiler_(profiler),
        name_(name),
        var_(var != nullptr ? var->profile_id : 0),
        has_var_(var != nullptr),
        start_ns_(profiler != nullptr ? NowNs() : 0) {}
  ~WaitSpan() {
    if (profiler_ == nullptr) return;
    try {
      profiler_->RecordWait(name_, has_var_ ? &var_ : nullptr, start_ns_);
    } catch (...) {
      // Out of memory for the record: the trace loses this wait, the wait
      // (and an exception it may be throwing) goes on.
    }
  }
  WaitSpan(const WaitSpan&) = delete;
  WaitSpan& operator=(const WaitSpan&) = delete;

 private:
  Profiler* const profiler_;
  const char* const name_;
  const std::uint64_t var_;
  const bool has_var_;
  const std::int64_t start_ns_;
};

}  // namespace

void ThreadedEngine::SubtractPending(int slot, std::int64_t n) {
  const std::int64_t before = pending_[slot].fetch_sub(n, std::memory_order_seq_cst);
  if (before == n && idle_waiters_.load(std::memory_order_seq_cst) > 0) {
    MutexLock lock(idle_mu_);
    idle_cv_.notify_all();
  }
}

void ThreadedEngine::WaitPendingZero(int slot) {
  // The functions of a short burst often finish within the spin; a waiter
  // that spins is not counted in idle_waiters_, so their completer skips
  // the notify as well.
  if (SpinUntil([&] { return pending_[slot].load(std::memory_order_seq_cst) == 0; })) return;
  idle_waiters_.fetch_add(1, std::memory_order_seq_cst);
  {
    MutexLock lock(idle_mu_);
    lock.Wait(idle_cv_, [&] { return pending_[slot].load(std::memory_order_seq_cst) == 0; });
  }
  idle_waiters_.fetch_sub(1, std::memory_order_seq_cst);
}

void ThreadedEngine::CheckWaitFromHere(const char* call) const {
  if (OnOwnThread()) {
    throw std::logic_error(std::string(call) +
                           " called from inside a function running on the same engine "
                           "(it would deadlock)");
  }
  if (OnOwnWorker()) {
    throw std::logic_error(std::string(call) +
                           " called on one of the same engine's worker threads, for example from a "
                           "destructor in a deleted operator's closure (it would deadlock)");
  }
}

void ThreadedEngine::WaitForAll() {
  CheckWaitFromHere("WaitForAll");
  // A callback's caller finishing a function of this engine: the function
  // is counted until its completion returns, so waiting here (from a
  // destructor in its closure, say) would wait for itself.
  if (CompletingCallbackHere()) {
    throw std::logic_error(
        "WaitForAll called while a callback is finishing a function of the same engine, for "
        "example from a destructor in the function's closure (it would deadlock)");
  }
  const WaitSpan span(kProfilerBuilt && ProfileAll() ? profiler_.get() : nullptr, "WaitForAll",
                      nullptr);
  {
    MutexLock lock(wait_all_mu_);
    const std::uint64_t g = generation_.fetch_add(1, std::memory_order_seq_cst);
    WaitPendingZero(static_cast<int>(g & 1));
  }
  FailurePtr first;
  std::vector<FailurePtr> others;  // undelivered too: one exception can carry only one
  {
    MutexLock lock(failures_mu_);
    for (const FailurePtr& f : failure_log_) {
      if (f->delivered.load(std::memory_order_relaxed)) continue;
      if (!first) {
        first = f;
      } else {
        others.push_back(f);
      }
    }
    // The log is the only place a failure's `delivered` flag is read, and
    // each failure enters it once (RecordFailure): `first`, gone from it,
    // needs no mark (docs/reliability.md, "Mutation checks").
    failure_log_.clear();
    for (Var* v : failed_vars_) TakeFailure(v);
    failed_vars_.clear();
  }
  if (!others.empty() && !shutdown_notified_.load(std::memory_order_relaxed)) {
    ReportUndelivered("depengine: WaitForAll rethrows the first failure; " +
                          std::to_string(others.size()) +
                          " more since the previous WaitForAll, not delivered by WaitForVar:\n",
                      others);
  }
  if (first) std::rethrow_exception(first->error);
}

void ThreadedEngine::WaitForVar(VarHandle var) {
  CheckVar(var, "WaitForVar");
  CheckWaitFromHere("WaitForVar");
  FailurePtr failure;
  bool idle;
  {
    SpinLockGuard g(var->lock);
    SpinLockGuard push_guard(var->push_lock);  // after lock: the order SettleLocked uses
    if (var->deleted.load(std::memory_order_relaxed)) {
      throw std::invalid_argument("WaitForVar: var was deleted");
    }
    idle = var->IdleLocked();
  }
  const WaitSpan span(kProfilerBuilt && ProfileAll() ? profiler_.get() : nullptr, "WaitForVar",
                      var);
  if (idle) {
    failure = DeliverFailure(var);
  } else {
    struct Waiter {
      ThreadedEngine* engine;
      Var* var;
      OneShotEvent done;
      FailurePtr failure;  // written before done is set, read after
    } waiter{this, var, {}, nullptr};
    // One pointer captured: the closure fits in std::function's own storage.
    SyncFn wake = [w = &waiter](RunContext) {
      w->failure = w->engine->DeliverFailure(w->var);
      w->done.Set();
    };
    // A write: it waits for earlier readers too, and readers pushed after it
    // see the failure already cleared.
    PushOneShot(&wake, nullptr, Context::CPU(), {}, VarList(&var, 1), FnProperty::kAsync, 0,
                "WaitForVar", OprKind::kWaitVar, "WaitForVar");
    waiter.done.Wait();
    failure = std::move(waiter.failure);
  }
  if (failure) std::rethrow_exception(failure->error);
}

// ---------------------------------------------------------------- failures

// WaitForAll rethrows the first undelivered failure; the others would vanish
// with the vars' failures it clears, so they are named here, on stderr,
// after `text`. So are those an engine still holds when it is destroyed.
void ThreadedEngine::ReportUndelivered(std::string text, const std::vector<FailurePtr>& others) {
  constexpr std::size_t kNamed = 8;  // a storm of failures is summarized
  for (std::size_t i = 0; i < others.size(); ++i) {
    const FailurePtr& f = others[i];
    if (i == kNamed) {
      text += "  ... and " + std::to_string(others.size() - kNamed) + " more\n";
      break;
    }
    text += "  ";
    try {
      std::rethrow_exception(f->error);
    } catch (const std::exception& e) {
      text += e.what();
    } catch (...) {
      text += "(an exception not derived from std::exception)";
    }
    text += '\n';
  }
  std::fputs(text.c_str(), stderr);
}

FailurePtr ThreadedEngine::RecordFailure(std::exception_ptr error) {
  auto f = std::make_shared<Failure>();
  f->error = std::move(error);
  MutexLock lock(failures_mu_);
  failure_log_.push_back(f);
  return f;
}

FailurePtr ThreadedEngine::FindFailure(OprBlock* b) {
  for (VarSlot& s : b->slots()) {
    SpinLockGuard g(s.var->lock);
    if (s.var->failure) return s.var->failure;
  }
  return nullptr;
}

FailurePtr ThreadedEngine::DeliverFailure(Var* v) {
  // Under failures_mu_, like WaitForAll's scan of the log: a failure taken
  // here is marked delivered before any WaitForAll can see it undelivered,
  // even while the thread that called WaitForVar has not woken up yet.
  MutexLock lock(failures_mu_);
  FailurePtr f = TakeFailure(v);
  if (f) f->delivered.store(true, std::memory_order_relaxed);
  return f;
}

FailurePtr ThreadedEngine::TakeFailure(Var* v) {
  FailurePtr f;
  {
    SpinLockGuard g(v->lock);
    f = std::move(v->failure);
    v->failure.reset();
  }
  if (f) failed_var_count_.fetch_sub(1, std::memory_order_release);
  return f;
}

}  // namespace depengine::internal
