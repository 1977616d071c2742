// CellRing and RingConsumerWaker on their own
// (bench/experiments/tickets/cell_ring.h): FIFO order of in-place entries
// across many tiny segments, entries that do not fit at a segment's end,
// segment reuse (allocations counted while millions of entries pass), a
// reused segment's old bytes never read as a publication, batched and
// immediate publication, destruction of what is left, and
// producer / consumer threads racing with the consumer falling asleep, on
// one ring and on several rings sharing one waker.
#include "tickets/cell_ring.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "test_scale.h"

namespace depengine::internal {
namespace {

// Iteration counts scale with DEPENGINE_TEST_SCALE (sanitizer runs use less).
std::uint64_t Scaled(std::uint64_t n) { return support::Scaled<std::uint64_t>(n, 1000); }

// Counts, per sequence number, how many times an entry was constructed and
// destroyed (single-threaded tests only).
struct Tally {
  std::vector<int> constructed;
  std::vector<int> destroyed;
  explicit Tally(std::size_t n) : constructed(n, 0), destroyed(n, 0) {}
};

// An entry that fills exactly `Cells` cells (less the ring's header): a
// sequence number and a payload derived from it, so a copy, a move, an
// overwrite or a torn read shows.
template <std::uint32_t Cells>
struct alignas(16) Blob {
  static constexpr std::size_t kWords = EntryCapacity(Cells) / 8 - 2;
  Blob(std::uint64_t s, Tally* t) : seq(s), tally(t) {
    for (std::size_t i = 0; i < kWords; ++i) words[i] = s * 1000003u + i;
    if (tally != nullptr) ++tally->constructed[seq];
  }
  Blob(const Blob&) = delete;
  Blob& operator=(const Blob&) = delete;
  ~Blob() {
    if (tally != nullptr) ++tally->destroyed[seq];
  }
  bool Intact() const {
    for (std::size_t i = 0; i < kWords; ++i) {
      if (words[i] != seq * 1000003u + i) return false;
    }
    return true;
  }
  std::uint64_t seq;
  Tally* tally;
  std::uint64_t words[kWords];
};
static_assert(sizeof(Blob<1>) == EntryCapacity(1) && sizeof(Blob<4>) == EntryCapacity(4));

// Calls f(blob) with the Blob type of `cells` cells at `p`.
template <class F>
void Visit(void* p, std::uint32_t cells, F&& f) {
  switch (cells) {
    case 1:
      f(*static_cast<Blob<1>*>(p));
      break;
    case 2:
      f(*static_cast<Blob<2>*>(p));
      break;
    case 3:
      f(*static_cast<Blob<3>*>(p));
      break;
    case 4:
      f(*static_cast<Blob<4>*>(p));
      break;
    default:
      std::abort();
  }
}

void DestroyBlob(void* p, std::uint32_t cells) {
  Visit(p, cells, [](auto& b) {
    using B = std::remove_reference_t<decltype(b)>;
    b.~B();
  });
}

CellRingOptions Options(std::uint32_t segment_cells, RingConsumerWaker* waker = nullptr) {
  CellRingOptions o;
  o.destroy = &DestroyBlob;
  o.segment_cells = segment_cells;
  o.waker = waker;
  return o;
}

// The producer's side: reserves `cells` cells, builds a Blob there, commits
// (and publishes when `publish`). Returns where the entry lives.
void* PushBlob(CellRing& ring, std::uint32_t cells, std::uint64_t seq, Tally* tally, bool publish) {
  void* p = ring.Reserve(cells);
  switch (cells) {
    case 1:
      new (p) Blob<1>(seq, tally);
      break;
    case 2:
      new (p) Blob<2>(seq, tally);
      break;
    case 3:
      new (p) Blob<3>(seq, tally);
      break;
    case 4:
      new (p) Blob<4>(seq, tally);
      break;
    default:
      std::abort();
  }
  if (publish) {
    ring.Commit();
  } else {
    ring.CommitUnpublished();
  }
  return p;
}

// What the consumer found in one entry.
struct Taken {
  std::uint64_t seq = 0;
  std::uint32_t cells = 0;
  void* where = nullptr;
  bool intact = false;
};

// The consumer's side: checks and destroys the front entry in place, pops it.
Taken PopBlob(CellRing& ring, CellRing::Entry e) {
  Taken t;
  t.cells = e.cells;
  t.where = e.data;
  Visit(e.data, e.cells, [&](auto& b) {
    t.seq = b.seq;
    t.intact = b.Intact();
  });
  DestroyBlob(e.data, e.cells);
  ring.Pop();
  return t;
}

std::uint32_t CellsOf(std::uint64_t seq) {
  return static_cast<std::uint32_t>((seq * 7 + seq / 5) % kMaxEntryCells) + 1;
}

TEST(CellRingTest, FifoInPlaceAcrossManySegments) {
  constexpr std::uint64_t kN = 20000;
  Tally tally(kN);
  {
    CellRing ring(Options(4));
    std::vector<void*> where(kN);
    std::uint64_t pushed = 0, popped = 0;
    // Rounds of a few pushes then a few pops, so the ring holds 0 to ~40
    // entries and crosses segment ends at every offset.
    while (popped < kN) {
      const std::uint64_t push = std::min<std::uint64_t>(kN - pushed, (pushed * 13) % 11 + 1);
      for (std::uint64_t i = 0; i < push; ++i, ++pushed) {
        where[pushed] = PushBlob(ring, CellsOf(pushed), pushed, &tally, true);
        ASSERT_EQ(reinterpret_cast<std::uintptr_t>(where[pushed]) % kCellBytes, kEntryHeaderBytes);
      }
      const std::uint64_t pop = (popped * 7) % 10 + (pushed == kN ? kN : 0);
      for (std::uint64_t i = 0; i < pop && popped < pushed; ++i, ++popped) {
        const CellRing::Entry e = ring.Front();
        ASSERT_TRUE(e);
        EXPECT_EQ(e.data, ring.Front().data);  // the same entry until Pop
        const Taken t = PopBlob(ring, e);
        ASSERT_EQ(t.seq, popped);
        EXPECT_EQ(t.cells, CellsOf(popped));
        EXPECT_EQ(t.where, where[popped]);  // used where it was built
        EXPECT_TRUE(t.intact);
      }
      if (popped == pushed) {
        EXPECT_FALSE(ring.Front());
      }
    }
    EXPECT_GT(ring.SegmentsAllocatedForTesting(), 2u);
  }
  for (std::uint64_t i = 0; i < kN; ++i) {
    ASSERT_EQ(tally.constructed[i], 1) << i;
    ASSERT_EQ(tally.destroyed[i], 1) << i;
  }
}

TEST(CellRingTest, EntryThatDoesNotFitGoesToTheNextSegment) {
  Tally tally(8);
  CellRing ring(Options(4));
  // Segment 1: a 1-cell entry, then a 4-cell one that does not fit in the 3
  // cells left: those are skipped, the entry starts segment 2.
  char* a = static_cast<char*>(PushBlob(ring, 1, 0, &tally, true));
  char* b = static_cast<char*>(PushBlob(ring, 4, 1, &tally, true));
  EXPECT_EQ(ring.SegmentsAllocatedForTesting(), 2u);
  EXPECT_NE(b, a + kCellBytes);
  // Segment 2 is full: a 2-cell entry starts segment 3; a 3-cell one does
  // not fit in the 2 cells left there (skipped), it starts segment 4, and a
  // 1-cell entry fits right after it.
  char* c = static_cast<char*>(PushBlob(ring, 2, 2, &tally, true));
  char* d = static_cast<char*>(PushBlob(ring, 3, 3, &tally, true));
  char* e = static_cast<char*>(PushBlob(ring, 1, 4, &tally, true));
  EXPECT_EQ(ring.SegmentsAllocatedForTesting(), 4u);
  EXPECT_EQ(e, d + 3 * kCellBytes);
  (void)c;
  for (std::uint64_t seq = 0; seq < 5; ++seq) {
    const CellRing::Entry entry = ring.Front();
    ASSERT_TRUE(entry);
    const Taken t = PopBlob(ring, entry);
    EXPECT_EQ(t.seq, seq);
    EXPECT_TRUE(t.intact);
  }
  EXPECT_FALSE(ring.Front());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(tally.destroyed[i], 1);
}

TEST(CellRingTest, SegmentsAreReusedWhileMillionsPass) {
  const std::uint64_t n = Scaled(4'000'000);
  CellRing ring(Options(4));
  std::uint64_t pushed = 0, popped = 0;
  while (popped < n) {
    // Up to 24 entries in flight (at most 96 cells: 24 segments of 4 and
    // the skipped ends).
    const std::uint64_t push = std::min<std::uint64_t>(n - pushed, pushed % 24 + 1);
    for (std::uint64_t i = 0; i < push; ++i, ++pushed)
      PushBlob(ring, CellsOf(pushed), pushed, nullptr, true);
    while (popped < pushed) {
      const Taken t = PopBlob(ring, ring.Front());
      ASSERT_EQ(t.seq, popped);
      ++popped;
    }
  }
  // In flight at most 24 entries of up to 4 cells, each in at most one
  // segment of its own: 24 segments, plus the consumer's and the one being
  // left (the default max_spare_segments, 64, keeps them all).
  EXPECT_LE(ring.SegmentsAllocatedForTesting(), 24u + 2u);
  EXPECT_EQ(ring.SegmentsFreedForTesting(), 0u);
  EXPECT_GE(ring.SegmentsAllocatedForTesting(), 2u);
}

// A cell the consumer polls may have held the inside of a larger entry
// before its segment was reused. Here every such cell holds exactly the word
// that would publish the entry the consumer waits for there next (its
// position + 1): the ring must still report nothing until that entry is
// pushed.
TEST(CellRingTest, AReusedSegmentsOldBytesNeverReadAsPublished) {
  constexpr std::uint32_t kSegmentCells = 4;
  constexpr std::uint64_t kSegments = 16;
  constexpr std::size_t kWords = EntryCapacity(4) / 8;
  struct Raw {
    std::uint64_t words[kWords];
  };
  static_assert(sizeof(Raw) == EntryCapacity(4));
  CellRingOptions options;
  options.destroy = [](void*, std::uint32_t) {};
  options.segment_cells = kSegmentCells;
  CellRing ring(options);
  // Lap one: one 4-cell entry per segment, positions 4j (j = 0..15). Cell i
  // of segment j will hold position 4 * (16 + j) + i in lap two (the spares
  // come back oldest first, after the 16 segments of lap one); its first
  // word lies at byte 64 i - 16 of the entry's object.
  for (std::uint64_t j = 0; j < kSegments; ++j) {
    Raw* raw = new (ring.Reserve(4)) Raw{};
    for (std::uint32_t i = 1; i < kSegmentCells; ++i) {
      raw->words[(i * kCellBytes - kEntryHeaderBytes) / 8] =
          kSegmentCells * (kSegments + j) + i + 1;
    }
    ring.Commit();
  }
  for (std::uint64_t j = 0; j < kSegments; ++j) {
    ASSERT_TRUE(ring.Front()) << j;
    ring.Pop();
  }
  ASSERT_FALSE(ring.Front());
  // Lap two: one-cell entries, each taken at once; after each, the next cell
  // (old bytes that match its position) must read as empty.
  const std::uint64_t allocated = ring.SegmentsAllocatedForTesting();
  for (std::uint64_t k = 0; k < kSegmentCells * (kSegments - 1); ++k) {
    new (ring.Reserve(1)) std::uint64_t{k};
    ring.Commit();
    const CellRing::Entry e = ring.Front();
    ASSERT_TRUE(e) << k;
    ASSERT_EQ(e.cells, 1u);
    ASSERT_EQ(*static_cast<std::uint64_t*>(e.data), k);
    ring.Pop();
    ASSERT_FALSE(ring.Front()) << "a stale cell read as published after entry " << k;
    ASSERT_FALSE(ring.HasPublishedForWait()) << k;
  }
  EXPECT_EQ(ring.SegmentsAllocatedForTesting(), allocated);  // lap two reused lap one's segments
}

TEST(CellRingTest, SparesBeyondTheLimitAreFreed) {
  CellRingOptions options = Options(4);
  options.max_spare_segments = 8;
  CellRing ring(options);
  // A burst of 4,000 one-cell entries: 1,000 segments.
  std::uint64_t seq = 0;
  for (; seq < 4000; ++seq) PushBlob(ring, 1, seq, nullptr, false);
  ring.Publish();
  EXPECT_EQ(ring.SegmentsAllocatedForTesting(), 1000u);
  for (std::uint64_t i = 0; i < 4000; ++i) ASSERT_EQ(PopBlob(ring, ring.Front()).seq, i);
  // Steady traffic afterwards (one entry in flight) reuses the spares and
  // frees those unused through a trim window, down to max_spare_segments.
  for (int round = 0; round < 40000; ++round, ++seq) {
    PushBlob(ring, 1, seq, nullptr, true);
    ASSERT_EQ(PopBlob(ring, ring.Front()).seq, seq);
  }
  EXPECT_EQ(ring.SegmentsAllocatedForTesting(), 1000u);
  const std::uint64_t live = ring.SegmentsAllocatedForTesting() - ring.SegmentsFreedForTesting();
  EXPECT_LE(live, 8u + 4u) << "freed " << ring.SegmentsFreedForTesting();
}

TEST(CellRingTest, UnpublishedEntriesAreInvisibleUntilPublished) {
  Tally tally(8);
  RingConsumerWaker waker;
  CellRing ring(Options(4, &waker));
  PushBlob(ring, 2, 0, &tally, false);
  PushBlob(ring, 3, 1, &tally, false);  // skips 2 cells: a new segment
  EXPECT_FALSE(ring.Front());
  EXPECT_FALSE(ring.HasPublishedForWait());
  ring.Publish();
  EXPECT_TRUE(ring.HasPublishedForWait());
  PushBlob(ring, 1, 2, &tally, false);  // committed after the publish
  EXPECT_EQ(PopBlob(ring, ring.Front()).seq, 0u);
  EXPECT_EQ(PopBlob(ring, ring.Front()).seq, 1u);
  EXPECT_FALSE(ring.Front());
  EXPECT_FALSE(ring.HasPublishedForWait());
  ring.Publish();
  ring.Publish();  // nothing new: no effect
  EXPECT_EQ(PopBlob(ring, ring.Front()).seq, 2u);
  // Immediate publication: visible at once.
  PushBlob(ring, 4, 3, &tally, true);
  EXPECT_EQ(PopBlob(ring, ring.Front()).seq, 3u);
  EXPECT_FALSE(ring.Front());
  for (int i = 0; i < 4; ++i) EXPECT_EQ(tally.destroyed[i], 1);
}

TEST(CellRingTest, DestructionDestroysWhatIsLeftExactlyOnce) {
  constexpr std::uint64_t kN = 300;
  Tally tally(kN);
  {
    CellRing ring(Options(4));
    for (std::uint64_t i = 0; i < 200; ++i) PushBlob(ring, CellsOf(i), i, &tally, true);
    for (std::uint64_t i = 0; i < 50; ++i) ASSERT_EQ(PopBlob(ring, ring.Front()).seq, i);
    // Committed but never published: destroyed too.
    for (std::uint64_t i = 200; i < kN; ++i) PushBlob(ring, CellsOf(i), i, &tally, false);
  }
  for (std::uint64_t i = 0; i < kN; ++i) {
    ASSERT_EQ(tally.constructed[i], 1) << i;
    ASSERT_EQ(tally.destroyed[i], 1) << i;
  }
}

// The consumer of one or more rings: takes entries in order from each ring,
// checks them, and sleeps on `waker` when every ring is empty. Stops after
// one end marker per ring. Returns false at the first error.
struct Consumer {
  std::vector<CellRing*> rings;
  RingConsumerWaker* waker;
  std::uint64_t end_seq;            // an entry with this seq ends a ring
  std::vector<std::uint64_t> next;  // per ring: the seq expected next
  std::string error;

