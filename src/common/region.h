// Large, never-freed regions for the object pools, backed by huge pages
// where the system offers them.
//
// A workload that pushes far ahead of its workers (W4 with work, a long
// chain) keeps hundreds of thousands of blocks pending, tens of MiB that the
// workers then walk in an order unrelated to their addresses. With 4 KiB
// pages nearly every cold block costs a TLB miss on top of its cache miss;
// with 2 MiB pages the pools' working set fits in the TLB.
#pragma once

#include <cstddef>

namespace depengine::internal {

// The size regions should be a multiple of: a huge page.
inline constexpr std::size_t kRegionAlignment = std::size_t{2} << 20;

// Returns `bytes` (a multiple of kRegionAlignment) of uninitialized memory,
// aligned to kRegionAlignment, asking the kernel to back it with
// transparent huge pages (a hint; without them it is ordinary memory).
// The memory comes from operator new, so leak checkers see what it holds.
// Never freed: callers keep it for the life of the process.
void* AllocateRegion(std::size_t bytes);

}  // namespace depengine::internal
