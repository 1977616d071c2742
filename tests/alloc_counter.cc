// Replacement global operator new/delete that count allocations (see
// alloc_counter.h). Kept in its own file so that no call site inlines the
// replacement and pairs malloc/free with new/delete in the compiler's view.
#include "alloc_counter.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<bool> g_counting{false};
std::atomic<long> g_allocations{0};
std::atomic<long> g_bytes{0};
}  // namespace

#if DEPENGINE_COUNT_ALLOCATIONS
void* operator new(std::size_t size) {
  if (g_counting.load(std::memory_order_relaxed)) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    g_bytes.fetch_add(static_cast<long>(size), std::memory_order_relaxed);
  }
  if (size == 0) size = 1;
  if (void* p = std::malloc(size)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return ::operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#endif

namespace depengine::test {

bool AllocationCountingAvailable() { return DEPENGINE_COUNT_ALLOCATIONS != 0; }

void StartCountingAllocations() {
  g_allocations.store(0);
  g_bytes.store(0);
  g_counting.store(true);
}

long StopCountingAllocations() {
  g_counting.store(false);
  return g_allocations.load();
}

long CountedAllocationBytes() { return g_bytes.load(); }

}  // namespace depengine::test
