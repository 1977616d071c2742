// ObjectPool<T>: a free list of constructed T objects with a per-thread
// cache, so that the push and completion paths allocate nothing in steady
// state.
//
// Objects are constructed once, when their chunk is made, and are never
// destroyed: Free() returns them to the pool as they are, so containers
// inside T keep their capacity across uses. T needs a member `T* pool_next`.
//
// Objects freed on one thread and allocated on another (ops are pushed on
// the main thread and finished on workers) move between threads in batches
// of kBatch through a global list, so no thread's cache grows without bound.
// Memory ordering: the global list is guarded by a mutex, which orders every
// write to an object before its reuse on another thread.
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

#include <cstddef>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

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
    if (c.head == nullptr) c.Refill();
    T* obj = c.head;
    c.head = obj->pool_next;
    --c.count;
    obj->pool_next = nullptr;
    // The next object was most likely freed on another core: start pulling
    // it into this core's cache now, so the next Allocate does not stall.
    if (c.head != nullptr) {
      for (std::size_t off = 0; off < kStride; off += 64) {
        __builtin_prefetch(reinterpret_cast<const char*>(c.head) + off, 1);
      }
    }
    return obj;
  }

  // Makes sure that the calling thread's next n Allocate() calls are served
  // from its own cache, so that they cannot throw: a caller may then
  // allocate while it holds locks that an exception would leave held.
  static void Reserve(std::size_t n) {
    LocalCache& c = Local();
    while (static_cast<std::size_t>(c.count) < n) {
      const Batch batch = G().TakeBatch();  // may throw; nothing changed yet
      batch.tail->pool_next = c.head;
      c.head = batch.head;
      c.count += batch.size;
    }
  }

  static void Free(T* obj) {
    LocalCache& c = Local();
    obj->pool_next = c.head;
    c.head = obj;
    if (++c.count >= 2 * kBatch) c.SpillOneBatch();
  }

 private:
  // A free list, with its last object so that lists join in O(1).
  struct Batch {
    T* head;
    T* tail;
    int size;
  };

  static T* LastOfChunk(T* chunk) {
    return reinterpret_cast<T*>(reinterpret_cast<char*>(chunk) + kStride * (kBatch - 1));
  }

  struct Global {
    std::mutex mu;
    std::vector<Batch> batches;  // guarded by mu: free lists
    // Storage: objects are carved kBatch at a time out of large regions, so
    // that a pending function costs sizeof(T) and nothing more (an
    // allocation per chunk would add its header and alignment padding).
    std::vector<void*> regions;   // guarded by mu: all storage, never freed
    char* region_next = nullptr;  // guarded by mu: the unused rest of the newest region
    std::size_t region_left = 0;  // guarded by mu

    // A free list for a thread's cache: a batch others freed, or a new
    // chunk.
    Batch TakeBatch() {
      std::lock_guard<std::mutex> lock(mu);
      if (!batches.empty()) {
        const Batch batch = batches.back();
        batches.pop_back();
        return batch;
      }
      T* const chunk = NewChunk();
      return {chunk, LastOfChunk(chunk), kBatch};
    }

    // Makes kBatch constructed objects, linked through pool_next.
    T* NewChunk() {
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
      auto object = [chunk](int i) {
        return reinterpret_cast<T*>(chunk + kStride * static_cast<std::size_t>(i));
      };
      for (int i = 0; i < kBatch; ++i) {
        Layout::Init(new (object(i)) T);
        object(i)->pool_next = i + 1 < kBatch ? object(i + 1) : nullptr;
      }
      return object(0);
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
    T* head = nullptr;  // owned by this thread
    int count = 0;

    void Refill() {
      const Batch batch = G().TakeBatch();
      head = batch.head;
      count = batch.size;
    }

    void SpillOneBatch() {
      T* batch = head;
      T* last = head;
      for (int i = 1; i < kBatch; ++i) last = last->pool_next;
      head = last->pool_next;
      last->pool_next = nullptr;
      count -= kBatch;
      Global& g = G();
      std::lock_guard<std::mutex> lock(g.mu);
      g.batches.push_back({batch, last, kBatch});
    }

    ~LocalCache() {
      // A thread that ends hands its cache back, in full batches and a
      // final partial one (Refill accepts any non-empty list).
      while (count >= kBatch) SpillOneBatch();
      if (head == nullptr) return;
      T* last = head;
      while (last->pool_next != nullptr) last = last->pool_next;
      Global& g = G();
      std::lock_guard<std::mutex> lock(g.mu);
      g.batches.push_back({head, last, count});
      head = nullptr;
      count = 0;
    }
  };

  static LocalCache& Local() {
    thread_local LocalCache cache;
    return cache;
  }
};

}  // namespace depengine::internal
