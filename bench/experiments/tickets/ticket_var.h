// TicketVar: the per-var state of the ticket tracker, step 1 of "Next: the
// engine on tickets" in docs/performance.md. Built and tested on its own
// (tests/experiments/), outside the library: the engine runs on
// src/tracker/var.h, and step 3, the engine on this, was measured and not
// kept.
//
// The idea, measured in bench/experiments/ticket_tracker.cc: a push never
// reads or writes a cache line that a worker writes. Each var has two sides:
//   pusher side  push_lock, and the counts of writes pushed and of reads
//                pushed since the last write. A push takes a *ticket* there
//                (StampRead / StampWrite): which writes and reads must finish
//                before its use of the var is due. Nothing else is read.
//   worker side  `state`: writes finished, and reads finished since the last
//                write, packed in one word; the list of tasks parked on the
//                var, sorted by ticket; the var's failure.
// A worker that takes a task checks its uses one by one (AcquireUses). A use
// that is not due yet parks the task on that var; the completion that makes
// it due takes it off the list and goes on with the task's next use. Tickets
// follow one total push order, so no cycle of waits can form, and exactly
// one thread takes a parked task off its list, so exactly one runs it.
//
// Tickets, with W = writes pushed before a use and R = reads pushed since
// the last of them:
//   a read   (W, -) is due when writes_done == W (reads of one epoch share);
//   a write  (W, R) is due when writes_done == W and reads_done == R.
// Once due, a use stays due until its own task releases it: nothing else can
// move `state` past it. Writes are counted modulo 2^32 and reads (within an
// epoch) modulo 2^31: a var may see any number of uses in its life, but
// fewer than 2^30 uses may be pending on it at once (each costs memory, so
// this is not a limit in practice).
//
// Memory ordering: a completion changes `state` with a seq_cst store (write)
// or compare-exchange (read), which releases everything its task did; a due
// check loads `state` with acquire, so a task that finds its use due sees
// the effects of every task it had to wait for. Parking is a Dekker
// handshake on the worker side only: the parker, holding park_lock, links
// the task, stores `has_parked` (seq_cst), then reloads `state` (seq_cst);
// the completer stores `state` (seq_cst), then loads `has_parked` (seq_cst).
// In the single order of those four seq_cst operations one side sees the
// other's store, so either the parker finds its use due and takes its task
// back, or the completer finds the flag and takes the due prefix of the list
// (under park_lock; both may look, only one finds each task there).
#pragma once

#include <atomic>
#include <cstdint>

#include "common/mutex.h"
#include "common/prefetch.h"
#include "tracker/failure.h"

namespace depengine::internal {

class TicketVar;

// One use of one var by one pushed function: the var and the ticket the push
// took there. Written by the pusher before the task is handed to a worker;
// read-only after.
struct TicketUse {
  TicketVar* var = nullptr;
  std::uint32_t epoch = 0;  // W: writes pushed on the var before this use
  // R: for a write, reads pushed in its epoch (31 bits: see state_), so that
  // a use fits in 16 bytes and a one-var block in two cache lines.
  std::uint32_t reads_before : 31 = 0;
  std::uint32_t write : 1 = 0;
};
static_assert(sizeof(TicketUse) == 16);

// A pushed function as the tracker sees it: its uses (distinct vars, any
// order; AcquireUses checks them in that order) and how far it got.
struct TicketTask {
  TicketUse* uses = nullptr;
  std::uint16_t num_uses = 0;
  // Uses acquired (found due) so far. Owned by whichever thread holds the
  // task: the pusher, then the thread that took it from a queue, or the one
  // that took it off a parked list. Never touched by two threads at once.
  std::uint16_t acquired = 0;
  // Links in the parked list of uses[acquired].var; guarded by that var's
  // park lock while the task is parked there.
  TicketTask* park_next = nullptr;
  TicketTask* park_prev = nullptr;
};

// A list of tasks, with room for a W3-style fan of 64 resumed readers
// before it allocates. Owned by one thread.
class TaskList {
 public:
  TaskList() = default;
  TaskList(const TaskList&) = delete;
  TaskList& operator=(const TaskList&) = delete;
  ~TaskList() {
    if (data_ != inline_) delete[] data_;
  }
  void Push(TicketTask* t) {
    if (size_ == cap_) Grow();
    data_[size_++] = t;
  }
  TicketTask* Pop() { return data_[--size_]; }  // the newest
  bool empty() const { return size_ == 0; }
  int size() const { return size_; }
  TicketTask* operator[](int i) const { return data_[i]; }

