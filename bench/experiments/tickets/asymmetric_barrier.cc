// The membarrier side of the asymmetric barrier; see asymmetric_barrier.h.
#include "tickets/asymmetric_barrier.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace depengine::internal {

namespace {

#if defined(__linux__)
long Membarrier(int cmd) { return syscall(SYS_membarrier, cmd, 0, 0); }
#endif

}  // namespace

bool RegisterMembarrier() {
#if defined(__linux__)
  const long supported = Membarrier(MEMBARRIER_CMD_QUERY);
  if (supported < 0 || (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
  return Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
#else
  return false;
#endif
}

void HeavyBarrier() {
#if defined(__linux__)
  if (AsymmetricBarrierUsesMembarrier()) {
    if (Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;
    // A child made by fork() may start unregistered (the registration
    // belongs to the parent's address space): register it, then retry.
    // Light sides have been compiler barriers since the first use, so a
    // full fence here would not do.
    if (errno == EPERM && Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0 &&
        Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) {
      return;
    }
    std::fprintf(stderr, "depengine: membarrier(PRIVATE_EXPEDITED) failed (errno %d)\n", errno);
    std::abort();
  }
#endif
  SeqCstFence();
}

}  // namespace depengine::internal
