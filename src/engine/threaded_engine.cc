// ThreadedEngine: the path of a function, from push to completion. The
// push (PushOneShot, Push, Enqueue, PushSingle), the hand-out of grants, the
// run (RunInline, WorkerLoop, Execute, callbacks) and the completion
// (Complete, ReleaseExecution), with the per-thread state they keep. The
// engine's lifetime, its input checks, and its waits and failures are in
// the other threaded_engine_*.cc files; docs/design.md follows an op
// through all of them.
#include "engine/threaded_engine.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/object_pool.h"
#include "common/prefetch.h"
#include "common/spin_wait.h"
#include "engine/engine_handle.h"
#include "engine/internal_hooks.h"
#include "engine/threaded_engine_impl.h"
#include "gpu/device.h"
#include "tracker/var_list_sort.h"

namespace depengine::internal {
namespace {

// Blocks for pushes of one var (their slot is inline) and blocks for pushes
// of several, which keep a slot array across uses, come from two pools: a
// one-var push must not land in a block whose slot lives in a separate
// array, an extra cold line on every use (after a multi-var phase such as
// W4, W5 with 4,096 operators ran about 40% slower).
// A multi-var block's array of up to kAdjacentSlots slots lies right after
// it in its chunk (a 256-byte stride), so the pool's prefetch of the next
// block fetches its slots too. They were a separate array per chunk, one
// more cold line per push that the pusher stalled on while sorting its
// slots (W4, T = 0: about 15% faster with them adjacent). A block that
// needs more slots allocates its own array and keeps it.
struct MultiVarBlockLayout {
  static constexpr std::uint16_t kAdjacentSlots = 5;
  static constexpr std::size_t kStride = 2 * sizeof(OprBlock);
  // A burst's blocks stay on the pool's stack (newest first), not in
  // address order: with the order, W4 at T = 0 ran 4-11% slower after a
  // burst, and no workload of several vars gained from it
  // (docs/performance.md, "The pool's order after a burst").
  static constexpr bool kOrderBursts = false;
  static_assert(sizeof(OprBlock) + kAdjacentSlots * sizeof(VarSlot) <= kStride);
  static void Init(OprBlock* block) {
    auto* slots = new (reinterpret_cast<char*>(block) + sizeof(OprBlock)) VarSlot[kAdjacentSlots];
    block->AdoptSlotStorage(slots, kAdjacentSlots);
  }
};

using OneVarBlockPool = ObjectPool<OprBlock>;
using MultiVarBlockPool = ObjectPool<OprBlock, MultiVarBlockLayout>;

OprBlock* AllocateBlock(std::size_t vars) {
  return vars <= 1 ? OneVarBlockPool::Allocate() : MultiVarBlockPool::Allocate();
}

// Room to sort a push's var handles as keys (var | write): on the stack up
// to 128 vars, else on the heap.
class SortKeys {
 public:
  explicit SortKeys(std::size_t n) : heap_(n > kInline ? new std::uintptr_t[n] : nullptr) {}
  std::uintptr_t* data() { return heap_ != nullptr ? heap_.get() : inline_; }

 private:
  static constexpr std::size_t kInline = 128;
  std::uintptr_t inline_[kInline];
  std::unique_ptr<std::uintptr_t[]> heap_;
};

// The engine whose function the calling thread is running, if any, and
// the engines of the functions around it: waiting on any of them from here
// would deadlock. A function of one engine may run another engine's
// function inline (a naive engine, or kAsync), so the thread may be inside
// several. The common case, one function at a time, costs a load and two
// stores; only a nested scope links itself into the list of outer ones.
class RunningScope;
thread_local const ThreadedEngine* tls_running_engine = nullptr;
// The engine whose function a callback is completing on this thread, if
// any (only set by callbacks: a worker's own completions are inside its
// RunningScope).
thread_local const ThreadedEngine* tls_completing_engine = nullptr;
thread_local const RunningScope* tls_nested_top = nullptr;

// RunningFunctionId (engine/internal_hooks.h): the id of the innermost
// function this thread runs, meaningful while tls_running_engine is set
// (a finished top-level scope leaves it stale rather than pay a store), and
// the last id this thread handed out. An id is a block number, taken from
// a process-wide counter when a thread starts and every 2^32 functions, in
// the high half, and a per-thread count in the low half: unique across
// threads and time, and one add, compare and store per function.
thread_local std::uint64_t tls_function_id = 0;
thread_local std::uint64_t tls_last_function_id = 0;
std::atomic<std::uint64_t> next_function_id_block{0};  // relaxed: only uniqueness matters
constexpr std::uint64_t kFunctionIdLowMask = (std::uint64_t{1} << 32) - 1;

[[gnu::noinline]] std::uint64_t TakeFunctionIdBlock() {
  return ((next_function_id_block.fetch_add(1, std::memory_order_relaxed) + 1) << 32) | 1;
}

std::uint64_t NextFunctionId() {
  std::uint64_t id = tls_last_function_id + 1;
  // Low half 1: this thread's first id (it held 0); 0: the block is used up.
  if ((id & kFunctionIdLowMask) <= 1) [[unlikely]] {
    id = TakeFunctionIdBlock();
  }
  tls_last_function_id = id;
  return id;
}

class RunningScope {
 public:
  // The hot path's cost for RunningFunctionId is NextFunctionId and the
  // store of tls_function_id (TLS only); a nested scope also saves and
  // restores the outer function's id.
  explicit RunningScope(const ThreadedEngine* e) : saved_(tls_running_engine) {
    tls_running_engine = e;
    if (saved_ != nullptr) [[unlikely]] {
      outer_ = tls_nested_top;
      tls_nested_top = this;
      saved_function_id_ = tls_function_id;
    }
    tls_function_id = NextFunctionId();
  }
  ~RunningScope() {
    tls_running_engine = saved_;
    if (saved_ != nullptr) [[unlikely]] {
      tls_nested_top = outer_;
      tls_function_id = saved_function_id_;
    }
  }
  RunningScope(const RunningScope&) = delete;
  RunningScope& operator=(const RunningScope&) = delete;

  // Whether another function of any engine was running on this thread when
  // this scope began (this one runs inside it).
  bool nested() const { return saved_ != nullptr; }

  // Whether the calling thread is inside a function of `e`: the innermost,
  // or one that a nested scope interrupted (its saved_).
  static bool Inside(const ThreadedEngine* e) {
    if (tls_running_engine == e) return true;
    for (const RunningScope* s = tls_nested_top; s != nullptr; s = s->outer_) {
      if (s->saved_ == e) return true;
    }
    return false;
  }

