// SeqCstFence: std::atomic_thread_fence(seq_cst), in a form ThreadSanitizer
// understands. TSan does not model fences (GCC 12 warns about them with
// -Wtsan, an error under -Werror), so under TSan the fence becomes a seq_cst
// read-modify-write of one shared atomic: the RMWs of two threads are
// ordered, and the later one acquires what the earlier one released, which
// gives the same store-then-load (Dekker) guarantee as a pair of fences.
#pragma once

#include <atomic>

#include "common/sanitizers.h"

namespace depengine::internal {

inline void SeqCstFence() {
#if DEPENGINE_TSAN
  static std::atomic<unsigned> fence_line{0};
  fence_line.fetch_add(1, std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

}  // namespace depengine::internal
