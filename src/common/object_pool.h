// ObjectPool<T>: a free list of constructed T objects with a per-thread
// cache, so that the push and completion paths allocate nothing in steady
// state.
//
// Objects are constructed once, when their chunk is made, and are never
// destroyed: Free() returns them to the pool as they are, so containers
// inside T keep their capacity across uses. T needs a member `T* pool_next`,
// which Allocate sets to nullptr (a block's queue link shares its storage).
//
// Objects freed on one thread and allocated on another (ops are pushed on
// the main thread and finished on workers) move between threads in batches
// of kBatch through a global list, so no thread's cache grows without bound.
// Memory ordering: the global list is guarded by a mutex, which orders every
// write to an object before its reuse on another thread.
//
// The caches and the global list hold pointers in arrays, not lists linked
// through the objects: an allocation finds the object several allocations
// ahead without touching a cold line, and prefetches it (see Allocate).
//
// Layout, a policy type, may give each object room of its own right after
// it in the chunk (Layout::kStride bytes per object instead of sizeof(T):
// a block's slot array) and prepares each new object beyond its default
// construction (Layout::Init, called with the pool's mutex held). Allocate
// prefetches the whole stride, so that room costs no extra cold miss. A
// distinct Layout also makes a distinct pool of the same type (blocks with
// and without slot arrays).
#pragma once

#include <pthread.h>

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#include "common/prefetch.h"
#include "common/region.h"

namespace depengine::internal {

// The default Layout: sizeof(T) bytes per object, and a default-constructed
// object is ready.
struct PlainLayout {
  template <class T>
  static void Init(T* /*object*/) {}
};

template <class T, class Layout = PlainLayout>
class ObjectPool {
 public:
  static constexpr int kBatch = 128;
  // Bytes per object in a chunk; a multiple of alignof(T), so every object
  // of a chunk is aligned.
  static constexpr std::size_t kStride = [] {
    if constexpr (requires { Layout::kStride; }) {
      static_assert(Layout::kStride >= sizeof(T) && Layout::kStride % alignof(T) == 0);
      return std::size_t{Layout::kStride};
    } else {
      return sizeof(T);
    }
  }();

  static T* Allocate() {
    LocalCache& c = Local();
    if (c.size == 0) {
      if (c.overflow != nullptr) return c.TakeOverflow();
      c.Refill();
    }
    T* obj = c.items[--c.size];
    obj->pool_next = nullptr;
    // The objects next in line were most likely freed on another core:
    // start pulling the one kPrefetchAhead allocations away into this
    // core's cache now (the cache is an array, so finding it touches no
    // cold line), so that no Allocate stalls on its object. One ahead was
    // not enough: a push takes less than a transfer between cores.
    if (c.size >= kPrefetchAhead) Prefetch(c.items[c.size - kPrefetchAhead]);
    return obj;
  }

  // Makes sure that the calling thread's next n Allocate() calls are served
  // from its own cache, so that they cannot throw: a caller may then
  // allocate while it holds locks that an exception would leave held.
  static void Reserve(std::size_t n) {
    LocalCache& c = Local();
    if (c.size + c.overflow_count < n) [[unlikely]] {
      ReserveMore(c, n);
    }
  }

  static void Free(T* obj) {
    LocalCache& c = Local();
    if (c.size == LocalCache::kCapacity) c.SpillOneBatch();
    c.items[c.size++] = obj;
  }

 private:
  static constexpr std::size_t kPrefetchAhead = 8;

  struct LocalCache;
  [[gnu::noinline]] static void ReserveMore(LocalCache& c, std::size_t n) {
    while (c.size + c.overflow_count < n) {
      T* batch[kBatch];
      const int got = G().TakeBatch(batch);  // may throw; nothing changed yet
      c.AddBelow(batch, static_cast<std::size_t>(got));
    }
  }

  static void Prefetch(const T* obj) {
    for (std::size_t off = 0; off < kStride; off += 64) {
      PrefetchForWrite(reinterpret_cast<const char*>(obj) + off);
    }
  }

  struct Global {
    std::mutex mu;
    // Free objects handed back by threads' caches, guarded by mu: a stack
    // of pointers, so that moving a batch touches no object.
    std::vector<T*> free_objects;
    // Storage: objects are carved kBatch at a time out of large regions, so
    // that a pending function costs sizeof(T) and nothing more (an
    // allocation per chunk would add its header and alignment padding).
    std::vector<void*> regions;   // guarded by mu: all storage, never freed
    char* region_next = nullptr;  // guarded by mu: the unused rest of the newest region
    std::size_t region_left = 0;  // guarded by mu