  void Run() {
    next.assign(rings.size(), 0);
    std::size_t ended = 0;
    while (ended < rings.size()) {
      bool any = false;
      for (std::size_t r = 0; r < rings.size(); ++r) {
        // At most 64 entries per ring per round, as a fair worker would.
        for (int k = 0; k < 64; ++k) {
          const CellRing::Entry e = rings[r]->Front();
          if (!e) break;
          any = true;
          const Taken t = PopBlob(*rings[r], e);
          if (t.seq == end_seq) {
            ++ended;
            break;
          }
          if (t.seq != next[r] || !t.intact || t.cells != CellsOf(t.seq)) {
            error = "ring " + std::to_string(r) + ": got " + std::to_string(t.seq) + " expected " +
                    std::to_string(next[r]) + (t.intact ? "" : " (torn)");
            return;
          }
          ++next[r];
        }
      }
      if (!any) {
        waker->SleepUnless([&] {
          for (CellRing* ring : rings) {
            if (ring->HasPublishedForWait()) return true;
          }
          return false;
        });
      }
    }
  }
};

// The producer of one ring: `n` entries, published in batches of 1 to 64
// (varying), and every `checkpoint` entries it waits until the consumer has
// gone to sleep (so the next publish must wake it: a lost wake-up hangs the
// test, which ctest's timeout fails).
void Produce(CellRing& ring, const RingConsumerWaker& waker, std::uint64_t n, std::uint64_t end_seq,
             std::uint64_t checkpoint) {
  std::uint64_t batch = 1, in_batch = 0;
  for (std::uint64_t seq = 0; seq < n; ++seq) {
    if (seq % checkpoint == checkpoint - 1) {
      // Read the count before publishing this entry: the consumer can sleep
      // on an empty ring only after taking it, so the count must grow.
      const std::uint64_t sleeps = waker.SleepsForTesting();
      PushBlob(ring, CellsOf(seq), seq, nullptr, true);
      in_batch = 0;
      while (waker.SleepsForTesting() == sleeps) std::this_thread::yield();
      continue;
    }
    PushBlob(ring, CellsOf(seq), seq, nullptr, false);
    if (++in_batch == batch) {
      ring.Publish();
      in_batch = 0;
      batch = (seq * 2654435761u >> 7) % 64 + 1;
    }
  }
  PushBlob(ring, 1, end_seq, nullptr, true);
}

TEST(CellRingTest, TwoThreadsTinySegmentsConsumerSleeps) {
  const std::uint64_t n = Scaled(2'000'000);
  const std::uint64_t end = ~std::uint64_t{0};
  RingConsumerWaker waker;
  CellRing ring(Options(4, &waker));
  Consumer consumer{{&ring}, &waker, end, {}, {}};
  std::thread c([&] { consumer.Run(); });
  std::thread p([&] { Produce(ring, waker, n, end, 5000); });
  p.join();
  c.join();
  EXPECT_EQ(consumer.error, "");
  EXPECT_EQ(consumer.next[0], n);  // nothing lost, nothing twice (order checked)
  EXPECT_GE(waker.SleepsForTesting(), n / 5000);
  EXPECT_FALSE(ring.Front());
}

TEST(CellRingTest, SeveralRingsShareOneWaker) {
  const std::uint64_t n = Scaled(600'000);
  const std::uint64_t end = ~std::uint64_t{0};
  constexpr int kRings = 3;
  RingConsumerWaker waker;
  std::vector<std::unique_ptr<CellRing>> rings;
  std::vector<CellRing*> pointers;
  for (int r = 0; r < kRings; ++r) {
    rings.push_back(std::make_unique<CellRing>(Options(8, &waker)));
    pointers.push_back(rings.back().get());
  }
  Consumer consumer{pointers, &waker, end, {}, {}};
  std::thread c([&] { consumer.Run(); });
  std::vector<std::thread> producers;
  // Checkpoints of different lengths: the consumer sleeps while some
  // producers still push, and on all rings at once when every producer waits.
  for (int r = 0; r < kRings; ++r) {
    producers.emplace_back([&, r] { Produce(*rings[r], waker, n, end, 3000 + 1000 * r); });
  }
  for (std::thread& p : producers) p.join();
  c.join();
  EXPECT_EQ(consumer.error, "");
  for (int r = 0; r < kRings; ++r) EXPECT_EQ(consumer.next[r], n) << r;
  EXPECT_GE(waker.SleepsForTesting(), n / 5000);
}

// A producer publishes entry 0 and is delayed before its Notify; the
// consumer takes entry 0, finds the ring empty and announces a sleep, and
// the delayed Notify lands right then (the hook runs it), taking the flag.
// The producer's next entry and Notify must still wake the consumer. (With
// the epoch read after the announcement, the consumer slept on the epoch
// that stale Notify had bumped, and the next Notify found no flag: a hang.)
TEST(CellRingTest, AStaleNotifyDuringTheSleepCheckDoesNotStrandTheConsumer) {
  RingConsumerWaker waker;
  CellRing ring(Options(4, &waker));
  struct HookState {
    RingConsumerWaker* waker;
    std::atomic<int> calls{0};
  } hook{&waker};
  waker.SetAfterAnnounceHookForTesting(
      [](void* p) {
        auto* h = static_cast<HookState*>(p);
        if (h->calls.fetch_add(1) == 0) h->waker->Notify();  // entry 0's late Notify
      },
      &hook);
  PushBlob(ring, 1, 0, nullptr, true);  // entry 0: nobody sleeps yet
  std::atomic<int> taken{0};
  std::atomic<bool> stop{false};
  std::thread consumer([&] {
    while (taken.load() < 2 && !stop.load()) {
      if (const CellRing::Entry e = ring.Front()) {
        PopBlob(ring, e);
        taken.fetch_add(1);
        continue;
      }
      waker.SleepUnless([&] { return ring.HasPublishedForWait() || stop.load(); });
    }
  });
  // The consumer took entry 0 and decided to sleep, after the hook's Notify.
  while (waker.SleepsForTesting() == 0) std::this_thread::yield();
  PushBlob(ring, 1, 1, nullptr, true);  // entry 1, and its Notify
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (taken.load() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(taken.load(), 2) << "the consumer slept through entry 1's Notify";
  // After a failure, let the consumer end: it re-checks `stop` after any wake.
  stop.store(true);
  waker.WakeForTesting();
  consumer.join();
  EXPECT_GE(hook.calls.load(), 1);
}

TEST(CellRingTest, NotifyWakesASleepingConsumerForOtherWork) {
  // A source that is not a ring (the engine's foreign queue): a seq_cst flag
  // then Notify, as the header asks.
  RingConsumerWaker waker;
  std::atomic<int> work{0};
  std::thread consumer([&] {
    while (work.load(std::memory_order_seq_cst) == 0) {
      waker.SleepUnless([&] { return work.load(std::memory_order_seq_cst) != 0; });
    }
  });
  while (waker.SleepsForTesting() == 0) std::this_thread::yield();
  work.store(1, std::memory_order_seq_cst);
  waker.Notify();
  consumer.join();
  EXPECT_EQ(waker.SleepsForTesting(), 1u);
}

}  // namespace
}  // namespace depengine::internal
