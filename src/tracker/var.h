// Var: the dependency tracker's per-resource state. Each var keeps a FIFO of
// the functions waiting to use it and grants access in push order:
// any number of readers at once, or one writer alone.
//
// A var has two sides on two cache lines, so that a pusher running ahead of
// the workers (a chain: W1, W5) and the worker finishing the var's functions
// do not trade one line per function:
//   push side   push_lock: `deleted` and the inbox, a list of uses pushed
//               but not yet seen by the grant side, in push order.
//   grant side  lock: the state machine below and the FIFO of waiting uses.
//
// The grant side's state machine, with `Q` the FIFO:
//   Idle        running_reads == 0, !write_running, Q empty
//   Reading(n)  running_reads == n > 0, !write_running
//   Writing     write_running (running_reads == 0)
// A reader is granted at once from Idle/Reading when Q is empty; a writer
// only from Idle. Otherwise the request waits in Q. When the last reader
// finishes, a waiting writer at the head of Q is granted; when a writer
// finishes, the head writer, or else every reader up to the next writer, is
// granted. Q and the inbox hold a waiting write as its slot and a run of
// waiting reads as ReaderGroups. Uses move from the inbox to the end of Q
// whenever Q runs empty (SettleLocked), or before a one-var push
// (PrepareSingleLocked).
//
// `state` (see GrantState) tells a pusher whether a later completion is
// certain to come and pull the inbox: then the pusher only appends its slot.
// Otherwise, or when the var is idle, the pusher settles the var itself.
// See SettleLocked for why no slot is left behind, and docs/design.md.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "common/mutex.h"
#include "depengine/engine.h"
#include "tracker/failure.h"

namespace depengine::internal {
struct OprBlock;
class ThreadedEngine;

// One use of one var by one pushed function; lives inside the function's
// OprBlock, and is linked into the var's queue while it waits (see
// ReaderGroup for the exception).
struct VarSlot {
  Var* var = nullptr;

  VarSlot() = default;
  VarSlot(Var* v, OprBlock* owner, bool write)
      : var(v), owner_and_write_(reinterpret_cast<std::uintptr_t>(owner) | (write ? 1u : 0u)) {}
  // The function that uses the var.
  OprBlock* owner() const {
    return reinterpret_cast<OprBlock*>(owner_and_write_ & ~std::uintptr_t{1});
  }
  // Whether it writes the var (else it only reads it).
  bool write() const { return (owner_and_write_ & 1u) != 0; }
  // Whether this is the queue link of a ReaderGroup, not a function's use.
  bool is_group() const { return owner_and_write_ == kGroupTag; }

  // The next element of the var's queue (or inbox), and whether it is a
  // write: a grant that ends a run of reads stops there without reading the
  // write's cold slot. Guarded by var->lock while queued (push_lock in the
  // inbox); left as it was once the element is granted (see PrefetchSlots).
  VarSlot* next() const { return reinterpret_cast<VarSlot*>(next_ & ~std::uintptr_t{1}); }
  bool next_is_write() const { return (next_ & 1u) != 0; }
  // `n` was just written by this thread (a push) or is this list's own.
  void set_next(const VarSlot* n) {
    next_ = reinterpret_cast<std::uintptr_t>(n) | (n != nullptr && n->write() ? 1u : 0u);
  }

 protected:
  struct GroupTag {};
  explicit VarSlot(GroupTag) : owner_and_write_(kGroupTag) {}

 private:
  // Bit 0: write. Blocks are 128-aligned, so bit 1 is free too: a group's
  // link has no owner and bit 1 set.
  static constexpr std::uintptr_t kGroupTag = 2;
  std::uintptr_t next_ = 0;  // slots are 8-aligned: bit 0 is free
  std::uintptr_t owner_and_write_ = 0;
};

// Reads waiting on a var in a run (no write between them), after the run's
// first, which waits as its own slot: their owners in an array. A grant of
// the run then reads one line more than its first slot, instead of one cold
// slot per read, each found only through the one before it (W4's workers
// spent about a third of their time in that chain of dependent misses). A
// run of one read, common when each round of a program reads a var once
// (W3), needs no group. Groups come from an object pool: the pusher that
// starts one takes it (see Var::ReserveGroups), the grant that empties it
// gives it back. A longer run than kCapacity + 1 is several groups.
struct alignas(128) ReaderGroup : VarSlot {
  static constexpr std::uint32_t kCapacity = 11;
  ReaderGroup() : VarSlot(GroupTag{}) {}
  // Reads in owners[]; guarded like the link, by the lock of the list that
  // holds the group (var->lock in the queue, push_lock in the inbox).
  std::uint32_t size = 0;
  // In the first line with the link and the first owners: taking a group
  // from the pool and filling it for a short run touches that line only.
  ReaderGroup* pool_next = nullptr;  // owned by ObjectPool while free
  OprBlock* owners[kCapacity];
};
static_assert(sizeof(ReaderGroup) == 128, "a ReaderGroup is one pair of cache lines");

// A list of slots granted by a completion, to be handed to their owners
// after the var's lock is released. Owner blocks may be recycled as soon as
// they are granted, so the list holds only owner pointers.
struct GrantList {
  static constexpr int kInline = 64;  // a W3-style fan of 64 readers needs no allocation
  OprBlock* inline_[kInline];
  OprBlock** data = inline_;
  int size = 0;
  int cap = kInline;
  GrantList() = default;
  GrantList(const GrantList&) = delete;
  GrantList& operator=(const GrantList&) = delete;
  ~GrantList() {
    if (data != inline_) delete[] data;
  }
  void Add(OprBlock* b) {
    if (size == cap) {
      OprBlock** bigger = new OprBlock*[static_cast<std::size_t>(cap) * 2];
      for (int i = 0; i < size; ++i) bigger[i] = data[i];
      if (data != inline_) delete[] data;
      data = bigger;
      cap *= 2;
    }
    data[size++] = b;
  }
};

}  // namespace depengine::internal