 private:
  void Grow();
  static constexpr int kInline = 64;
  TicketTask* inline_[kInline];
  TicketTask** data_ = inline_;
  int size_ = 0;
  int cap_ = kInline;
};

class alignas(64) TicketVar {
 public:
  TicketVar() = default;
  TicketVar(const TicketVar&) = delete;
  TicketVar& operator=(const TicketVar&) = delete;

  // ---------------- pusher side (first cache line) ----------------------
  // Taken by pushers only. A push of several vars takes their push locks in
  // address order and stamps them all before it releases any, so pushes
  // from several threads get tickets in one order on every var they share.
  SpinLock push_lock;

  // Takes the next ticket on this var for a read / a write by the caller's
  // function. Pushers only, with push_lock held; touches this line only.
  TicketUse StampRead() REQUIRES(push_lock);
  TicketUse StampWrite() REQUIRES(push_lock);

  // ---------------- worker side (second cache line) ---------------------
  // Whether `u` (a ticket of this var) may run now. Any thread holding the
  // task. acquire: see the memory-ordering note above.
  bool IsDue(const TicketUse& u) const {
    return IsDueAt(state_.load(std::memory_order_acquire), u);
  }
  // Parks `t`, whose current use t->uses[t->acquired] is a ticket of this
  // var and was found not due by the caller. Returns true when that use is
  // due after all (the task was not left on the list: its cursor is
  // advanced and the caller goes on with it). Other tasks found due on the
  // list while parking are taken off it, their cursors advanced, and
  // appended to `resumed`: the caller must go on with each of them.
  bool Park(TicketTask* t, TaskList* resumed) EXCLUDES(park_lock_);
  // Finishes a read / a write that was due (the task's use `u`); tasks
  // parked on the var that this makes due are taken off its list, their
  // cursors advanced, and appended to `resumed`.
  void CompleteRead(TaskList* resumed) EXCLUDES(park_lock_);
  void CompleteWrite(const TicketUse& u, TaskList* resumed) EXCLUDES(park_lock_);

  // The var's failure (failure.h): set by a failing writer before its
  // CompleteWrite, read by the functions that use the var after it (they
  // found their use due, so they see it), taken by the waiter that delivers
  // it. Any thread.
  // SetFailure returns true when the var had no failure before.
  bool SetFailure(FailurePtr f) EXCLUDES(park_lock_);
  FailurePtr Failure() const EXCLUDES(park_lock_);
  FailurePtr TakeFailure() EXCLUDES(park_lock_);

  // Whether every use pushed so far has finished. Pushers, with push_lock
  // held (so no ticket is being taken); acquire, like a due check.
  bool AllFinished() const REQUIRES(push_lock) {
    return state_.load(std::memory_order_acquire) == Pack(writes_pushed_, reads_pushed_);
  }
  // Resets a var whose every use finished, for a new life (a pool reuses
  // vars): counts to zero, no failure. By its only user.
  void ResetForReuse() NO_THREAD_SAFETY_ANALYSIS;
  // Starts fetching the worker-side line, which a completion writes.
  void PrefetchWorkerSide() const { PrefetchForWrite(&state_); }

  // Tasks parked on the var now. For tests and diagnostics; any thread.
  int ParkedCountForTesting() const EXCLUDES(park_lock_);
  // Starts a fresh var as if `writes` writes had finished and `reads` reads
  // had been pushed and finished since, so that tests reach the counts'
  // wrap-around. Before the var's first use, by its only user.
  void StartAtForTesting(std::uint32_t writes, std::uint32_t reads) NO_THREAD_SAFETY_ANALYSIS;

