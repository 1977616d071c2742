// Opr and OprBlock: a function as the engine holds it.
//
// Opr is what runs: the function, its property and name, and (for an
// operator built with NewOperator) its sorted var list. OprBlock is one push
// of an Opr: its context, priority, and one VarSlot per var it uses. A
// one-shot push (PushAsync/PushSync) uses the Opr embedded in its block.
// Both come from object pools and keep their containers' capacity across
// uses, so a push allocates nothing in steady state.
#pragma once

#include <atomic>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

#include "depengine/engine.h"
#include "tracker/var.h"

namespace depengine::internal {

struct ProfileRecord;

// What an Opr is for; internal kinds run even when their vars failed.
enum class OprKind : std::uint8_t {
  kUser,       // a user function
  kDeleteVar,  // DeleteVariable: runs delete_fn, then frees the var
  kWaitVar,    // WaitForVar: wakes the waiting thread
};

// A slot array that keeps its capacity when the block is recycled.
class SlotArray {
 public:
  static constexpr std::uint32_t kInline = 1;
  SlotArray() = default;
  SlotArray(const SlotArray&) = delete;
  SlotArray& operator=(const SlotArray&) = delete;
  ~SlotArray() {
    if (data_ != inline_) delete[] data_;
  }
  // Makes room for n slots and sets the size to n (contents unspecified).
  void Resize(std::uint32_t n) {
    if (n > cap_) {
      if (data_ != inline_) delete[] data_;
      data_ = new VarSlot[n];
      cap_ = n;
    }
    size_ = n;
  }
  std::uint32_t size() const { return size_; }
  VarSlot* begin() { return data_; }
  VarSlot* end() { return data_ + size_; }
  VarSlot& operator[](std::uint32_t i) { return data_[i]; }

 private:
  VarSlot inline_[kInline];
  VarSlot* data_ = inline_;
  std::uint32_t size_ = 0;
  std::uint32_t cap_ = kInline;
};

}  // namespace depengine::internal

namespace depengine::internal {

// The function of a one-shot push: a SyncFn or an AsyncFn in one slot of
// storage (a block stays small: it crosses from the pusher's cache to a
// worker's on every push).
class FnStorage {
 public:
  FnStorage() {}
  FnStorage(const FnStorage&) = delete;
  FnStorage& operator=(const FnStorage&) = delete;
  ~FnStorage() { Reset(); }

  void SetSync(SyncFn&& f) {
    Reset();
    new (&u_.sync) SyncFn(std::move(f));
    state_ = kSync;
  }
  void SetAsync(AsyncFn&& f) {
    Reset();
    new (&u_.async) AsyncFn(std::move(f));
    state_ = kAsync;
  }
  // Destroys the function and what its closure captured.
  void Reset() {
    if (state_ == kSync) u_.sync.~SyncFn();
    if (state_ == kAsync) u_.async.~AsyncFn();
    state_ = kEmpty;
  }
  const SyncFn* sync() const { return state_ == kSync ? &u_.sync : nullptr; }
  const AsyncFn* async() const { return state_ == kAsync ? &u_.async : nullptr; }

 private:
  union U {
    U() {}
    ~U() {}
    SyncFn sync;
    AsyncFn async;
  } u_;
  enum : std::uint8_t { kEmpty, kSync, kAsync } state_ = kEmpty;
};

}  // namespace depengine::internal

namespace depengine {

// A prebuilt operator (NewOperator): pushed many times, deleted once.
class Opr {
 public:
  static constexpr std::uint32_t kLive = 0x4f50524cu;  // "OPRL"
  static constexpr std::uint32_t kDead = 0xdeadbeefu;
  // Bit of `pushes` that records DeleteOperator; the rest counts pushes in
  // flight.
  static constexpr std::uint32_t kDeleteRequested = 1u << 31;

  Opr* pool_next = nullptr;  // owned by ObjectPool while free

  // --- set by NewOperator before the handle is returned; read-only after ---
  AsyncFn async_fn;
  FnProperty prop = FnProperty::kNormal;
  const char* name = nullptr;
  const internal::ThreadedEngine* engine = nullptr;
  // Sorted by address, no duplicates, with their write flags.
  std::vector<std::pair<Var*, bool>> vars;
  // Rejects stale handles (relaxed: best effort; `pushes` is authoritative).
  std::atomic<std::uint32_t> magic{kDead};

  // Pushes in flight, plus kDeleteRequested. Whoever moves it to exactly
  // kDeleteRequested (no pushes left) frees the Opr. acq_rel: the freeing
  // thread must see every push's last use of the Opr.
  std::atomic<std::uint32_t> pushes{0};

  // The engine's list of live operators; guarded by its live_mu_.
  Opr* live_prev = nullptr;
  Opr* live_next = nullptr;

  void Clear() {
    async_fn = nullptr;
    vars.clear();
    name = nullptr;
  }
};

}  // namespace depengine

namespace depengine::internal {

struct OprBlock {
  // --- set by the pusher before the block is published; read-only after ---
  Context ctx;
  int priority = 0;
  FnProperty prop = FnProperty::kNormal;
  OprKind kind = OprKind::kUser;
  bool profiling = false;
  std::uint8_t pending_slot = 0;  // which WaitForAll counter counted it
  Opr* prebuilt = nullptr;        // the operator pushed; nullptr for a one-shot push
  const char* name = nullptr;

  // Uses not yet granted. The thread that takes it to 0 dispatches the
  // block. acq_rel: the dispatcher must see every grant's effects.
  std::atomic<int> wait{0};
  // Holders of the block while it executes: the completion and, for an
  // async function, the function's own return (a callback may finish the
  // block while the function still runs). The last one recycles the block.
  std::atomic<int> finish_refs{0};

  // Intrusive FIFO link; guarded by the TaskQueue lock while queued, owned
  // by the running thread in an inline trampoline.
  OprBlock* queue_next = nullptr;

  FnStorage fn;  // the function of a one-shot push

  // Execution epoch, for engine-made callbacks: odd while a callback may
  // finish the block; CAS from the ticket handed out to ticket+1 claims the
  // finish, so a second call fails even after the block is reused.
  std::atomic<std::uint64_t> ticket{0};

  OprBlock* pool_next = nullptr;  // owned by ObjectPool while free

  // Set at push when this push is profiled; owned by the block until its
  // completion hands it to the profiler.
  ProfileRecord* profile = nullptr;

  SlotArray slots;  // sorted by var address, one per var

  // Takes one grant; returns true when the block became ready.
  bool Grant() { return wait.fetch_sub(1, std::memory_order_acq_rel) == 1; }
  const char* DisplayName() const { return name != nullptr ? name : "<unnamed>"; }
};

}  // namespace depengine::internal
