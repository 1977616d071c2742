// PrefetchForWrite: starts fetching a cache line that this thread is about to
// write.
//
// On x86, __builtin_prefetch(p, 1) compiles to PREFETCHT0, a read prefetch,
// unless the whole build targets PREFETCHW (-mprfchw). The line then arrives
// shared, and the first store still waits for the other core's copy to be
// invalidated: a second transfer for every line the engine prefetches to
// write (a recycled block, a var's lock, a successor's `wait`). PREFETCHW
// fetches the line exclusive. It is used where the CPU has it (CPUID
// PRFCHW: AMD since long, Intel since Broadwell), found once at startup; an
// older CPU gets the read prefetch. Measured on W2 (per-device engine, 2
// workers, interleaved rounds): 0.91-0.97 of the time before, per-round
// median (docs/design.md, "Cache lines and prefetching").
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace depengine::internal {

#if defined(__x86_64__) || defined(__i386__)
inline bool CpuHasPrefetchW() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0x80000001u, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (ecx & (1u << 8)) != 0;  // PRFCHW (AMD's 3DNowPrefetch)
}
// Set during static initialization; a prefetch that runs before (another
// translation unit's static initializer) sees false and reads instead.
inline const bool kCpuHasPrefetchW = CpuHasPrefetchW();
#endif

// A hint: never faults, whatever `p` points to (a stale successor, a line
// already freed), so callers need not check it.
inline void PrefetchForWrite(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  if (kCpuHasPrefetchW) {
    // The address as a register operand, not a memory operand: the compiler
    // must not take the asm as a dereference of `p`.
    asm volatile("prefetchw (%0)" : : "r"(p));
    return;
  }
#endif
  __builtin_prefetch(p, 1);
}

}  // namespace depengine::internal
