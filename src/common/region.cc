#include "common/region.h"

#include <sys/mman.h>

#include <new>

namespace depengine::internal {

void* AllocateRegion(std::size_t bytes) {
  void* region = ::operator new(bytes, std::align_val_t{kRegionAlignment});
#ifdef MADV_HUGEPAGE
  // Before the first touch, so that the first fault already maps a huge
  // page. Where transparent huge pages are off or not built in, the call
  // is ignored or fails; either way the memory is ordinary pages.
  madvise(region, bytes, MADV_HUGEPAGE);
#endif
  return region;
}

}  // namespace depengine::internal
