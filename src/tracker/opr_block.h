// Opr and OprBlock: a function as the engine holds it.
//
// Opr is what runs: the function, its property and name, and (for an
// operator built with NewOperator) its sorted var list. OprBlock is one push
// of an Opr: its context, priority, and one VarSlot per var it uses. A
// one-shot push (PushAsync/PushSync) uses the Opr embedded in its block.
// Both come from object pools and keep their containers' capacity across
// uses, so a push allocates nothing in steady state.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <utility>
#include <vector>

#include "depengine/engine.h"
#include "tracker/var.h"

namespace depengine::internal {

struct ProfileRecord;

// What an Opr is for; internal kinds run even when their vars failed.
enum class OprKind : std::uint8_t {
  kUser,           // a user function
  kDeleteVar,      // DeleteVariable: runs delete_fn, then frees the var
  kWaitVar,        // WaitForVar: wakes the waiting thread
  kClearFailures,  // internal::PushClearFailures: never skipped, clears its vars' failures
};

}  // namespace depengine::internal

namespace depengine::internal {

// The function of a one-shot push: a SyncFn or an AsyncFn in one slot of
// storage. Which one (or none) is recorded by the owner (OprBlock::fn_state_),
// so that the block fits in two cache lines.
union FnStorage {
  FnStorage() {}
  ~FnStorage() {}
  FnStorage(const FnStorage&) = delete;
  FnStorage& operator=(const FnStorage&) = delete;
  SyncFn sync;
  AsyncFn async;
};

}  // namespace depengine::internal

namespace depengine {

// A prebuilt operator (NewOperator): pushed many times, deleted once.
// Four cache lines in two 128-byte pairs (the unit the adjacent-line
// prefetcher fetches): the first pair is the pushers' line and cold
// fields, the second the workers' (the function they run, the count they
// add to), so that a worker that reads the function does not pull in the
// line pushers update.
class alignas(128) Opr {
 public:
  static constexpr std::uint32_t kLive = 0x4f50524cu;  // "OPRL"
  static constexpr std::uint32_t kDead = 0xdeadbeefu;
  // Bit of `pushed` that records DeleteOperator; also the value `finished`
  // reaches when the last push of a deleted operator finishes.
  static constexpr std::uint64_t kDeleteRequested = std::uint64_t{1} << 62;

  // --- the pushers' line: everything Push reads, and the count it adds to.
  // With 4,096 operators pushed round robin (W5) a push touched four lines
  // of its Opr (the counter's, two of fields, the var list's heap array),
  // a megabyte over a round, which missed the core's cache on every push;
  // now it touches this one.

  // Pushes accepted, plus kDeleteRequested once DeleteOperator ran (a push
  // that finds the bit set is rejected). Pushers' fetch_add, DeleteOperator's
  // fetch_or: one total order decides which pushes DeleteOperator counted.
  // acq_rel, as DeleteOperator's fetch_or: the push that reads the bit
  // unset is ordered before the deletion that counts it. While pushes may
  // run, only pushers write this line: completions count in `finished`, on
  // a line of its own, so an operator pushed round robin among many does not
  // move a line between the pushing core and a worker's on every push
  // (FreeOpr writes `magic` once, when the last counted push finished).
  alignas(64) std::atomic<std::uint64_t> pushed{0};
  // Rejects stale handles (relaxed: best effort; `pushed` is authoritative).
  std::atomic<std::uint32_t> magic{kDead};
  // Set by NewOperator before the handle is returned; read-only after.
  FnProperty prop = FnProperty::kNormal;
  const char* name = nullptr;
  const internal::ThreadedEngine* engine = nullptr;

  // The var list (set by NewOperator, read-only while pushes may run;
  // cleared by FreeOpr after `finished` reached kDeleteRequested, whose
  // acq_rel orders every push's last read before the clear): sorted by address,
  // no duplicates, each entry `Var* | 1` for a write; in this line up to
  // kInlineVars entries, else in var_heap_.
  static constexpr std::uint32_t kInlineVars = 2;
  std::uint32_t var_count() const { return var_count_; }
  Var* var(std::uint32_t i) const {
    return reinterpret_cast<Var*>(var_data()[i] & ~std::uintptr_t{1});
  }
  bool var_written(std::uint32_t i) const { return (var_data()[i] & 1u) != 0; }
  // Takes `n` entries in that form, already sorted and merged.
  void SetVars(const std::uintptr_t* entries, std::uint32_t n) {
    var_heap_.reset(n > kInlineVars ? new std::uintptr_t[n] : nullptr);
    std::copy(entries, entries + n, var_heap_ != nullptr ? var_heap_.get() : inline_vars_);
    var_count_ = n;
  }

 private:
  const std::uintptr_t* var_data() const {
    return var_count_ <= kInlineVars ? inline_vars_ : var_heap_.get();
  }
  std::uint32_t var_count_ = 0;
  std::uintptr_t inline_vars_[kInlineVars] = {};

