#include "common/region.h"

#include <sys/mman.h>

#include <new>

namespace depengine::internal {

void* AllocateRegion(std::size_t bytes) {
  void* region = ::operator new(bytes, std::align_val_t{kRegionAlignment});
#ifdef MADV_HUGEPAGE
  // Before the first touch, so that the first fault already maps a huge
  // page. A kernel without transparent huge pages (or with them off) fails
  // the call, which changes nothing.
  madvise(region, bytes, MADV_HUGEPAGE);
#endif
  return region;
}

}  // namespace depengine::internal