 private:
  const ThreadedEngine* saved_;
  const RunningScope* outer_ = nullptr;  // set only when nested
  std::uint64_t saved_function_id_ = 0;  // set only when nested
};

const FailurePtr kNoFailure;  // constant-initialized: an empty shared_ptr

}  // namespace

// A worker thread's view of itself: which pool it serves, and the block it
// will run next without going through the queue.
struct ThreadedEngine::WorkerTls {
  WorkerTls(const ThreadedEngine* e, WorkerPool* p) : engine(e), pool(p) {}
  const ThreadedEngine* engine;
  WorkerPool* pool;
  OprBlock* continuation = nullptr;
  // Blocks for `pool` made ready by the completion this worker is running,
  // queued together when it ends (one tail exchange and one wake-up for a
  // fan-out instead of one each). Open while completing > 0.
  static constexpr int kMaxBatch = 64;
  OprBlock* batch[kMaxBatch];
  int batch_size = 0;
  int completing = 0;
  void FlushBatch() {
    if (batch_size == 0) return;
    if (continuation != nullptr) PromoteMostUrgent();
    pool->queue().PushBatch(batch, batch_size);
    batch_size = 0;
  }
  // Among the blocks one completion made ready, the most urgent runs next:
  // a batched block of higher priority than the continuation takes its
  // place (the continuation passed MayBypass, so it does too). Done here
  // rather than as each block is batched: PushBatch reads every batched
  // block's priority anyway, so the scan takes no cache miss of its own,
  // and DispatchToPool keeps touching only the pointer of a batched block.
  void PromoteMostUrgent() {
    int most_urgent = -1;
    int priority = continuation->priority;
    for (int i = 0; i < batch_size; ++i) {
      if (batch[i]->priority > priority) {
        most_urgent = i;
        priority = batch[i]->priority;
      }
    }
    if (most_urgent >= 0) std::swap(batch[most_urgent], continuation);
  }
  // Completions not yet subtracted from engine->pending_[slot]. Batching
  // them keeps the pending counters' cache line with the pushing thread.
  // Flushed every kFlushEvery, before running a block of the other
  // generation, and whenever the queue is empty (so before sleeping). Only
  // completions after a body returned are batched (see FinishPending).
  std::int64_t done[2] = {0, 0};
  static constexpr std::int64_t kFlushEvery = 64;
  // Finished pushes of one prebuilt operator not yet added to its
  // Opr::finished: a worker running pushes of the same operator back to
  // back (W5) updates that counter once per batch. Flushed on a change of
  // operator, every kFlushEvery, and before `done` is (so that a WaitForAll
  // that returns has seen every deleted operator freed).
  Opr* released_op = nullptr;
  std::uint32_t released = 0;
  // This worker's finished functions, for backpressure (registered with
  // engine->in_flight_ while the worker runs, when max_in_flight > 0).
  InFlightLimiter::WorkerCounter in_flight;
};
namespace {
thread_local void* tls_worker_raw = nullptr;  // ThreadedEngine::WorkerTls*

// True only while this thread completes a function whose body has returned
// and that no other body on this thread surrounds: then a successor it makes
// ready may run next on this worker (a continuation). A function pushed from
// inside a running body must not: it would wait for the body to return while
// another worker may be idle. Nor may the successor of a kAsync function run
// inline inside a running body (ready at that body's push, or made ready by
// a callback it calls): the worker would hold it until the outer body
// returns.
thread_local bool tls_may_continue = false;

// The async function this thread is running, while its body runs. A
// callback called from inside the body (the common case: NewOperator on a
// synchronous body) only records the completion here; Execute completes the
// block once the body returns, as for a sync function: one atomic less, and
// the successor may run next on this worker.
struct InlineCompletion {
  const OprBlock* block;
  std::uint32_t ticket;
  bool claimed = false;
  std::exception_ptr error;
};
thread_local InlineCompletion* tls_inline_completion = nullptr;

class ContinuationGate {
 public:
  // `nested`: this function runs inside another function's execution on
  // this thread (RunningScope had an outer scope). Its completion may allow
  // continuations only if the surrounding one was completing already (its
  // body had returned): not from inside a running body. No extra memory
  // access: both flags are already in registers (saved_ is loaded anyway).
  explicit ContinuationGate(bool nested) : saved_(tls_may_continue), allow_(saved_ || !nested) {
    tls_may_continue = false;
  }
  ~ContinuationGate() { tls_may_continue = saved_; }
  ContinuationGate(const ContinuationGate&) = delete;
  ContinuationGate& operator=(const ContinuationGate&) = delete;
  // Completes with continuations allowed, unless nested in a running body.
  template <class F>
  void Completing(F&& complete) const {
    tls_may_continue = allow_;
    complete();
    tls_may_continue = false;
  }