 public:
  // --- cold: written when the operator is made and deleted ---
  alignas(64) Opr* pool_next = nullptr;  // owned by ObjectPool while free
  // The engine's list of live operators; guarded by its live_mu_.
  Opr* live_prev = nullptr;
  Opr* live_next = nullptr;

 private:
  std::unique_ptr<std::uintptr_t[]> var_heap_;  // the var list beyond kInlineVars

 public:
  // --- the workers' pair ---
  alignas(128)
      AsyncFn async_fn;  // set by NewOperator; read-only until FreeOpr clears it (as the var list)
  // Pushes finished, plus kDeleteRequested minus the pushes DeleteOperator
  // counted, added by DeleteOperator: the one update that takes it to
  // exactly kDeleteRequested (every counted push finished, after the
  // deletion) frees the Opr. It only grows, so exactly one update does.
  // acq_rel: the freeing thread must see every push's last use of the Opr.
  alignas(64) std::atomic<std::uint64_t> finished{0};

  // Drops the function (and what its closure captured) and the var list.
  // `name` is left alone: a Push racing with the operator's deletion (a
  // misuse that Push reports) reads it to name the operator in its error.
  void Clear() {
    async_fn = nullptr;
    var_heap_.reset();
    var_count_ = 0;
  }
};

static_assert(sizeof(Opr) == 256,
              "an Opr is two pairs of cache lines: the pushers' and the workers'");
static_assert(alignof(Var) >= 2, "Opr's var list keeps the write flag in bit 0 of Var*");

}  // namespace depengine

namespace depengine::internal {

// One push. Laid out in exactly 128 bytes and aligned to 128, so that it
// fills two cache lines (one pair for the adjacent-line prefetcher): a
// pending function costs that much memory, and the block crosses from the
// pusher's cache to a worker's on every push. Without the alignment, new[]
// placed the pool's blocks 8 bytes past a 16-byte boundary (its array
// cookie), and every block straddled three lines.
struct alignas(128) OprBlock {
  static constexpr std::uint32_t kMaxVars = kMaxVarsPerFunction;  // slot counts are 16-bit

  OprBlock() = default;
  OprBlock(const OprBlock&) = delete;
  OprBlock& operator=(const OprBlock&) = delete;
  ~OprBlock() {
    ResetFn();
    if (owns_slots()) delete[] slot_data_;
  }

  // --- set by the pusher before the block is published; read-only after ---
  Context ctx;
  int priority = 0;
  OprKind kind = OprKind::kUser;
  std::uint8_t pending_slot = 0;  // which WaitForAll counter counted it

 private:
  std::uint8_t prop_ = 0;  // a FnProperty, in one byte
  enum : std::uint8_t {
    kNoFn = 0,
    kSyncFn = 1,
    kAsyncFn = 2,
    kFnMask = 3,
    kHeapSlots = 4,
    kSharedSlots = 8,
  };
  // Bits 0-1: which function fn_ holds (kNoFn, kSyncFn, kAsyncFn). Bit 2
  // (kHeapSlots): slot_data_ is a kept array, not the inline slot. Bit 3
  // (kSharedSlots): that array is storage the block's pool gave it (see
  // AdoptSlotStorage), not the block's own allocation. In the first cache
  // line, so that a push of one var sets up its slot with stores only (see
  // ResizeSlots).
  std::uint8_t fn_state_ = kNoFn;
  std::uint8_t fn() const { return fn_state_ & kFnMask; }
  bool owns_slots() const { return (fn_state_ & (kHeapSlots | kSharedSlots)) == kHeapSlots; }
  void set_fn(std::uint8_t f) { fn_state_ = static_cast<std::uint8_t>((fn_state_ & ~kFnMask) | f); }

 public:
  Opr* prebuilt = nullptr;  // the operator pushed; nullptr for a one-shot push
  const char* name = nullptr;

  // Uses not yet granted. The thread that takes it to 0 dispatches the
  // block. acq_rel: the dispatcher must see every grant's effects.
  std::atomic<std::int32_t> wait{0};

  // Execution epoch, for engine-made callbacks: odd while a callback may
  // finish the block; CAS from the ticket handed out to ticket+1 claims the
  // finish, so a second call fails even after the block is reused (until the
  // same block has run 2^31 more times). Advanced at the start of a run by a
  // plain release store (between runs only stale callbacks touch it, and
  // their CAS fails); claimed by an acq_rel CAS, so that the winner sees the
  // block as that run set it up.
  std::atomic<std::uint32_t> ticket{0};

  union {
    // Intrusive FIFO link. While queued: written by the producer that links
    // the block in (through atomic_ref, release; see TaskQueue::LinkFifo) and
    // read by the consumer holding the queue's consumer lock (acquire).
    // Owned by the running thread in an inline trampoline. The queue's stub
    // link is also read relaxed, without the lock, by FifoEmptyHint (a
    // hint); links inside a chain not yet published are stored relaxed, and
    // LinkFifo's release store publishes them.
    OprBlock* queue_next = nullptr;
    OprBlock* pool_next;  // owned by ObjectPool while the block is free
  };

