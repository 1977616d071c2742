// ObjectPool and its storage (AllocateRegion), on their own: alignment, reuse,
// and objects moving between threads in batches.
#include "common/object_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "common/region.h"

namespace depengine::internal {
namespace {

// Shaped like the engine's blocks: 128 bytes, aligned to 128.
struct alignas(128) Item {
  Item* pool_next = nullptr;
  int constructed = 42;    // set once, when the pool makes the object
  char payload[116] = {};  // payload[0]: an in-use flag in the cross-thread test
};
static_assert(sizeof(Item) == 128);

using ItemPool = ObjectPool<Item>;

bool Aligned(const void* p, std::size_t to) {
  return reinterpret_cast<std::uintptr_t>(p) % to == 0;
}

TEST(RegionTest, RegionsAreWholeHugePagesAlignedAndDisjoint) {
  constexpr std::size_t kBytes = 2 * kRegionAlignment;
  auto* a = static_cast<char*>(AllocateRegion(kBytes));
  auto* b = static_cast<char*>(AllocateRegion(kBytes));
  EXPECT_TRUE(Aligned(a, kRegionAlignment));
  EXPECT_TRUE(Aligned(b, kRegionAlignment));
  EXPECT_TRUE(a + kBytes <= b || b + kBytes <= a) << "regions overlap";
  // Every byte is usable (a sanitizer build also checks the bounds).
  std::memset(a, 0xab, kBytes);
  std::memset(b, 0xcd, kBytes);
  EXPECT_EQ(static_cast<unsigned char>(a[kBytes - 1]), 0xab);
  EXPECT_EQ(static_cast<unsigned char>(b[0]), 0xcd);
  // Never freed by design (the pools keep their storage for the process):
  // kept reachable, as the pools keep theirs, so leak checkers stay quiet.
  static auto* kept = new std::vector<void*>;
  kept->push_back(a);
  kept->push_back(b);
}

TEST(ObjectPoolTest, ObjectsAreAlignedDistinctAndConstructed) {
  std::vector<Item*> items;
  std::set<Item*> seen;
  for (int i = 0; i < 3 * ItemPool::kBatch + 5; ++i) {  // several chunks
    Item* it = ItemPool::Allocate();
    ASSERT_TRUE(Aligned(it, alignof(Item)));
    ASSERT_TRUE(seen.insert(it).second) << "object handed out twice";
    EXPECT_EQ(it->constructed, 42);
    EXPECT_EQ(it->pool_next, nullptr);
    items.push_back(it);
  }
  for (Item* it : items) ItemPool::Free(it);
}

TEST(ObjectPoolTest, AThreadReusesWhatItFreedLast) {
  Item* a = ItemPool::Allocate();
  a->constructed = 7;  // objects come back as they were freed
  ItemPool::Free(a);
  Item* b = ItemPool::Allocate();
  EXPECT_EQ(a, b);
  EXPECT_EQ(b->constructed, 7);
  b->constructed = 42;
  ItemPool::Free(b);
}

TEST(ObjectPoolTest, ObjectsFreedOnAnotherThreadComeBackInBatches) {
  // The engine's pattern: one thread allocates (the pusher), others free
  // (the workers). What the freeing thread's cache spills, and what it hands
  // back when it exits, the allocating thread gets again.
  constexpr int kCount = 4 * ItemPool::kBatch;
  std::vector<Item*> items;
  for (int i = 0; i < kCount; ++i) items.push_back(ItemPool::Allocate());
  const std::set<Item*> first(items.begin(), items.end());
  std::thread freer([&] {
    for (Item* it : items) ItemPool::Free(it);
  });
  freer.join();
  // Allocated on a fresh thread, whose cache starts empty: this thread's
  // cache may hold objects of earlier tests (--gtest_repeat), which it
  // would hand out first. The freer's batches are the newest in the global
  // list, so they are the ones taken.
  int reused = 0;
  std::thread allocator([&] {
    std::vector<Item*> again;
    for (int i = 0; i < kCount; ++i) {
      Item* it = ItemPool::Allocate();
      reused += first.count(it) != 0 ? 1 : 0;
      again.push_back(it);
    }
    for (Item* it : again) ItemPool::Free(it);
  });
  allocator.join();
  EXPECT_EQ(reused, kCount) << "objects freed on the other thread were not reused";
}

TEST(ObjectPoolTest, ReserveKeepsWhatTheCacheHeldAndCoversTheCount) {
  // Reserve(n) tops the thread's cache up to n objects; what the cache held
  // before stays in it (nothing is dropped), and n allocations then follow.
  std::vector<Item*> kept;
  for (int i = 0; i < 5; ++i) kept.push_back(ItemPool::Allocate());
  for (Item* it : kept) ItemPool::Free(it);
  constexpr int kReserve = 2 * ItemPool::kBatch + 7;  // more than one batch
  ItemPool::Reserve(kReserve);
  std::set<Item*> got;
  for (int i = 0; i < kReserve + 5; ++i) {
    Item* it = ItemPool::Allocate();
    ASSERT_TRUE(got.insert(it).second) << "object handed out twice";
    EXPECT_EQ(it->pool_next, nullptr);
  }
  for (Item* it : kept) EXPECT_EQ(got.count(it), 1u) << "Reserve dropped an object the cache held";
  for (Item* it : got) ItemPool::Free(it);
}

// A burst as a pool sees one: 4 x kRecentMax objects allocated on one
// thread, freed on another in a shuffled order (that thread's cache goes
// back to the global list as it ends), then allocated again on a fresh
// thread, whose cache starts empty. Returns what was freed and what came
// back, the latter in allocation order.
template <class Pool>
std::pair<std::vector<Item*>, std::vector<Item*>> FreeABurstAndAllocateAgain(std::uint64_t seed) {
  constexpr std::size_t kCount = 4 * Pool::kRecentMax;
  std::vector<Item*> items;
  std::thread([&] {
    for (std::size_t i = 0; i < kCount; ++i) items.push_back(Pool::Allocate());
  }).join();
  std::shuffle(items.begin(), items.end(), std::mt19937_64(seed));
  std::thread([&] {
    for (Item* it : items) Pool::Free(it);
  }).join();
  std::vector<Item*> again;
  std::thread([&] {
    for (std::size_t i = 0; i < kCount; ++i) again.push_back(Pool::Allocate());
    for (Item* it : again) Pool::Free(it);
  }).join();
  return {items, again};
}

// Steps down in address from one allocation to the next, past the first
// kRecentMax objects (plus the last batches back), which may come from the
// stack, newest first.
template <class Pool>
std::size_t DescentsPastTheStack(const std::vector<Item*>& again) {
  std::size_t descents = 0;
  for (std::size_t i = Pool::kRecentMax + 2 * Pool::kBatch + 1; i < again.size(); ++i) {
    if (again[i] <= again[i - 1]) ++descents;
  }
  return descents;
}

// A burst (far more objects freed than circulate, in an order unrelated to
// their addresses, as workers finish a million queued functions) is handed
// out again in address order once the few objects kept warm on the global
// stack are gone: a deep queue of the next burst is then a stream through
// memory, not a random walk (docs/performance.md, "The pool's order after a
// burst").
TEST(ObjectPoolTest, AfterABurstObjectsComeBackInAddressOrder) {
  const auto [items, again] = FreeABurstAndAllocateAgain<ItemPool>(7);
  EXPECT_EQ(DescentsPastTheStack<ItemPool>(again), 0u)
      << "objects of the burst were not handed out in address order";
  EXPECT_EQ(std::set<Item*>(again.begin(), again.end()).size(), items.size()) << "an object twice";
}

// A Layout may keep bursts on the stack (the engine's multi-var blocks do):
// the same burst then comes back newest batch first, not in address order.
struct StackedLayout {
  static constexpr bool kOrderBursts = false;
  static void Init(Item* /*it*/) {}
};
using StackedPool = ObjectPool<Item, StackedLayout>;

TEST(ObjectPoolTest, ALayoutCanKeepBurstsOnTheStack) {
  const auto [items, again] = FreeABurstAndAllocateAgain<StackedPool>(9);
  EXPECT_GT(DescentsPastTheStack<StackedPool>(again), 0u)
      << "a burst was put in address order although the Layout says not to";
  EXPECT_EQ(std::set<Item*>(again.begin(), again.end()),
            std::set<Item*>(items.begin(), items.end()));
}

// Bursts larger than the global stack keeps, from three threads at once, so
// that objects move between the stack, the address-ordered stock and the
// threads' caches concurrently: none is ever handed out while in use (and
// ThreadSanitizer checks the locking).
TEST(ObjectPoolTest, ConcurrentBurstsNeverHandOutAnObjectTwice) {
  constexpr int kThreads = 3;
  constexpr int kRounds = 12;
  constexpr std::size_t kBurst = ItemPool::kRecentMax;
  std::atomic<int> duplicates{0};
  auto in_use = [](Item* it) { return std::atomic_ref<char>(it->payload[0]); };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t));
      std::vector<Item*> mine;
      for (int r = 0; r < kRounds; ++r) {
        for (std::size_t i = 0; i < kBurst; ++i) {
          Item* it = ItemPool::Allocate();
          if (in_use(it).exchange(1, std::memory_order_relaxed) != 0) duplicates.fetch_add(1);
          mine.push_back(it);
        }
        std::shuffle(mine.begin(), mine.end(), rng);
        for (Item* it : mine) {
          in_use(it).store(0, std::memory_order_relaxed);
          ItemPool::Free(it);
        }
        mine.clear();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(duplicates.load(), 0) << "an object was handed out while in use";
}

// A Layout with room after each object, as the engine's multi-var blocks
// have for their slots: Init sees every new object once, and the room is
// the object's own (no neighbour overlaps it).
struct RoomyLayout {
  static constexpr std::size_t kStride = 2 * sizeof(Item);
  static char* Room(Item* it) { return reinterpret_cast<char*>(it) + sizeof(Item); }
  static void Init(Item* it) {
    it->constructed = 43;
    std::memset(Room(it), 0, sizeof(Item));
  }
};
using RoomyPool = ObjectPool<Item, RoomyLayout>;
static_assert(RoomyPool::kStride == 256 && ItemPool::kStride == sizeof(Item));

TEST(ObjectPoolTest, ALayoutGivesEachObjectRoomAfterIt) {
  std::vector<Item*> items;
  std::set<std::uintptr_t> starts;
  for (int i = 0; i < 3 * RoomyPool::kBatch + 5; ++i) {  // several chunks
    Item* it = RoomyPool::Allocate();
    ASSERT_TRUE(Aligned(it, alignof(Item)));
    EXPECT_EQ(it->constructed, 43) << "Layout::Init did not run on this object";
    starts.insert(reinterpret_cast<std::uintptr_t>(it));
    items.push_back(it);
  }
  ASSERT_EQ(starts.size(), items.size()) << "object handed out twice";
  // Each object and its room, [start, start + kStride), are disjoint from
  // every other's.
  std::uintptr_t prev_end = 0;
  for (std::uintptr_t start : starts) {
    EXPECT_GE(start, prev_end) << "an object overlaps the room of the one before it";
    prev_end = start + RoomyPool::kStride;
  }
  // The room is usable and keeps what was written across Free/Allocate.
  for (std::size_t i = 0; i < items.size(); ++i) {
    std::memset(RoomyLayout::Room(items[i]), static_cast<int>(i & 0x7f), sizeof(Item));
  }
  for (std::size_t i = 0; i < items.size(); ++i) {
    EXPECT_EQ(RoomyLayout::Room(items[i])[sizeof(Item) - 1], static_cast<char>(i & 0x7f));
  }
  for (Item* it : items) RoomyPool::Free(it);
}

// The engine's traffic, concurrently: one thread allocates (the pusher) and
// hands each object to one of two threads that free it (the workers), while
// all three also allocate and free some of their own. An object must never
// be handed out while it is in use: each carries an in-use flag that the
// allocator sets and the freer clears, so a duplicate in the caches' arrays
// or a batch taken twice from the global list fails here (and a race on the
// arrays fails under ThreadSanitizer).
TEST(ObjectPoolTest, NoObjectIsHandedOutTwiceUnderCrossThreadTraffic) {
  constexpr int kObjects = 200000;
  constexpr int kFreers = 2;
  // One single-producer ring per freer; the allocator waits for room.
  constexpr int kRing = 1024;
  struct Ring {
    std::atomic<Item*> slots[kRing] = {};
    std::atomic<std::uint64_t> pushed{0};
    std::atomic<std::uint64_t> popped{0};
  };
  auto rings = std::make_unique<Ring[]>(kFreers);
  std::atomic<bool> done{false};
  std::atomic<int> duplicates{0};
  auto in_use = [](Item* it) { return std::atomic_ref<char>(it->payload[0]); };
  auto take = [&](Item* it) {
    if (in_use(it).exchange(1, std::memory_order_relaxed) != 0) duplicates.fetch_add(1);
  };
  auto give_back = [&](Item* it) {
    in_use(it).store(0, std::memory_order_relaxed);
    ItemPool::Free(it);
  };
  std::vector<std::thread> freers;
  for (int f = 0; f < kFreers; ++f) {
    freers.emplace_back([&, f] {
      Ring& r = rings[f];
      std::vector<Item*> own;
      for (;;) {
        const std::uint64_t at = r.popped.load(std::memory_order_relaxed);
        if (at == r.pushed.load(std::memory_order_acquire)) {
          if (done.load(std::memory_order_acquire) &&
              at == r.pushed.load(std::memory_order_acquire)) {
            break;
          }
          std::this_thread::yield();
          continue;
        }
        give_back(r.slots[at % kRing].load(std::memory_order_relaxed));
        r.popped.store(at + 1, std::memory_order_release);
        // Now and then a worker allocates too (a push from inside a
        // function) and frees it later.
        if (at % 97 == 0) {
          Item* it = ItemPool::Allocate();
          take(it);
          own.push_back(it);
        }
        if (own.size() > 300) {
          for (Item* it : own) give_back(it);
          own.clear();
        }
      }
      for (Item* it : own) give_back(it);
    });
  }
  for (int i = 0; i < kObjects; ++i) {
    Item* it = ItemPool::Allocate();
    take(it);
    Ring& r = rings[i % kFreers];
    const std::uint64_t at = r.pushed.load(std::memory_order_relaxed);
    while (at - r.popped.load(std::memory_order_acquire) == kRing) std::this_thread::yield();
    r.slots[at % kRing].store(it, std::memory_order_relaxed);
    r.pushed.store(at + 1, std::memory_order_release);
  }
  done.store(true, std::memory_order_release);
  for (auto& t : freers) t.join();
  EXPECT_EQ(duplicates.load(), 0) << "an object was handed out while in use";
}

}  // namespace
}  // namespace depengine::internal
