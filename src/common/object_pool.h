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
// The global list is a stack, so the batches handed back last (still warm)
// go out first. When a burst ends (a million functions finished) far more
// objects come back than circulate, in the order their functions finished;
// those nobody takes again soon move to an AddressOrderedStock, which hands
// them out lowest address first once the stack is empty, so that the next
// deep queue lies in memory in the order it is walked.
//
// Layout, a policy type, may give each object room of its own right after
// it in the chunk (Layout::kStride bytes per object instead of sizeof(T):
// a block's slot array), prepares each new object beyond its default
// construction (Layout::Init, called with the pool's mutex held), and may
// keep bursts on the stack (Layout::kOrderBursts = false). Allocate
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

#include "common/address_ordered_stock.h"
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
  // The most free objects the global stack keeps before those nobody took
  // lately go to the address-ordered stock: 64 batches, what pushers and
  // workers pass around in steady state, with room to spare.
  static constexpr std::size_t kRecentMax = 64 * std::size_t{kBatch};
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

  static constexpr std::size_t kChunkBytes = kStride * kBatch;
  // 4 MiB for 128-byte objects; whole huge pages.
  static constexpr std::size_t kRegionBytes =
      (kChunkBytes * 256 + kRegionAlignment - 1) / kRegionAlignment * kRegionAlignment;
  // Whether a burst's objects go to the address-ordered stock at all
  // (Layout::kOrderBursts, true unless a Layout says otherwise).
  static constexpr bool kOrderBursts = [] {
    if constexpr (requires { Layout::kOrderBursts; }) {
      return bool{Layout::kOrderBursts};
    } else {
      return true;
    }
  }();
  // Objects that stay on the stack when the rest goes to the stock.
  static constexpr std::size_t kKeep = kRecentMax / 2;
  // Objects moved to the stock per hold of its mutex.
  static constexpr std::size_t kPiece = 4 * std::size_t{kBatch};

  // A stack of pointers whose oldest entries can also be taken, from the
  // bottom, in amortized constant time per entry.
  class FreeStack {
   public:
    std::size_t size() const { return items_.size() - bottom_; }
    bool empty() const { return size() == 0; }
    void Push(T* const* objects, std::size_t n) {
      items_.insert(items_.end(), objects, objects + n);
    }
    // The newest n (n <= size()), the newest last.
    void PopTop(T** out, std::size_t n) {
      std::copy(items_.end() - static_cast<std::ptrdiff_t>(n), items_.end(), out);
      items_.resize(items_.size() - n);
      if (items_.size() == bottom_) {
        items_.clear();
        bottom_ = 0;
      }
    }
    // The oldest n (n <= size()), the oldest first.
    void PopBottom(T** out, std::size_t n) {
      const auto first = items_.begin() + static_cast<std::ptrdiff_t>(bottom_);
      std::copy(first, first + static_cast<std::ptrdiff_t>(n), out);
      bottom_ += n;
      // Compacts once the gap is as large as what is left, so each entry
      // is moved at most once per entry taken from the bottom.
      if (bottom_ >= size()) {
        items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(bottom_));
        bottom_ = 0;
      }
    }

   private:
    std::vector<T*> items_;
    std::size_t bottom_ = 0;  // items_[0, bottom_) were taken from the bottom
  };

  struct Global {
    std::mutex mu;
    // Free objects handed back by threads' caches, guarded by mu: a stack
    // of pointers, so that moving a batch touches no object. Handed out
    // first: the last batches back are still warm in some core's cache.
    FreeStack free_objects;
    // The fewest objects free_objects held since GiveBack last moved
    // objects to the stock: those below it nobody took in that time.
    // Guarded by mu.
    std::size_t low_water = 0;
    // Free objects moved off the stack after a burst (see GiveBack), handed
    // out when the stack is empty, lowest address first. Guarded by
    // stock_mu, which is taken after mu where a thread holds both
    // (TakeBatch, NewChunk).
    std::mutex stock_mu;
    AddressOrderedStock<kStride, kRegionBytes> stock;
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
      if (!free_objects.empty()) {
        const std::size_t n = std::min<std::size_t>(kBatch, free_objects.size());
        free_objects.PopTop(out, n);
        low_water = std::min(low_water, free_objects.size());
        return static_cast<int>(n);
      }
      low_water = 0;
      std::lock_guard<std::mutex> stock_lock(stock_mu);
      if (stock.size() > 0) {
        // Ascending from the stock, stored reversed: a cache hands out the
        // end of its array first, so this thread allocates in address order.
        void* taken[kBatch];
        const std::size_t n = stock.Take(taken, kBatch);
        for (std::size_t i = 0; i < n; ++i) out[n - 1 - i] = static_cast<T*>(taken[i]);
        return static_cast<int>(n);
      }
      NewChunk(out);
      return kBatch;
    }

    void GiveBack(T* const* objects, std::size_t n) {
      std::unique_lock<std::mutex> lock(mu);
      free_objects.Push(objects, n);
      if (!kOrderBursts || free_objects.size() <= kRecentMax) return;
      // The stack holds more than circulates. What lies below its lowest
      // point since the last move (low_water) nobody has taken since: a
      // burst ended. Those objects, but kKeep of them, go to the stock, a
      // piece at a time under the stock's own mutex, so that other
      // threads' batches do not wait for the sorting. The objects that
      // circulate stay on the stack, warm.
      std::size_t idle = low_water > kKeep ? low_water - kKeep : 0;
      while (idle > 0) {
        T* piece[kPiece];
        const std::size_t m = std::min(kPiece, idle);
        free_objects.PopBottom(piece, m);
        idle -= m;
        low_water = low_water > m ? low_water - m : 0;
        lock.unlock();
        {
          std::lock_guard<std::mutex> stock_lock(stock_mu);
          for (std::size_t i = 0; i < m; ++i) stock.Put(piece[i]);
        }
        lock.lock();
        idle = std::min(idle, low_water > kKeep ? low_water - kKeep : 0);
      }
      low_water = free_objects.size();
    }

    // Makes kBatch constructed objects, into `out`. Called with mu and
    // stock_mu held.
    void NewChunk(T** out) {
      if (region_left < kChunkBytes) {
        // Room first, so that a failure (std::bad_alloc) changes nothing:
        // a region the stock did not know would break its lookups.
        regions.reserve(regions.size() + 1);
        stock.ReserveRegion();
        void* region = AllocateRegion(kRegionBytes);
        regions.push_back(region);
        stock.AddRegion(region);
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
  // Fork safety: the global mutexes are held across fork() so that a child
  // never inherits one locked by a thread that does not exist there.
  static Global& G() {
    static Global* g = [] {
      auto* created = new Global;
      pthread_atfork(
          [] {
            G().mu.lock();
            G().stock_mu.lock();
          },
          [] {
            G().stock_mu.unlock();
            G().mu.unlock();
          },
          [] {
            G().stock_mu.unlock();
            G().mu.unlock();
          });
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