 private:
  FnStorage fn_;  // the function of a one-shot push (see fn_state_)

 public:
  // Set at push when this push is profiled; owned by the block until its
  // completion hands it to the profiler.
  ProfileRecord* profile = nullptr;

 private:
  VarSlot* slot_data_ = slot_inline_;  // slot_inline_ or a kept heap array
  VarSlot slot_inline_[1];

 public:
  // Holders of the block while it executes: the completion and, for an
  // async function, the function's own return (a callback may finish the
  // block while the function still runs). The last one recycles the block.
  // Stored relaxed by the executing thread before the ticket's release store
  // publishes the block to a callback. ReleaseExecution reads it acquire (a
  // 1 is final and skips the decrement), else decrements acq_rel, so the
  // last holder sees the other's uses before it recycles the block.
  std::atomic<std::uint8_t> finish_refs{0};

 private:
  std::uint16_t slot_size_ = 0;
  std::uint16_t slot_cap_ = 1;

 public:
  FnProperty prop() const { return static_cast<FnProperty>(prop_); }
  void set_prop(FnProperty p) { prop_ = static_cast<std::uint8_t>(p); }

  // --- the function ---
  void SetSync(SyncFn&& f) {
    ResetFn();
    new (&fn_.sync) SyncFn(std::move(f));
    set_fn(kSyncFn);
  }
  void SetAsync(AsyncFn&& f) {
    ResetFn();
    new (&fn_.async) AsyncFn(std::move(f));
    set_fn(kAsyncFn);
  }
  // Destroys the function and what its closure captured.
  void ResetFn() {
    if (fn() == kSyncFn) fn_.sync.~SyncFn();
    if (fn() == kAsyncFn) fn_.async.~AsyncFn();
    set_fn(kNoFn);
  }
  const SyncFn* sync_fn() const { return fn() == kSyncFn ? &fn_.sync : nullptr; }
  const AsyncFn* async_fn() const { return fn() == kAsyncFn ? &fn_.async : nullptr; }

  // --- the slots: one per var, sorted by var address ---
  // Makes room for n slots (n <= kMaxVars) and sets the count to n; a heap
  // array, once grown, is kept for the block's next uses.
  void ResizeSlots(std::uint32_t n) {
    if (n <= 1 && !heap_slots()) {
      // Stores only: the second cache line of a recycled block is usually
      // still in the worker's cache that finished it, and a load here would
      // stall the push on that transfer (later loads forward from these
      // stores instead).
      slot_data_ = slot_inline_;
      slot_size_ = static_cast<std::uint16_t>(n);
      return;
    }
    if (n > slot_cap_) {
      if (owns_slots()) delete[] slot_data_;
      slot_data_ = new VarSlot[n];
      slot_cap_ = static_cast<std::uint16_t>(n);
      fn_state_ = static_cast<std::uint8_t>((fn_state_ | kHeapSlots) & ~kSharedSlots);
    }
    slot_size_ = static_cast<std::uint16_t>(n);
  }
  // Gives a fresh block `cap` slots of storage that it does not own (its
  // pool's chunk does: the slots right after a multi-var block), so that
  // a multi-var block needs no allocation of its own.
  void AdoptSlotStorage(VarSlot* storage, std::uint16_t cap) {
    slot_data_ = storage;
    slot_cap_ = cap;
    fn_state_ |= kHeapSlots | kSharedSlots;
  }
  // Whether the block keeps a slot array rather than its inline slot (it is
  // a multi-var block).
  bool heap_slots() const { return (fn_state_ & kHeapSlots) != 0; }
  std::span<VarSlot> slots() { return {slot_data_, slot_size_}; }
  std::span<const VarSlot> slots() const { return {slot_data_, slot_size_}; }

  // Takes one grant; returns true when the block became ready.
  //
  // A count of 1 seen here is this grant's own: every other grant, those
  // the pusher took itself included, was applied already (each once; the
  // count never rises once the block is published), so nobody else updates
  // it again, and the read-modify-write, a locked instruction that waits for
  // every earlier store of this thread, is skipped: the common case of a
  // chain, whose every block waits on its one var. acquire, as the
  // fetch_sub's: pairs with the release of the update that left the 1 (or,
  // where the pusher stored it, with the var lock that published the slot).
  bool Grant() {
    if (wait.load(std::memory_order_acquire) == 1) return true;
    return wait.fetch_sub(1, std::memory_order_acq_rel) == 1;
  }
};

static_assert(sizeof(OprBlock) == 128 && alignof(OprBlock) == 128,
              "an OprBlock is two aligned cache lines: see the layout note");

}  // namespace depengine::internal