namespace depengine {

class alignas(64) Var {
 public:
  static constexpr std::uint32_t kLive = 0x5641524cu;  // "VARL"
  static constexpr std::uint32_t kDead = 0xdeadbeefu;

  // ---------------- push side (first cache line): pushers ----------------
  // Identity, checked on every use of a handle. Written when the var is made
  // and freed; read without a lock to reject stale handles early (relaxed: a
  // best-effort check, the authoritative one is `deleted` under push_lock).
  std::atomic<std::uint32_t> magic{kDead};
  internal::SpinLock push_lock;
  // DeleteVariable was pushed. Written under push_lock before the deletion's
  // slot is published; read under push_lock, or (relaxed) by a single-var
  // push holding `lock` (see PrepareSingleLocked).
  std::atomic<bool> deleted{false};
  // The var guards scratch state (a resource), not a result: a failing
  // function that writes it does not mark it failed (see ThreadedEngine::
  // CompleteVarsGeneral; set through internal::MarkScratchVar). Written once, before the
  // var's first push (the caller orders that as it orders the var's
  // creation; the push's locks publish it to completers); relaxed.
  std::atomic<bool> scratch{false};
  // Uses pushed and not yet moved to the grant side's FIFO, oldest first:
  // writes' slots and ReaderGroups.
  internal::VarSlot* inbox_head GUARDED_BY(push_lock) = nullptr;
  internal::VarSlot* inbox_tail GUARDED_BY(push_lock) = nullptr;
  std::uint32_t inbox_len GUARDED_BY(push_lock) = 0;  // uses, not elements
  // Set when a push saw a long FIFO (a chain its worker is draining): a
  // one-var push (PushSingle) then takes the general path to the inbox
  // instead of the grant side's lock, until an Append finds the FIFO short
  // again. A hint: written relaxed under either lock (QueueLocked under
  // `lock`, Append under `push_lock`) and read relaxed with no lock by
  // PushSingle; a stale value only picks the slower, still correct path.
  std::atomic<bool> chain_mode{false};
  const internal::ThreadedEngine* engine = nullptr;  // set at creation, read-only after
  std::uint64_t profile_id = 0;                      // names the var in profiles; set at creation

  // ---------------- grant side (second cache line): completers -----------
  alignas(64) internal::SpinLock lock;
  // What the grant side promises pushers. Written under lock, only when it
  // changes; read by pushers without lock (see SettleLocked).
  enum GrantState : std::uint8_t {
    kIdle,     // nothing waits in the FIFO (a function may run): a pusher
               // whose slot starts the inbox settles the var itself
    kBusy,     // a few uses wait on running functions: their completion
               // will settle (pull the inbox), so Append puts a slot in the
               // inbox rather than take the grant side's lock
    kBacklog,  // at least kLongBacklog uses wait: as kBusy, and a one-var
               // push skips the grant side too (chain_mode: a chain whose
               // worker is busy on this var)
  };
  // A short FIFO (the next function on a var, W2) is appended to directly:
  // the inbox would add a trip to the pushers' line on completion.
  static constexpr std::uint32_t kLongBacklog = 4;
  std::atomic<GrantState> state{kIdle};
  // Set (seq_cst) by a pusher that appends to an empty inbox, cleared by the
  // grant side when it pulls the inbox (both under push_lock). It lives on
  // this line so that a completion that finds the var idle can tell, without
  // touching the pushers' line, whether there is an inbox to pull.
  std::atomic<bool> inbox_pending{false};
  bool write_running GUARDED_BY(lock) = false;               // a granted, unfinished write
  int running_reads GUARDED_BY(lock) = 0;                    // granted, unfinished reads
  // The FIFO of waiting uses: writes' slots and ReaderGroups, oldest first.
  internal::VarSlot* queue_head GUARDED_BY(lock) = nullptr;
  internal::VarSlot* queue_tail GUARDED_BY(lock) = nullptr;
  std::uint32_t queue_len GUARDED_BY(lock) = 0;  // waiting uses, not elements
  internal::FailurePtr failure GUARDED_BY(lock);             // set by a failed writer