    // Fills `out` with up to kBatch free objects (others freed, or a new
    // chunk) and returns how many.
    int TakeBatch(T** out) {
      std::lock_guard<std::mutex> lock(mu);
      if (free_objects.empty()) {
        NewChunk(out);
        return kBatch;
      }
      const std::size_t n = std::min<std::size_t>(kBatch, free_objects.size());
      const auto first = free_objects.end() - static_cast<std::ptrdiff_t>(n);
      std::copy(first, free_objects.end(), out);
      free_objects.erase(first, free_objects.end());
      return static_cast<int>(n);
    }

    void GiveBack(T* const* objects, std::size_t n) {
      std::lock_guard<std::mutex> lock(mu);
      free_objects.insert(free_objects.end(), objects, objects + n);
    }

    // Makes kBatch constructed objects, into `out`.
    void NewChunk(T** out) {
      constexpr std::size_t kChunkBytes = kStride * kBatch;
      // 4 MiB for 128-byte objects; whole huge pages.
      constexpr std::size_t kRegionBytes =
          (kChunkBytes * 256 + kRegionAlignment - 1) / kRegionAlignment * kRegionAlignment;
      if (region_left < kChunkBytes) {
        void* region = AllocateRegion(kRegionBytes);
        regions.push_back(region);
        region_next = static_cast<char*>(region);
        region_left = kRegionBytes;
      }
      char* const chunk = region_next;
      region_next += kChunkBytes;
      region_left -= kChunkBytes;
      // In reverse, so that the cache (a stack) hands them out in address
      // order.
      for (int i = 0; i < kBatch; ++i) {
        T* obj = reinterpret_cast<T*>(chunk + kStride * static_cast<std::size_t>(kBatch - 1 - i));
        Layout::Init(new (obj) T);
        out[i] = obj;
      }
    }
  };
  // Never destroyed: thread caches may hand objects back during static
  // destruction, and the storage stays reachable (not a leak).
  // Fork safety: the global mutex is held across fork() so that a child
  // never inherits it locked by a thread that does not exist there.
  static Global& G() {
    static Global* g = [] {
      auto* created = new Global;
      pthread_atfork([] { G().mu.lock(); }, [] { G().mu.unlock(); }, [] { G().mu.unlock(); });
      return created;
    }();
    return *g;
  }

  struct LocalCache {
    static constexpr std::size_t kCapacity = 2 * std::size_t{kBatch};
    // This thread's free objects, a stack: the last freed is handed out
    // first (still in this core's cache). Owned by this thread. Plain
    // members, no heap storage: the cache stays usable after its
    // destructor ran (a thread-local or static destructor may push later
    // on the same thread; what it takes then is still the pool's storage).
    T* items[kCapacity];
    std::size_t size = 0;
    // What Reserve takes beyond the array's room (a push with hundreds of
    // reads), linked through pool_next and handed out when the array is
    // empty.
    T* overflow = nullptr;
    std::size_t overflow_count = 0;

    void Refill() {
      T* batch[kBatch];
      const int got = G().TakeBatch(batch);
      std::copy(batch, batch + got, items);
      size = static_cast<std::size_t>(got);
      for (std::size_t i = 1; i <= size && i <= kPrefetchAhead; ++i) Prefetch(items[size - i]);
    }

    // Adds objects that are handed out after those the cache holds.
    void AddBelow(T* const* objects, std::size_t n) {
      if (size + n <= kCapacity) {
        std::copy_backward(items, items + size, items + size + n);
        std::copy(objects, objects + n, items);
        size += n;
        return;
      }
      for (std::size_t i = 0; i < n; ++i) {
        objects[i]->pool_next = overflow;
        overflow = objects[i];
      }
      overflow_count += n;
    }

    T* TakeOverflow() {
      T* obj = overflow;
      overflow = obj->pool_next;
      --overflow_count;
      obj->pool_next = nullptr;
      return obj;
    }

    // Hands the oldest kBatch objects (the coldest) to the global list.
    void SpillOneBatch() {
      G().GiveBack(items, kBatch);
      std::copy(items + kBatch, items + size, items);
      size -= kBatch;
    }

    ~LocalCache() {
      // A thread that ends hands its cache back.
      G().GiveBack(items, size);
      size = 0;
      while (overflow != nullptr) {
        T* obj = TakeOverflow();
        G().GiveBack(&obj, 1);
      }
    }
  };

  static LocalCache& Local() {
    thread_local LocalCache cache;
    return cache;
  }
};

}  // namespace depengine::internal
