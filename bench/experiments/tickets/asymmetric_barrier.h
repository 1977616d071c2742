// An asymmetric memory barrier: a cheap side (LightBarrier) for the thread
// that passes it often, and an expensive side (HeavyBarrier) for the thread
// that passes it rarely, which together order a store before a later load
// as two full fences would (the store-buffering pattern of Dekker's
// handshake: each side stores its flag, passes its barrier, loads the other
// side's flag; at least one of them sees the other's store).
//
// Why: on x86 a full fence (mfence or a locked instruction) waits for every
// store the thread has issued to reach the cache. A pusher whose stores go
// to lines another core holds (a ring's cells, read by the worker) then
// waits for a cross-core round trip on every push. With this barrier the
// pusher pays a compiler barrier, and the worker pays a membarrier system
// call when it is about to sleep, which is rare and already slow.
//
// How: with Linux's membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED),
// HeavyBarrier makes every running thread of the process execute a full
// barrier (by an interrupt) before it returns; a thread that is not running
// passed one when it was switched out. So any load the light side makes
// after its store either comes after that barrier (and sees the heavy side's
// earlier store) or the light side's store came before it (and the heavy
// side's later load sees it). LightBarrier only has to keep the compiler
// from moving the load above the store. Where membarrier is not available
// (an old kernel, a seccomp filter), both sides use a full fence
// (SeqCstFence, which ThreadSanitizer understands).
//
// The choice is made once per process, on the first use of either side;
// both sides read the same cached result, so they always agree.
#pragma once

#include <atomic>

#include "common/seq_cst_fence.h"

namespace depengine::internal {

// Registers the process for membarrier(PRIVATE_EXPEDITED); false where it
// is not available. Called once, by AsymmetricBarrierUsesMembarrier.
bool RegisterMembarrier();

// Whether HeavyBarrier is a membarrier (registers this process for it on
// the first call). Thread-safe. Inline, so that LightBarrier costs a load
// and a branch on the push path, not a call.
inline bool AsymmetricBarrierUsesMembarrier() {
  // A function-local static of an inline function: one object in the whole
  // program, initialized once, so the light and heavy sides never disagree.
  static const bool uses_membarrier = RegisterMembarrier();
  return uses_membarrier;
}

// The frequent side: a compiler barrier when HeavyBarrier is a membarrier,
// else a full fence.
inline void LightBarrier() {
  if (AsymmetricBarrierUsesMembarrier()) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    SeqCstFence();
  }
}

// The rare side: every thread of the process passes a full barrier (or, as
// a fallback, this thread passes a full fence). Costs a system call and an
// interrupt per CPU running a thread of the process: microseconds.
void HeavyBarrier();

}  // namespace depengine::internal