 private:
  const bool saved_;
  const bool allow_;
};

}  // namespace

// One level of the inline trampoline (RunInline): blocks made ready while
// this thread already runs a block inline for the same engine.
struct ThreadedEngine::InlineFrame {
  const ThreadedEngine* engine;
  InlineFrame* prev;
  OprBlock* head = nullptr;  // linked through queue_next
  OprBlock* tail = nullptr;
};
namespace {
thread_local void* tls_inline_top = nullptr;  // ThreadedEngine::InlineFrame*
}

std::uint64_t RunningFunctionId() { return tls_running_engine != nullptr ? tls_function_id : 0; }

void MarkScratchVar(Engine* engine, VarHandle var) {
  ThreadedEngine* e = CoreOf(engine);
  if (e == nullptr) return;  // not an engine of ours: it has its own failure model
  e->MarkScratch(var);
}

void ThreadedEngine::MarkScratch(VarHandle var) {
  CheckVar(var, "MarkScratchVar");
  var->scratch.store(true, std::memory_order_relaxed);
}

bool MayHaveFailedVars(Engine* engine) {
  ThreadedEngine* e = CoreOf(engine);
  return e != nullptr && e->MayHaveFailedVars();
}

void PushClearFailures(Engine* engine, Context ctx, const std::vector<VarHandle>& vars) {
  ThreadedEngine* e = CoreOf(engine);
  if (e != nullptr) e->PushClearFailures(ctx, vars);
}

void ThreadedEngine::PushClearFailures(Context ctx, const std::vector<VarHandle>& vars) {
  // Runs holding the write of every var, so no writer can race the clear.
  // The failures stay in failure_log_ (WaitForAll's rule) and keep their
  // delivered flag.
  SyncFn clear = [this, vars](RunContext) {
    for (Var* v : vars) TakeFailure(v);
  };
  PushOneShot(&clear, nullptr, ctx, {}, vars, FnProperty::kNormal, 0, "ClearFailures",
              OprKind::kClearFailures, "PushClearFailures");
}

// ---------------------------------------------------------------- the calling thread

bool ThreadedEngine::OnOwnThread() const { return RunningScope::Inside(this); }

bool ThreadedEngine::OnOwnWorker() const {
  const auto* w = static_cast<const WorkerTls*>(tls_worker_raw);
  return w != nullptr && w->engine == this;
}

bool ThreadedEngine::CompletingCallbackHere() const { return tls_completing_engine == this; }

bool ThreadedEngine::DestroyingWouldWaitForItself() const {
  return OnOwnThread() || CompletingCallbackHere() || OnOwnWorker();
}

// ---------------------------------------------------------------- push

void ThreadedEngine::PushAsync(AsyncFn exec_fun, Context exec_ctx,
                               const std::vector<VarHandle>& const_vars,
                               const std::vector<VarHandle>& mutable_vars, FnProperty prop,
                               int priority, const char* opr_name) {
  if (!exec_fun) throw std::invalid_argument("PushAsync: null function");
  PushOneShot(nullptr, &exec_fun, exec_ctx, const_vars, mutable_vars, prop, priority, opr_name,
              OprKind::kUser, "PushAsync");
}

void ThreadedEngine::PushSyncImpl(SyncFn exec_fn, Context exec_ctx,
                                  const std::vector<VarHandle>& const_vars,
                                  const std::vector<VarHandle>& mutable_vars, FnProperty prop,
                                  int priority, const char* opr_name) {
  PushSyncFrom(&exec_fn, exec_ctx, const_vars, mutable_vars, prop, priority, opr_name);
}

void ThreadedEngine::PushSyncFrom(SyncFn* exec_fn, Context exec_ctx,
                                  const std::vector<VarHandle>& const_vars,
                                  const std::vector<VarHandle>& mutable_vars, FnProperty prop,
                                  int priority, const char* opr_name) {
  if (!*exec_fn) throw std::invalid_argument("PushSync: null function");
  PushOneShot(exec_fn, nullptr, exec_ctx, const_vars, mutable_vars, prop, priority, opr_name,
              OprKind::kUser, "PushSync");
}

// A push's first touch of each var is usually a miss: the line was last
// written by the worker that settled the var. Asking for every var's line
// up front lets those misses overlap one another and the block's setup,
// instead of being taken one by one at each lock. A multi-var push locks
// the push side (see Enqueue); a one-var push, the grant side too, and
// PushOneShot fetches its two lines itself.
void ThreadedEngine::PrefetchVars(VarList const_vars, VarList mutable_vars) {
  constexpr std::size_t kMaxPrefetched = 8;
  std::size_t done = 0;
  for (const VarList list : {const_vars, mutable_vars}) {
    for (const Var* v : list) {
      if (done++ == kMaxPrefetched) return;
      PrefetchForWrite(v);
    }
  }
}

void ThreadedEngine::PushOneShot(SyncFn* sync_fn, AsyncFn* async_fn, Context ctx,
                                 VarList const_vars, VarList mutable_vars, FnProperty prop,
                                 int priority, const char* name, OprKind kind, const char* call) {
  if (ctx.dev_type != DeviceType::kCPU || ctx.dev_id != 0 || prop == FnProperty::kCPUPrioritized) {
    CheckContext(ctx, call);
    EnsurePool(ctx, prop);
  }
  if (kind == OprKind::kUser) CheckPriority(priority, call);
  const auto n = static_cast<std::uint32_t>(const_vars.size() + mutable_vars.size());
  CheckVarCount(n, call);
  if (n == 1) {
    // A one-var push locks the grant side (see PrefetchVars). A null handle
    // is rejected later (Enqueue); no address is formed from it.
    const Var* v = const_vars.empty() ? mutable_vars[0] : const_vars[0];
    if (v != nullptr) {
      PrefetchForWrite(v);
      PrefetchForWrite(&v->lock);
    }
  } else {
    PrefetchVars(const_vars, mutable_vars);
  }
  // One slot per var, sorted by address; duplicates within a list merge.
  // Sorted as keys (var | write) on the stack before the block is taken,
  // then written into it once. Sorting the slots in the block loaded them
  // right after storing them, 16 bytes at a time over two 8-byte stores,
  // which the store buffer cannot forward: every push of several vars
  // waited there for the block's lines to arrive from the worker that
  // finished it last (two thirds of W3's PushOneShot samples).
  SortKeys sort_keys(n);
  std::uintptr_t* keys = sort_keys.data();
  std::uint32_t count = n;
  if (n > 1) {
    std::uint32_t k = 0;
    for (Var* v : const_vars) keys[k++] = reinterpret_cast<std::uintptr_t>(v);
    for (Var* v : mutable_vars) keys[k++] = reinterpret_cast<std::uintptr_t>(v) | 1u;
    count = SortAndMergeVarKeys(keys, n, call);
  }
  InFlightReservation reservation(this, kind == OprKind::kUser);
  OprBlock* b = AllocateBlock(n);
  if (sync_fn != nullptr) {
    b->SetSync(std::move(*sync_fn));
  } else {
    b->SetAsync(std::move(*async_fn));
  }
  b->set_prop(prop);
  b->name = name;
  b->kind = kind;
  b->prebuilt = nullptr;
  b->ctx = ctx;
  b->priority = priority;
  b->ResizeSlots(count);
  if (n == 1) {
    // Nothing was sorted: the slot comes straight from the list.
    b->slots()[0] =
        const_vars.empty() ? VarSlot(mutable_vars[0], b, true) : VarSlot(const_vars[0], b, false);
  } else {
    std::span<VarSlot> slots = b->slots();
    for (std::uint32_t k = 0; k < count; ++k) {
      slots[k] =
          VarSlot(reinterpret_cast<Var*>(keys[k] & ~std::uintptr_t{1}), b, (keys[k] & 1u) != 0);
    }
  }
  if (n != 1 || kind == OprKind::kDeleteVar || !TryEnqueueOneVar(b, call)) {
    Enqueue(b, call, kind == OprKind::kDeleteVar, false);
  }
  reservation.Commit();
}

void ThreadedEngine::Push(OprHandle op, Context exec_ctx, int priority, bool profiling) {
  const char* call = "Push";
  if (op == nullptr) throw std::invalid_argument("Push: null operator");
  if (op->magic.load(std::memory_order_relaxed) != Opr::kLive || op->engine != this) {
    throw std::logic_error("Push: operator was deleted or belongs to another engine");
  }
  if (exec_ctx.dev_type != DeviceType::kCPU || exec_ctx.dev_id != 0 ||
      op->prop == FnProperty::kCPUPrioritized) {
    CheckContext(exec_ctx, call);
    EnsurePool(exec_ctx, op->prop);
  }
  CheckPriority(priority, call);
  const char* name = op->name;  // see DeleteOperator: read before the Opr may be freed
  if (op->pushed.fetch_add(1, std::memory_order_acq_rel) & Opr::kDeleteRequested) {
    // Not counted by DeleteOperator, so nothing to finish.
    throw std::logic_error(std::string("Push: operator '") +
                           (name != nullptr ? name : "<unnamed>") + "' was deleted");
  }
  // From here on a refused push (a deleted or stale var, no memory) counts
  // as finished, or DeleteOperator's count would never complete.
  try {
    InFlightReservation reservation(this, true);
    const std::uint32_t n = op->var_count();
    OprBlock* b = AllocateBlock(n);
    b->prebuilt = op;
    b->set_prop(op->prop);
    b->name = op->name;
    b->kind = OprKind::kUser;
    b->ctx = exec_ctx;
    b->priority = priority;
    b->ResizeSlots(n);
    std::span<VarSlot> slots = b->slots();
    for (std::uint32_t i = 0; i < n; ++i) slots[i] = VarSlot(op->var(i), b, op->var_written(i));
    // Both throw only before b is queued.
    if (n != 1 || profiling || !TryEnqueueOneVar(b, call)) Enqueue(b, call, false, profiling);
    reservation.Commit();
  } catch (...) {
    FinishPushes(op, 1);
    throw;
  }
}

void ThreadedEngine::DeleteVariable(SyncFn delete_fn, Context exec_ctx, VarHandle var) {
  if (!delete_fn) delete_fn = [](RunContext) {};
  // Deletions go ahead of all normal work so memory comes back promptly.
  PushOneShot(&delete_fn, nullptr, exec_ctx, {}, VarList(&var, 1), FnProperty::kNormal,
              kMaxPriority + 1, "DeleteVariable", OprKind::kDeleteVar, "DeleteVariable");
}

// Locks a run-time set of vars, which the static analysis cannot follow.
void ThreadedEngine::Enqueue(OprBlock* b, const char* call, bool mark_deleted,
                             bool profiling) NO_THREAD_SAFETY_ANALYSIS {
  std::size_t reads = 0;
  for (VarSlot& s : b->slots()) {
    if (!IsOwnLiveHandle(s.var)) {
      RecycleBlock(b);
      CheckVar(s.var, call);  // throws the message that names the problem
    }
    if (!s.write()) ++reads;
  }
  // A read queued below may start a ReaderGroup, with var locks held.
  if (reads > 0) Var::ReserveGroups(reads);
  b->profile = kProfilerBuilt && (profiling || profile_all_.load(std::memory_order_relaxed)) &&
                       b->kind != OprKind::kWaitVar
                   ? profiler_->Begin(*b)
                   : nullptr;
  const std::span<VarSlot> slots = b->slots();
  // A profiled push takes the general path below, whose push locks order
  // its record's seq like its uses (see Profiler::AssignSeq); PushSingle
  // queues under the grant side's lock, which a several-var push does not
  // take. When profiling is off this is one more test of b->profile.
  if (slots.size() == 1 && !mark_deleted && b->profile == nullptr && PushSingle(b, call)) return;
  EnqueueGeneral(b, call, mark_deleted);
}

// Enqueue after its checks, for any number of vars.
void ThreadedEngine::EnqueueGeneral(OprBlock* b, const char* call,
                                    bool mark_deleted) NO_THREAD_SAFETY_ANALYSIS {
  const std::span<VarSlot> slots = b->slots();
  // Lock every var's push side in address order (slots are sorted):
  // concurrent pushes then queue on all their shared vars in the same
  // relative order, which is what makes pushing from several threads
  // deadlock-free and serializable.
  // The vars, and those to settle, copied out of b: once its last slot is
  // published, b may be granted, run and recycled by other threads (see
  // below), so the unlocks and settles must not read its slots. On the
  // stack up to 8 vars; allocated before the locks otherwise, since nothing
  // may throw while they are held.
  const std::size_t count = slots.size();
  Var* inline_storage[16];
  std::unique_ptr<Var*[]> heap_storage;
  if (count > 8) heap_storage = std::make_unique<Var*[]>(2 * count);
  Var** const vars = count > 8 ? heap_storage.get() : inline_storage;
  Var** const to_settle = vars + count;
  for (std::size_t i = 0; i < count; ++i) {
    Var* v = slots[i].var;
    vars[i] = v;
    v->push_lock.lock();
    if (v->deleted.load(std::memory_order_relaxed)) [[unlikely]] {
      for (std::size_t k = 0; k <= i; ++k) vars[k]->push_lock.unlock();
      RecycleBlock(b);
      throw std::invalid_argument(Named(
          call, mark_deleted ? "DeleteVariable called twice on the same var" : "var was deleted"));
    }
  }
  if (mark_deleted) vars[0]->deleted.store(true, std::memory_order_relaxed);
  // With every var's push lock held: two profiled pushes that share a var
  // get their seqs in the order they queue on it (the graph's order).
  if (b->profile != nullptr) profiler_->AssignSeq(b->profile);
  CountPush(b);
  // One grant per slot. The grants this pusher takes while appending are
  // applied at the end, in one update, and until then keep b from being
  // dispatched by anyone else. A push that took none (its vars are busy, as
  // when the pusher runs ahead) makes no update of its own, so no locked
  // instruction on b's line: the thread that applies the last grant
  // dispatches b. From the last slot's publication (a grant side's unlock
  // in Append, or the push-lock unlocks below) b may then run and be
  // recycled at any time, so this pusher reads nothing more of it unless it
  // holds a grant. Published to the grant sides by their locks (release).
  const auto n = static_cast<std::int32_t>(count);
  b->wait.store(n, std::memory_order_relaxed);
  std::int32_t taken = 0;  // grants this pusher took and has not applied
  std::size_t settle_count = 0;
  VarSlot* const slot_data = slots.data();
  for (std::size_t i = 0; i < count; ++i) {
    bool granted = false;
    if (vars[i]->Append(&slot_data[i], &granted) == Var::AppendResult::kNeedsSettle) {
      to_settle[settle_count++] = vars[i];
    }
    if (granted) ++taken;
  }
  for (std::size_t i = 0; i < count; ++i) vars[i]->push_lock.unlock();

  if (settle_count > 0) {
    GrantList granted;
    for (std::size_t i = 0; i < settle_count; ++i) to_settle[i]->Settle(&granted);
    if (taken > 0) {
      // The grants held keep b alive, so a granted b is this push's: apply
      // its grants with the others, in the update below.
      taken += HandOutGrants(granted, b);
    } else {
      // b may already be gone and its block reused: every grant, b's
      // included, is applied one by one, and whoever applies b's last one
      // dispatches it (tools/models/block_grants.pml, scenario REUSE).
      HandOutGrants(granted, nullptr);
    }
  }
  // Every grant taken here (or a push of no vars): nobody else saw a slot of
  // b wait, so no other thread touches b->wait and the atomic update can be
  // skipped. With none taken, b is no longer this pusher's to touch.
  if (taken != n && (taken == 0 || b->wait.fetch_sub(taken, std::memory_order_acq_rel) != taken)) {
    return;
  }
  if (b->profile != nullptr) Profiler::MarkReady(b->profile);
  Dispatch(b);
}

void ThreadedEngine::HandOutGrantsProfiled(const GrantList& granted,
                                           const std::vector<std::uint64_t>& vars,
                                           ProfileRecord* releaser) {
  for (int i = 0; i < granted.size; ++i) {
    OprBlock* g = granted.data[i];
    if (!g->Grant()) continue;  // another grant is still to come: g may run any time now
    // The grant that made g ready: g is this thread's to dispatch.
    if (g->profile != nullptr) {
      releaser->released.emplace_back(g->profile->seq, vars[static_cast<std::size_t>(i)]);
      Profiler::MarkReady(g->profile);
    }
    Dispatch(g);
  }
}

int ThreadedEngine::HandOutGrantsTo(const GrantList& granted, const OprBlock* self) {
  int self_grants = 0;
  for (int i = 0; i < granted.size; ++i) {
    OprBlock* g = granted.data[i];
    if (g == self) {
      ++self_grants;
    } else if (g->Grant()) {
      if (g->profile != nullptr) Profiler::MarkReady(g->profile);
      Dispatch(g);
    }
  }
  return self_grants;
}

// Enqueue for the common push, one var and not profiled, without its loops
// over the slots. Returns false, having done nothing, when that does not
// apply; then Enqueue takes the push (and a handle that fails the check
// below gets Enqueue's message naming it). Inline: it saves a call too.
inline bool ThreadedEngine::TryEnqueueOneVar(OprBlock* b, const char* call) {
  VarSlot& slot = b->slots()[0];
  if (!IsOwnLiveHandle(slot.var) ||
      (kProfilerBuilt && profile_all_.load(std::memory_order_relaxed))) {
    return false;
  }
  if (!slot.write()) Var::ReserveGroups(1);  // a read queued under the lock may start a group
  b->profile = nullptr;
  // Not Enqueue when PushSingle declines: it would try the var's lock again,
  // a second locked exchange on a line the worker may be using.
  if (!PushSingle(b, call)) EnqueueGeneral(b, call, false);
  return true;
}

// The common push, one var, with the var's grant-side lock free: one lock
// instead of two, and no trip to the push side unless its inbox holds
// slots. Pushes with several vars need push_lock on all of them to be
// serializable; a one-var push can be ordered anywhere among concurrent ones.
// Returns false, having done nothing, when it cannot take that lock at once
// (or the var is in chain mode): then Enqueue takes the general path.
bool ThreadedEngine::PushSingle(OprBlock* b, const char* call) NO_THREAD_SAFETY_ANALYSIS {
  VarSlot& slot = b->slots()[0];
  Var* v = slot.var;
  if (v->chain_mode.load(std::memory_order_relaxed) || !v->lock.try_lock()) return false;
  GrantList granted;
  const bool live = v->PrepareSingleLocked(&granted);
  bool self_ready = false;
  if (live) {
    CountPush(b);
    b->wait.store(1, std::memory_order_relaxed);  // published by the unlock below
    self_ready = v->QueueSingleLocked(&slot, &granted);
  }
  v->lock.unlock();
  // b's one slot, granted here: nobody else holds b.
  if (HandOutGrants(granted, b) > 0) self_ready = true;
  if (!live) {
    RecycleBlock(b);
    throw std::invalid_argument(Named(call, "var was deleted"));
  }
  if (self_ready) {
    if (b->profile != nullptr) Profiler::MarkReady(b->profile);
    Dispatch(b);
  }
  return true;
}

// ---------------------------------------------------------------- execution

void ThreadedEngine::RunInline(OprBlock* b) {
  for (auto* f = static_cast<InlineFrame*>(tls_inline_top); f != nullptr; f = f->prev) {
    if (f->engine == this) {
      b->queue_next = nullptr;
      if (f->tail == nullptr) {
        f->head = f->tail = b;
      } else {
        f->tail->queue_next = b;
        f->tail = b;
      }
      return;
    }
  }
  InlineFrame frame{this, static_cast<InlineFrame*>(tls_inline_top)};
  tls_inline_top = &frame;
  Execute(b);
  while (frame.head != nullptr) {
    OprBlock* next = frame.head;
    frame.head = next->queue_next;
    if (frame.head == nullptr) frame.tail = nullptr;
    Execute(next);
  }
  tls_inline_top = frame.prev;
}

void ThreadedEngine::DispatchToPool(OprBlock* b, WorkerPool* pool) {
  auto* w = static_cast<WorkerTls*>(tls_worker_raw);
  if (tls_may_continue && w != nullptr && w->pool == pool) {
    if (w->continuation == nullptr && pool->queue().MayBypass(b->priority)) {
      w->continuation = b;
      return;
    }
    // Batched: a more urgent one displaces the continuation at the flush.
    if (w->completing > 0) {
      if (w->batch_size == WorkerTls::kMaxBatch) w->FlushBatch();
      w->batch[w->batch_size++] = b;
      return;
    }
  }
  pool->queue().Push(b);
}

void ThreadedEngine::WorkerLoop(WorkerPool& pool, int index) {
  profiler_->NameThisThread(pool.name() + "/" + std::to_string(index));
  WorkerTls tls(this, &pool);
  tls_worker_raw = &tls;
  const bool bounded = in_flight_.enabled();
  if (bounded) in_flight_.Register(tls.in_flight);
  auto flush = [&](int slot) {
    if (tls.done[slot] != 0) {
      FlushReleasedPushes(tls);
      SubtractPending(slot, tls.done[slot]);
      tls.done[slot] = 0;
    }
  };
  auto flush_all = [&] {
    FlushReleasedPushes(tls);
    flush(0);
    flush(1);
    if (bounded) in_flight_.WorkerIdle(tls.in_flight);
    // Freeing a deleted operator above destroys its closure here, outside
    // any function; a destructor that calls a callback may ready a kAsync
    // function that runs at once and leaves its successor as this worker's
    // continuation. The worker is about to wait on the queue, where nothing
    // would look at it: queue it. (Only on the queue-empty path.)
    if (tls.continuation != nullptr) [[unlikely]] {
      OprBlock* c = tls.continuation;
      tls.continuation = nullptr;
      pool.queue().Push(c);
    }
  };
  while (OprBlock* b = pool.queue().Pop(flush_all)) {
    for (OprBlock* next = b; next != nullptr;) {
      flush(next->pending_slot ^ 1);
      Execute(next);
      next = tls.continuation;
      tls.continuation = nullptr;
    }
  }
  flush(0);
  flush(1);
  FlushReleasedPushes(tls);
  if (bounded) in_flight_.Unregister(tls.in_flight);
  tls_worker_raw = nullptr;
}

void ThreadedEngine::TellWatchdogStarted(const OprBlock& b) {
  std::vector<std::uint64_t> reads, writes;
  for (const VarSlot& s : b.slots()) (s.write() ? writes : reads).push_back(s.var->profile_id);
  watchdog_->Started(&b, b.name, std::move(reads), std::move(writes));
}

void ThreadedEngine::Execute(OprBlock* b) {
  RunningScope scope(this);
  ContinuationGate gate(scope.nested());
  RunContext rctx{b->ctx, nullptr};  // a GPU function's stream is set below
  if (b->profile != nullptr) {
    auto* w = static_cast<WorkerTls*>(tls_worker_raw);
    // Came from the worker's pool, unless kAsync: that runs inline on the
    // thread that made it ready, a worker too, with no queue (profiler.md).
    const bool queued = w != nullptr && w->engine == this && b->prop() != FnProperty::kAsync;
    profiler_->MarkStart(
        b->profile,
        pending_[0].load(std::memory_order_relaxed) + pending_[1].load(std::memory_order_relaxed),
        queued ? w->pool->name().c_str() : nullptr,
        queued ? static_cast<std::int64_t>(w->pool->queue().SizeHint()) : -1);
  }
  if (b->kind == OprKind::kUser && failed_var_count_.load(std::memory_order_acquire) > 0) {
    if (FailurePtr f = FindFailure(b)) {
      if (b->profile != nullptr) b->profile->skipped = true;
      b->finish_refs.store(1, std::memory_order_relaxed);
      gate.Completing([&] { Complete(b, f); });  // skipped: passes the failure on
      return;
    }
  }
  if (watchdog_ != nullptr) [[unlikely]] {
    TellWatchdogStarted(*b);
  }
  PrefetchSlots(*b);
  if (const SyncFn* sync = b->sync_fn()) {
    b->finish_refs.store(1, std::memory_order_relaxed);
    std::exception_ptr error;
    try {
      rctx.stream = StreamFor(*b);
      (*sync)(rctx);
    } catch (...) {
      error = std::current_exception();
      if (b->profile != nullptr) b->profile->failed = true;
    }
    // A sync function is done when its GPU work is: what it queued on its
    // stream finishes before any successor (on another stream) starts.
    if (rctx.stream != nullptr) [[unlikely]]
      WaitForGpuStream(b, rctx.stream, error);
    FailurePtr failure = error ? RecordFailure(error) : nullptr;
    gate.Completing([&] { Complete(b, failure); });
    return;
  }
  const AsyncFn& async = b->prebuilt != nullptr ? b->prebuilt->async_fn : *b->async_fn();
  b->finish_refs.store(2, std::memory_order_relaxed);
  // No read-modify-write: between runs only stale callbacks touch the
  // ticket, and their compare-exchange fails (the value moved on), so this
  // thread is its only writer here. release: a callback that acquires the
  // ticket sees the block as this run set it up.
  const std::uint32_t ticket = b->ticket.load(std::memory_order_relaxed) + 1;
  b->ticket.store(ticket, std::memory_order_release);
  InlineCompletion inline_completion{b, ticket, false, nullptr};
  InlineCompletion* const outer = tls_inline_completion;
  tls_inline_completion = &inline_completion;
  try {
    rctx.stream = StreamFor(*b);
    async(rctx, MakeCallback(&ThreadedEngine::CompleteCallback, b, ticket));
  } catch (...) {
    tls_inline_completion = outer;
    std::exception_ptr error = std::current_exception();
    std::uint32_t expected = ticket;
    if (b->ticket.compare_exchange_strong(expected, ticket + 1, std::memory_order_acq_rel)) {
      FailurePtr failure = RecordFailure(error);
      gate.Completing([&] { Complete(b, failure); });
    } else if (inline_completion.claimed) {
      // The callback was called from inside this body, so the function
      // finishes only now, below: what it throws fails its vars. An error
      // passed to the callback takes precedence; this one is still logged.
      if (!inline_completion.error) {
        inline_completion.error = error;
      } else {
        RecordFailure(error);
      }
    } else {
      // Thrown after a callback called elsewhere finished the function: its
      // vars were released already, so only WaitForAll can report it.
      RecordFailure(error);
    }
  }
  tls_inline_completion = outer;
  if (inline_completion.claimed) {
    // Nobody else holds the block: the callback only recorded the finish.
    b->finish_refs.store(1, std::memory_order_relaxed);
    FailurePtr failure = inline_completion.error ? RecordFailure(inline_completion.error) : nullptr;
    gate.Completing([&] { Complete(b, failure); });
    return;
  }
  ReleaseExecution(b);
}

void* ThreadedEngine::StreamFor(const OprBlock& b) const {
  if (b.ctx.dev_type != DeviceType::kGPU || !real_gpus_) [[likely]]
    return nullptr;
  return gpu::ThreadStream(b.ctx.dev_id);
}

void ThreadedEngine::WaitForGpuStream(OprBlock* b, void* stream, std::exception_ptr& error) {
  const std::string cuda_error = gpu::SynchronizeStream(stream);
  if (cuda_error.empty() || error) return;  // the body's own exception goes first
  error = std::make_exception_ptr(
      std::runtime_error("function '" + std::string(b->name != nullptr ? b->name : "(unnamed)") +
                         "' on gpu(" + std::to_string(b->ctx.dev_id) +
                         "): its stream reported an error after it returned: " + cuda_error));
  if (b->profile != nullptr) b->profile->failed = true;
}

// Static, and reached without the engine's vtable: a stale callback may be
// called after its engine was destroyed. Blocks live in never-freed pool
// regions, so the ticket check is safe then and fails; only a callback that
// wins it finishes a running function, whose engine is alive.
void ThreadedEngine::CompleteCallback(Engine* engine, void* param, std::uint64_t ticket,
                                      std::exception_ptr error) {
  auto* b = static_cast<OprBlock*>(param);
  auto expected = static_cast<std::uint32_t>(ticket);
  if (!b->ticket.compare_exchange_strong(expected, expected + 1, std::memory_order_acq_rel)) {
    throw std::logic_error(
        "CallbackOnComplete: callback called a second time (its function was finished "
        "already, by an earlier call or because its body threw)");
  }
  auto* self = static_cast<ThreadedEngine*>(engine);
  // See Drain: what the completion releases may destroy the engine.
  struct CompletingScope {
    const ThreadedEngine* const outer = tls_completing_engine;
    explicit CompletingScope(const ThreadedEngine* e) { tls_completing_engine = e; }
    ~CompletingScope() { tls_completing_engine = outer; }
  } scope(self);
  self->FinishCallback(b, ticket, std::move(error));
}

void ThreadedEngine::FinishCallback(OprBlock* b, std::uint64_t ticket, std::exception_ptr error) {
  InlineCompletion* running = tls_inline_completion;
  if (running != nullptr && running->block == b &&
      running->ticket == static_cast<std::uint32_t>(ticket)) {
    running->claimed = true;  // called from inside its own body: Execute completes it
    running->error = std::move(error);
    return;
  }
  Complete(b, error ? RecordFailure(error) : nullptr);
}

// Starts fetching, before the function runs, what its completion touches
// next, pushed long ago and cold when the pusher runs ahead.
//
// One var: the completion grants the next waiting use, whose owner's `wait`
// it updates at once (W2, W5 with many operators). A slot taken off the
// var's FIFO keeps its `next`, which nobody writes once the slot is granted
// (a granted slot is out of the FIFO, and the grant under the var's lock
// happens before this run), so reading it here is race-free; it names the
// successor queued behind this use at grant time, if any. That successor's
// slot is inline (one-var blocks come from their own pool), so its block is
// the 128-byte-aligned pair of lines around it. Should the successor have
// run and its block been reused since, the prefetch is merely wasted.
//
// Several vars: the completion walks the slots, in a separate heap array,
// and then locks each var's grant side and reads the element queued behind
// each use. The body runs between here and there, so those misses (the
// var's grant line, usually last written by the other worker, and a slot
// pushed long ago) overlap it; fetched at grant time instead, they would
// land in the granting core, which half the time is not this one (W4 at
// T = 1: 0.97-0.98 of the wall before, nine interleaved sets; see
// docs/design.md, "Cache lines and prefetching", and the measurement in
// docs/performance.md, "W4 at T = 1: the machine's ceiling"). `next` is read
// as for one var; a read in a group has none.
void ThreadedEngine::PrefetchSlots(const OprBlock& b) {
  const std::span<const VarSlot> slots = b.slots();
  if (slots.size() == 1) {
    if (const VarSlot* next = slots[0].next()) {
      const auto line_pair = reinterpret_cast<std::uintptr_t>(next) & ~std::uintptr_t{127};
      PrefetchForWrite(reinterpret_cast<const void*>(line_pair));
      PrefetchForWrite(reinterpret_cast<const void*>(line_pair + 64));
    }
    return;
  }
  if (slots.empty()) return;
  const char* first = reinterpret_cast<const char*>(slots.data());
  const char* last = reinterpret_cast<const char*>(slots.data() + slots.size()) - 1;
  for (const char* p = first; p <= last; p += 64) __builtin_prefetch(p);
  __builtin_prefetch(last);
  for (const VarSlot& s : slots) {
    PrefetchForWrite(&s.var->lock);  // locked by the completion
    if (const VarSlot* next = s.next()) {
      __builtin_prefetch(next);
      __builtin_prefetch(reinterpret_cast<const char*>(next) + sizeof(VarSlot) - 1);
    }
  }
}

// Complete's release of b's vars when b failed, was profiled or deletes its
// var.
void ThreadedEngine::CompleteVarsGeneral(OprBlock* b, const FailurePtr& failure,
                                         GrantList* grants) {
  GrantList& granted = *grants;
  std::vector<Var*> newly_failed;
  std::vector<std::uint64_t> granted_vars;  // profiled only: the var of each grant
  if (b->kind == OprKind::kDeleteVar) {
    FreeVar(b->slots()[0].var);
  } else {
    for (VarSlot& s : b->slots()) {
      if (!s.write()) {
        s.var->CompleteRead(&granted);
      } else {
        // A scratch var (a resource) guards state, not a result: a failure
        // is not recorded on it, or every later user would be skipped. The
        // flag is read only on the failure path.
        const bool fail_var = failure && !s.var->scratch.load(std::memory_order_relaxed);
        if (fail_var) failed_var_count_.fetch_add(1, std::memory_order_release);
        if (s.var->CompleteWrite(fail_var ? failure : kNoFailure, &granted)) {
          newly_failed.push_back(s.var);
        } else if (fail_var) {
          failed_var_count_.fetch_sub(1, std::memory_order_release);
        }
      }
      if (b->profile != nullptr) {
        granted_vars.resize(static_cast<std::size_t>(granted.size), s.var->profile_id);
      }
    }
  }
  if (b->profile != nullptr) {
    if (failure && !b->profile->skipped) b->profile->failed = true;
    Profiler::MarkEnd(b->profile);  // before the functions it releases start
  }
  if (!newly_failed.empty()) {
    MutexLock lock(failures_mu_);
    failed_vars_.insert(newly_failed.begin(), newly_failed.end());
  }
  if (b->profile != nullptr) {
    // Flows only from the grant that made a function ready (profiler.md).
    HandOutGrantsProfiled(granted, granted_vars, b->profile);
    profiler_->Finish(b->profile);
    b->profile = nullptr;
  } else {
    HandOutGrants(granted, nullptr);
  }
}

void ThreadedEngine::Complete(OprBlock* b, const FailurePtr& failure) {
  const int pending_slot = b->pending_slot;
  // On a worker of this engine, blocks this completion makes ready for the
  // worker's pool are queued in one batch at the end (see DispatchToPool).
  auto* w = static_cast<WorkerTls*>(tls_worker_raw);
  if (w != nullptr && w->engine != this) w = nullptr;
  if (w != nullptr) ++w->completing;
  if (watchdog_ != nullptr) watchdog_->Finished(b);
  GrantList granted;
  if (!failure && b->profile == nullptr && b->kind != OprKind::kDeleteVar) [[likely]] {
    // The common completion: no failure to record, nothing profiled.
    for (VarSlot& s : b->slots()) {
      if (s.write()) {
        s.var->CompleteWrite(kNoFailure, &granted);
      } else {
        s.var->CompleteRead(&granted);
      }
    }
    HandOutGrants(granted, nullptr);
  } else {
    CompleteVarsGeneral(b, failure, &granted);
  }
  if (w != nullptr && --w->completing == 0) w->FlushBatch();
  // The function is finished: its backpressure unit goes back before its
  // closure is destroyed. On a thread outside the engine (a callback's
  // caller) a destructor in the closure may push, and that push may wait
  // for room; with the unit still held it would wait for itself.
  if (in_flight_.enabled()) ReleaseInFlight();
  ReleaseExecution(b);
  FinishPending(pending_slot);
}

void ThreadedEngine::ReleaseExecution(OprBlock* b) {
  // A count of 1 seen here is final (the other holder, if any, has let go,
  // and acquire sees what it did): skip the read-modify-write, which is the
  // common case of every sync function.
  if (b->finish_refs.load(std::memory_order_acquire) != 1 &&
      b->finish_refs.fetch_sub(1, std::memory_order_acq_rel) != 1) {
    return;
  }
  Opr* op = b->prebuilt;
  RecycleBlock(b);
  if (op == nullptr) return;
  auto* w = static_cast<WorkerTls*>(tls_worker_raw);
  if (w == nullptr || w->engine != this) {
    FinishPushes(op, 1);
    return;
  }
  if (w->released_op != op || w->released == WorkerTls::kFlushEvery) {
    FlushReleasedPushes(*w);
    w->released_op = op;
  }
  ++w->released;
}

void ThreadedEngine::RecycleBlock(OprBlock* b) {
  delete b->profile;  // only set when a push failed after Begin
  b->profile = nullptr;
  b->ResetFn();  // drops the closure and what it captured, now
  b->prebuilt = nullptr;
  if (b->heap_slots()) {
    MultiVarBlockPool::Free(b);
  } else {
    OneVarBlockPool::Free(b);
  }
}

// ---------------------------------------------------------------- counting for the waits

void ThreadedEngine::FlushReleasedPushes(WorkerTls& w) {
  if (w.released == 0) return;
  Opr* op = w.released_op;
  const std::uint32_t n = w.released;
  w.released_op = nullptr;
  w.released = 0;
  FinishPushes(op, n);
}

void ThreadedEngine::CountPush(OprBlock* b) {
  for (;;) {
    const std::uint64_t g = generation_.load(std::memory_order_seq_cst);
    const int slot = static_cast<int>(g & 1);
    pending_[slot].fetch_add(1, std::memory_order_seq_cst);
    if (generation_.load(std::memory_order_seq_cst) == g) {
      b->pending_slot = static_cast<std::uint8_t>(slot);
      return;
    }
    SubtractPending(slot, 1);  // a WaitForAll flipped meanwhile: count in the new generation
  }
}

void ThreadedEngine::FinishPending(int slot) {
  auto* w = static_cast<WorkerTls*>(tls_worker_raw);
  if (w != nullptr && w->engine == this) {
    // Batched only while the worker completes a function whose body has
    // returned (tls_may_continue): the worker then goes back to its loop,
    // which flushes before it runs anything of the other generation. A
    // completion inside a running body (a callback the body calls, a kAsync
    // function it runs inline) is counted now: batched, it would wait for
    // that body, and so would a WaitForAll that does not wait for the body
    // (one that started before the body's push). Hot path cost: one
    // thread-local load.
    if (tls_may_continue) [[likely]] {
      if (++w->done[slot] >= WorkerTls::kFlushEvery) {
        FlushReleasedPushes(*w);
        SubtractPending(slot, w->done[slot]);
        w->done[slot] = 0;
      }
      return;
    }
    FlushReleasedPushes(*w);  // a WaitForAll that returns has seen deleted operators freed
    SubtractPending(slot, 1);
    return;
  }
  // A thread outside the engine's pools (a callback's caller, or a pusher
  // running inline) may still be inside SubtractPending when the waiter it
  // wakes destroys the engine: Drain waits for external_completers_ too.
  // (Workers need no guard: the pools are joined before the engine dies.)
  external_completers_.fetch_add(1, std::memory_order_seq_cst);
  SubtractPending(slot, 1);
  external_completers_.fetch_sub(1, std::memory_order_release);
}

void ThreadedEngine::InFlightReservation::Reserve(bool may_wait) {
  // Pushes from inside this engine (a running function, or one of its
  // workers) never wait: they could be what frees room. Another engine's
  // worker is a thread from outside, like any other.
  const auto* w = static_cast<const WorkerTls*>(tls_worker_raw);
  const bool own_worker = w != nullptr && w->engine == engine_;
  engine_->in_flight_.Reserve(may_wait && !engine_->OnOwnThread() && !own_worker);
}

void ThreadedEngine::ReleaseInFlight() {
  auto* w = static_cast<WorkerTls*>(tls_worker_raw);
  if (w != nullptr && w->engine == this) {
    in_flight_.Release(w->in_flight);
  } else {
    in_flight_.Release();
  }
}

}  // namespace depengine::internal