 private:
  static constexpr std::uint32_t kReadMask = 0x7fffffffu;  // reads count modulo 2^31
  static constexpr std::uint64_t Pack(std::uint32_t writes, std::uint32_t reads) {
    return (std::uint64_t{writes} << 32) | reads;
  }
  static bool IsDueAt(std::uint64_t state, const TicketUse& u) {
    if (u.write) return state == Pack(u.epoch, u.reads_before);
    return static_cast<std::uint32_t>(state >> 32) == u.epoch;
  }
  // This var's use by a task parked on it (or about to be).
  static const TicketUse& UseOf(const TicketTask* t) { return t->uses[t->acquired]; }
  // Whether a's use comes before b's in push order (both tickets of this
  // var, both pending): modular comparison of epochs, then a read of an
  // epoch before its write. Reads of one epoch are not ordered.
  static bool Before(const TicketUse& a, const TicketUse& b) {
    const auto d = static_cast<std::int32_t>(a.epoch - b.epoch);
    if (d != 0) return d < 0;
    return !a.write && b.write;
  }
  // Links t into the parked list in ticket order, after any equal tickets.
  void InsertLocked(TicketTask* t) REQUIRES(park_lock_);
  // Takes the due prefix of the list off it into `resumed` (cursors
  // advanced), except `self`, which is only unlinked and reported.
  bool TakeDueLocked(std::uint64_t state, TicketTask* self, TaskList* resumed) REQUIRES(park_lock_);
  // After a completion stored `stored` to `state`: takes what it made due.
  void ResumeAfter(std::uint64_t stored, TaskList* resumed) EXCLUDES(park_lock_);

  // Pusher side. Written and read under push_lock only.
  std::uint32_t writes_pushed_ GUARDED_BY(push_lock) = 0;
  std::uint32_t reads_pushed_ GUARDED_BY(push_lock) = 0;  // since the last write, mod 2^31

  // (writes finished << 32) | reads finished since the last write (modulo
  // 2^31, like a write's reads_before). Written by completions only: a
  // write's seq_cst store (nothing else can change the word while a write
  // is due), a read's seq_cst compare-exchange (the reads of one epoch
  // complete concurrently; a fetch_add would run past 2^31 reads). Loaded
  // with acquire by due checks and seq_cst by parkers (see the note at the
  // top).
  alignas(64) std::atomic<std::uint64_t> state_{0};
  // Some task may be parked here. Set (seq_cst) by a parker after it links
  // its task, cleared (relaxed) by whoever empties the list; both under
  // park_lock_, so the flag's modification order follows the lock's. Loaded
  // seq_cst by completers after their store to state_: a completer that the
  // handshake makes look sees the parker's true or a later clear, and a
  // clear comes only after that parker's task left the list.
  std::atomic<bool> has_parked_{false};
  mutable SpinLock park_lock_;
  // Parked tasks, sorted by Before, oldest first.
  TicketTask* parked_head_ GUARDED_BY(park_lock_) = nullptr;
  TicketTask* parked_tail_ GUARDED_BY(park_lock_) = nullptr;
  FailurePtr failure_ GUARDED_BY(park_lock_);
};

// Takes the uses of `t` from its cursor on, in order. Returns true when t
// holds all of them: the caller runs it. Returns false when t was parked: a
// later completion resumes it and reports it ready there. Tasks that were
// found due on the way and now hold all their uses are appended to `ready`:
// the caller hands them out to run. Any thread that holds t.
bool AcquireUses(TicketTask* t, TaskList* ready);

// Releases every use of a task that has run (a failing writer sets its
// vars' failures first). Tasks that now hold all their uses are appended to
// `ready`. Called once per run, by the thread that finishes it.
void ReleaseUses(const TicketTask& t, TaskList* ready);

#ifdef DEPENGINE_TICKET_VAR_TEST_HOOK
// Called by Park between the caller's failed due check and the handshake,
// to widen the park / complete race in tests. Null in normal builds.
extern void (*ticket_park_delay_for_testing)();
// Called by a completion between its store to `state` and its look at the
// parked list, so that tests can interleave two completions there.
extern void (*ticket_complete_delay_for_testing)();
// Steps the parked-list insertions have walked (both ends count as one).
extern std::atomic<std::uint64_t> ticket_insert_steps_for_testing;  // relaxed: a count
#endif

}  // namespace depengine::internal
