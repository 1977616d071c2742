// Var: the dependency tracker's per-resource state. Each var keeps a FIFO of
// the functions waiting to use it and grants access in push order:
// any number of readers at once, or one writer alone.
//
// The var state machine (guarded by lock_), with `Q` the waiting queue:
//   Idle        running_reads_ == 0, !write_running_, Q empty
//   Reading(n)  running_reads_ == n > 0, !write_running_
//   Writing     write_running_ (running_reads_ == 0)
// A reader is granted at once from Idle/Reading when Q is empty; a writer
// only from Idle. Otherwise the request waits in Q. When the last reader
// finishes, a waiting writer at the head of Q is granted; when a writer
// finishes, the head writer, or else every reader up to the next writer, is
// granted. See docs/design.md.
#pragma once

#include <atomic>
#include <cstdint>

#include "common/mutex.h"
#include "depengine/engine.h"
#include "tracker/failure.h"

namespace depengine::internal {
struct OprBlock;
class ThreadedEngine;

// One use of one var by one pushed function; lives inside the function's
// OprBlock, and is linked into the var's queue while it waits.
struct VarSlot {
  Var* var = nullptr;
  VarSlot* next = nullptr;  // next waiting slot; guarded by var->lock

  VarSlot() = default;
  VarSlot(Var* v, OprBlock* owner, bool write)
      : var(v), owner_and_write_(reinterpret_cast<std::uintptr_t>(owner) | (write ? 1u : 0u)) {}
  // The function that uses the var.
  OprBlock* owner() const {
    return reinterpret_cast<OprBlock*>(owner_and_write_ & ~std::uintptr_t{1});
  }
  // Whether it writes the var (else it only reads it).
  bool write() const { return (owner_and_write_ & 1u) != 0; }

 private:
  std::uintptr_t owner_and_write_ = 0;  // blocks are 8-aligned: bit 0 is free
};

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
      OprBlock** bigger = new OprBlock*[cap * 2];
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

  // Hot fields first: one cache line holds what push and completion touch.

  // --- identity, checked on every use of a handle ---
  // Written when the var is made and freed; read without the lock to reject
  // stale handles early (relaxed: a best-effort check, the authoritative one
  // is `deleted` under `lock`).
  std::atomic<std::uint32_t> magic{kDead};
  internal::SpinLock lock;
  // --- guarded by lock ---
  bool deleted GUARDED_BY(lock) = false;                     // DeleteVariable was called
  bool write_running GUARDED_BY(lock) = false;               // a granted, unfinished write
  int running_reads GUARDED_BY(lock) = 0;                    // granted, unfinished reads
  internal::VarSlot* queue_head GUARDED_BY(lock) = nullptr;  // oldest waiting use
  internal::VarSlot* queue_tail GUARDED_BY(lock) = nullptr;  // newest waiting use
  const internal::ThreadedEngine* engine = nullptr;          // set at creation, read-only after

  // --- cold ---
  internal::FailurePtr failure GUARDED_BY(lock);  // set by a failed writer
  Var* pool_next = nullptr;                       // owned by ObjectPool while the var is free
  std::uint64_t profile_id = 0;                   // names the var in profiles; set at creation
  // The engine's list of live vars; guarded by the engine's live_mu_.
  Var* live_prev = nullptr;
  Var* live_next = nullptr;

  // Resets a pooled var for a new life in `owner`.
  void Init(const internal::ThreadedEngine* owner) NO_THREAD_SAFETY_ANALYSIS;

  // Queues `slot` behind earlier uses, or grants it at once. Returns true
  // when granted.
  bool Append(internal::VarSlot* slot) REQUIRES(lock);

  // True when no function uses or waits for the var.
  bool IdleLocked() const REQUIRES(lock) {
    return running_reads == 0 && !write_running && queue_head == nullptr;
  }

  // Finishes a granted read and collects the uses it grants.
  void CompleteRead(internal::GrantList* granted) EXCLUDES(lock);
  // Finishes a granted write; marks the var failed with `failure` when set.
  // Returns true when the var newly became failed.
  bool CompleteWrite(const internal::FailurePtr& failure, internal::GrantList* granted)
      EXCLUDES(lock);

 private:
  void GrantAfterWriteLocked(internal::GrantList* granted) REQUIRES(lock);
};

}  // namespace depengine