  // ---------------- cold (after the grant side, in its line) ---------------
  // The engine's list of live vars; guarded by the engine's live_mu_.
  // pool_next shares storage with live_prev: a var is either live or free.
  union {
    Var* live_prev = nullptr;
    Var* pool_next;  // owned by ObjectPool while the var is free
  };
  Var* live_next = nullptr;

  // Makes sure the calling thread can start `reads` ReaderGroups without
  // allocating: a pusher calls it before it takes any var's lock, since a
  // read queued under those locks may start a group and must not throw.
  static void ReserveGroups(std::size_t reads);

  // Resets a pooled var for a new life in `owner`.
  void Init(const internal::ThreadedEngine* owner) NO_THREAD_SAFETY_ANALYSIS;

  // Push, step 1, with push_lock held (and no grant-side lock): queues
  // `slot` behind every earlier use. When the grant side is idle enough to
  // take it at once (try-locked, nothing waiting), grants it or queues it in
  // the FIFO directly and returns kDone; `*granted` tells which. Otherwise it
  // lands in the inbox: kInbox if a later completion (or an earlier pusher's
  // Settle) is certain to pull it, kNeedsSettle if the pusher must call
  // Settle itself.
  enum class AppendResult { kDone, kInbox, kNeedsSettle };
  AppendResult Append(internal::VarSlot* slot, bool* granted) REQUIRES(push_lock);

  // A push of a function with this one var, with lock held and push_lock
  // not. Step 1: pulls a pending inbox into the FIFO (so the slot goes behind
  // every earlier push); returns false when the var was deleted (then grants
  // what it can, and the push must be rejected).
  bool PrepareSingleLocked(internal::GrantList* granted) REQUIRES(lock) EXCLUDES(push_lock);
  // Step 2: queues `slot` and grants what it can; returns true when `slot`
  // itself was granted (then it is not in `granted`).
  bool QueueSingleLocked(internal::VarSlot* slot, internal::GrantList* granted) REQUIRES(lock);

  // Append's slow path: the slot starts the inbox.
  AppendResult AppendToEmptyInbox(internal::VarSlot* slot) REQUIRES(push_lock);

  // Push, step 2, with no lock held: moves the inbox into the FIFO and
  // grants what it can, collecting the owners of granted slots.
  void Settle(internal::GrantList* granted) EXCLUDES(lock, push_lock);

  // True when no function uses or waits for the var.
  bool IdleLocked() const REQUIRES(lock, push_lock) {
    return running_reads == 0 && !write_running && queue_head == nullptr && inbox_head == nullptr;
  }

  // Finishes a granted read and collects the uses it grants.
  void CompleteRead(internal::GrantList* granted) EXCLUDES(lock, push_lock);
  // Finishes a granted write; marks the var failed with `failure` when set.
  // Returns true when the var newly became failed.
  bool CompleteWrite(const internal::FailurePtr& failure, internal::GrantList* granted)
      EXCLUDES(lock, push_lock);

 private:
  // Grants from the FIFO's head what the state allows.
  void GrantFromQueueLocked(internal::GrantList* granted) REQUIRES(lock);
  // Grants, pulling the inbox whenever the FIFO runs dry, and publishes
  // `state`.
  void SettleLocked(internal::GrantList* granted) REQUIRES(lock) EXCLUDES(push_lock);
  // Publishes `state` from the FIFO; returns true when it stored kIdle.
  bool PublishStateLocked() REQUIRES(lock);
  bool TryGrantNowLocked(internal::VarSlot* slot) REQUIRES(lock);
  void QueueLocked(internal::VarSlot* slot) REQUIRES(lock);
  // Grants `slot` at once (true) or queues it and publishes `state`.
  bool GrantOrQueueLocked(internal::VarSlot* slot) REQUIRES(lock);
  // Links `slot` at the end of the list [*head, *tail]: a write's slot as
  // itself, a read into the group at the tail, or a new group.
  static void AddUse(internal::VarSlot** head, internal::VarSlot** tail, internal::VarSlot* slot);
  // Moves the inbox to the end of the FIFO and clears inbox_pending.
  void PullInboxLocked() REQUIRES(lock) EXCLUDES(push_lock);
};

}  // namespace depengine
static_assert(sizeof(depengine::Var) == 128,
              "a Var is two cache lines: the push side and the grant side");
