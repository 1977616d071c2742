// CellRing: an unbounded single-producer / single-consumer FIFO whose entries
// live in place in 64-byte, 64-aligned cells, stored in segments; and
// RingConsumerWaker, the one sleep of a consumer that serves several rings.
// Step 2 of "Next: the engine on tickets" in docs/performance.md: the ring a
// pusher writes a function (closure included) into and a worker runs it
// from. Built and tested on its own (tests/experiments/), outside the
// library, which does not use it.
//
// Use. The producer calls Reserve(n) for 1 <= n <= kMaxEntryCells contiguous
// cells, constructs its object at the address Reserve returns (placement
// new, any type of at most EntryCapacity(n) bytes and alignment 16), and
// calls Commit() (commit and publish) or CommitUnpublished() (commit; a
// later Publish() makes every committed entry visible). The consumer calls Front(), which returns
// the oldest published entry (its address and cell count) or an empty Entry, uses the object in
// place, destroys it, and calls Pop(). The ring never copies or moves an entry.
//
// Storage. A segment holds a link line (the next segment) and then
// `segment_cells` cells (a power of two, at least kMaxEntryCells). An entry
// starts with a 16-byte header in its first cell: its publication word and
// its cell count; the object follows (so it may be at most
// EntryCapacity(n) = n * 64 - 16 bytes, aligned to at most 16). Cells are
// numbered by a 64-bit position that only grows; position p lies in cell
// p % segment_cells of its segment. An entry that does not fit in what is
// left of a segment makes the producer write a skip marker (a header with
// a count of 0) in the first cell left, and the entry goes to the start of
// the next segment. The segments form one chain, oldest first: the ones the
// consumer has left (spares), the consumer's, ..., the producer's. When the
// producer fills its segment it takes the oldest spare off the front of the
// chain, or allocates one, and links it at the end. It learns how
// many segments the consumer has left from a counter it reloads only when
// its cached copy says there is no spare: segments come back in bulk, and
// the producer loads a consumer-written line about once per segment at
// most, never per push. Spares beyond `max_spare_segments` are freed (two
// per segment switch), so memory follows the entries in flight once a burst
// has drained; a working set above the limit costs a malloc and a free per
// segment (per 256 entries at the default).
//
// Publication: a flag in the entry, not a shared tail. The producer
// publishes the entry at position p by storing p + 1 in its header's
// publication word (release), after constructing it; the consumer polls the
// word of the cell at its read position and takes the entry when it reads
// its own position + 1 there. A cell the consumer polls may hold anything
// from a segment's earlier use (an old word, or an object's bytes where an
// entry's inner cell was), so the producer clears the word of the cell
// right after each entry when it reserves the entry (and of a segment's
// first cell before it links the segment): the entry's publication then
// shows the consumer that zero, or the next entry's own word, there. (So
// the consumer's comparison with its position is a second guard: with the
// clears, a cell it polls holds 0 or its own entry's word.) The
// consumer thus reads only the cells themselves, which must cross to it
// anyway: no line is written per push that the consumer polls apart from
// the entry, and the producer never waits for a line to come back (the
// thirty-eighth session measured a per-item publication of the shared tail
// at 72 ns per item on an Intel host, 16 times a batch of 32; see
// docs/performance.md, "Publishing every push"). CommitUnpublished leaves the
// word unwritten; Publish walks the committed entries from the last one
// published and writes their words, oldest first.
//
// Memory ordering:
// - Entries. The producer writes an entry (header count, object) with plain
//   stores and clears the next cell's word (relaxed), then stores the
//   entry's publication word with release. The consumer loads the word with
//   acquire, so it sees the entry complete and the next word cleared.
// - Segment links. The producer links the next segment (release store of
//   the full segment's `next`) before it writes a skip marker or any cell of
//   the next segment. The consumer at a segment's end loads `next` with
//   acquire: null means nothing was published beyond it yet.
// - Recycling. The consumer's last access to a segment (its last entry's
//   destruction, the `next` load) comes before its release increment of
//   `segments_left_`; the producer reuses a segment only after an acquire
//   load of `segments_left_` counts it, so its new writes come after.
// - Sleep (RingConsumerWaker, shared by every ring that points to it). The
//   consumer (0) loads `epoch_`, (1) stores `sleeping_ = 1` (release),
//   (2) passes HeavyBarrier (tickets/asymmetric_barrier.h), (3) re-checks
//   every ring (HasPublishedForWait) and any other work source, and sleeps
//   only if all are empty and `epoch_` still holds what (0) read (a futex
//   wait on `epoch_`); then it resets `sleeping_` to 0. A producer (a)
//   publishes its entry, (b) passes LightBarrier and loads `sleeping_`; if
//   it is set, (c) exchanges it to 0 and, when it took the 1, (d)
//   increments `epoch_` and wakes the futex. Take a publication (a) that
//   the consumer's (3) misses. The two barriers order (a) before (b) and
//   (1) before (3) as two full fences would, so (b) does not read a value
//   older than (1)'s: it reads (1)'s 1, or a 0 that a producer's (c) wrote
//   when it took (1)'s 1 (the consumer resets only after its wait). Either
//   way some producer's (c) takes (1)'s 1, so that exchange comes after
//   (1), which comes after (0) (a release store after the load), and its (d)
//   increments `epoch_` after (0) read it: the futex wait finds `epoch_`
//   changed, or is woken. No wake-up is lost.
//   The order matters: with `epoch_` loaded after (1), a producer whose
//   (b)-(d) for an older entry, one the consumer had already taken, fell
//   between (1) and that load took the flag and bumped `epoch_` before the
//   consumer read it; the consumer then slept on the new value with nobody
//   left to wake it. The thirty-eighth session found that hang in the
//   depengine-micro hand-off (about one run in three once HeavyBarrier made
//   the window microseconds long); `CellRingTest.AStaleNotifyDuringTheSleep
//   CheckDoesNotStrandTheConsumer` replays it through a test hook.
//   When the consumer is awake `sleeping_` stays 0 and is not written, so
//   the producer's (b) reads a line that stays shared in its cache, and with
//   membarrier the producer passes no fence at all.
#pragma once

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <new>

#include "tickets/asymmetric_barrier.h"

namespace depengine::internal {

// The size and alignment of one cell.
inline constexpr std::size_t kCellBytes = 64;
// The most cells one entry may take.
inline constexpr std::uint32_t kMaxEntryCells = 4;
// The bytes of an entry's first cell that its header takes; the object
// follows them, aligned to 16.
inline constexpr std::size_t kEntryHeaderBytes = 16;
// The most bytes an object of an entry of `cells` cells may take.
constexpr std::size_t EntryCapacity(std::uint32_t cells) {
  return cells * kCellBytes - kEntryHeaderBytes;
}

// The wake-up of one consumer thread, shared by every ring (and any other
// work source) it serves: the consumer sleeps once for all of them, and any
// of their producers wakes it. The consumer owns it and must outlive every
// ring that points to it. See "Sleep" in the header's Memory ordering.
class RingConsumerWaker {
 public:
  RingConsumerWaker() { (void)AsymmetricBarrierUsesMembarrier(); }  // decide it now, off the paths
  RingConsumerWaker(const RingConsumerWaker&) = delete;
  RingConsumerWaker& operator=(const RingConsumerWaker&) = delete;

  // Sleeps until a producer calls Notify, unless `has_work()` returns true
  // once the sleep is announced. `has_work` must check every source this
  // consumer serves (CellRing::HasPublishedForWait for a ring; any load, at
  // least acquire, for other sources). May return without work (a wake-up
  // meant for an earlier sleep): the caller polls again. The consumer
  // thread only.
  template <class HasWork>
  void SleepUnless(HasWork&& has_work) {
    const std::uint32_t epoch = epoch_.load(std::memory_order_seq_cst);  // (0)
    sleeping_.store(1, std::memory_order_release);                       // (1)
    HeavyBarrier();                                                      // (2)
    if (after_announce_for_testing_ != nullptr) after_announce_for_testing_(hook_arg_);
    if (!has_work()) {  // (3)
      sleeps_.store(sleeps_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      WaitWhileEpoch(epoch);
    }
    // A producer's exchange may have cleared it already; both write 0.
    if (sleeping_.load(std::memory_order_relaxed) != 0)
      sleeping_.store(0, std::memory_order_seq_cst);
  }

  // Wakes the consumer if it sleeps or is about to. Call it after making
  // work visible (any store, release or stronger, that `has_work` loads);
  // it passes the light barrier itself. Any thread.
  void Notify() {
    LightBarrier();                                                     // (b)
    if (sleeping_.load(std::memory_order_relaxed) == 0) return;         // (b)
    if (sleeping_.exchange(0, std::memory_order_seq_cst) == 0) return;  // (c)
    epoch_.fetch_add(1, std::memory_order_seq_cst);                     // (d)
    WakeEpoch();
  }

  // How many times the consumer found nothing and went to sleep (counted
  // before its futex wait). Any thread (tests: a producer reads it,
  // publishes, and waits for it to grow, so that its next publish must wake
  // a sleeping consumer).
  std::uint64_t SleepsForTesting() const { return sleeps_.load(std::memory_order_relaxed); }
  // Tests: `hook(arg)` runs inside SleepUnless after the sleep is announced
  // (after (2)) and before the re-check; set it before the consumer starts.
  void SetAfterAnnounceHookForTesting(void (*hook)(void*), void* arg) {
    after_announce_for_testing_ = hook;
    hook_arg_ = arg;
  }
  // Tests: wakes the consumer whether or not it announced a sleep.
  void WakeForTesting() {
    epoch_.fetch_add(1, std::memory_order_seq_cst);
    WakeEpoch();
  }

 private:
  void WaitWhileEpoch(std::uint32_t epoch);  // futex wait while epoch_ == epoch
  void WakeEpoch();                          // futex wake of the consumer

  // 1 while the consumer is about to sleep or sleeps. Written by the
  // consumer ((1), and 0 on return) and, only while it is 1, exchanged by
  // the producer that wakes it; read by every publish after its light
  // barrier (relaxed: the asymmetric barrier orders it, see the header).
  // Its own line: it changes only around a sleep.
  alignas(64) std::atomic<std::uint32_t> sleeping_{0};
  // Sleeps taken: written (relaxed) by the consumer before each futex wait,
  // read by tests; orders nothing.
  std::atomic<std::uint64_t> sleeps_{0};
  // The futex word: incremented (seq_cst) by the producer that wakes the
  // consumer, read by the consumer around its sleep. Its own line: written
  // only by wake-ups.
  alignas(64) std::atomic<std::uint32_t> epoch_{0};
  // SetAfterAnnounceHookForTesting's hook; null outside tests. Set before
  // the consumer starts, read by it only.
  void (*after_announce_for_testing_)(void*) = nullptr;
  void* hook_arg_ = nullptr;
};

// The options of a CellRing.
struct CellRingOptions {
  // Destroys an entry that is still in the ring when the ring is destroyed
  // (committed, published or not, and not popped); gets the object's
  // address and the entry's cell count. Required.
  void (*destroy)(void* entry, std::uint32_t cells) = nullptr;
  // Cells per segment: a power of two, at least kMaxEntryCells.
  std::uint32_t segment_cells = 256;
  // Spare segments (left by the consumer, not yet reused) kept for reuse;
  // more are freed. 64 segments of 256 cells: 1 MiB.
  std::uint32_t max_spare_segments = 64;
  // The consumer's waker, or nullptr (the consumer never sleeps on this
  // ring; publishing is then the release store alone).
  RingConsumerWaker* waker = nullptr;
};

class CellRing {
 public:
  // One entry as the consumer sees it: its object's address and its cell
  // count; `data` is nullptr when the ring had nothing published.
  struct Entry {
    void* data = nullptr;
    std::uint32_t cells = 0;
    explicit operator bool() const { return data != nullptr; }
  };

  explicit CellRing(const CellRingOptions& options);
  // Destroys every committed entry not yet popped (through options.destroy,
  // oldest first) and frees every segment. Call it when neither the producer
  // nor the consumer uses the ring any more (after joining them), with no
  // open reservation.
  ~CellRing();
  CellRing(const CellRing&) = delete;
  CellRing& operator=(const CellRing&) = delete;

  // --- the producer thread only ---

  // Returns room for an object of up to EntryCapacity(n) bytes, aligned to
  // 16, in `n` contiguous cells (1 <= n <= kMaxEntryCells). Moves to a new
  // segment when the entry does not fit in the current one. Must be
  // followed by Commit or CommitUnpublished before the next Reserve.
  void* Reserve(std::uint32_t n) {
    assert(n >= 1 && n <= kMaxEntryCells && reserved_ == 0);
    std::uint64_t index = write_pos_ - tail_base_;
    if (index + n > segment_cells_) {
      SkipToNextSegment(index);
      index = 0;
    }
    // Clear the word after this entry, where the consumer looks next.
    if (index + n < segment_cells_) ClearWord(HeaderAt(tail_seg_, index + n));
    Header* h = HeaderAt(tail_seg_, index);
    h->cells = n;
    reserved_ = n;
    reserved_header_ = h;
    return Payload(h);
  }
  // Commits the reserved entry and publishes every committed one.
  void Commit() {
    assert(reserved_ != 0);
    if (published_pos_ == write_pos_) {
      // Nothing older waits: publish this entry alone, without the walk.
      const std::uint64_t pos = write_pos_;
      write_pos_ += reserved_;
      reserved_ = 0;
      Word(reserved_header_).store(pos + 1, std::memory_order_release);  // (a)
      published_pos_ = write_pos_;
      published_seg_ = tail_seg_;
      published_base_ = tail_base_;
      if (waker_ != nullptr) waker_->Notify();
      return;
    }
    CommitUnpublished();
    Publish();
  }
  // Commits the reserved entry without making it visible to the consumer.
  void CommitUnpublished() {
    assert(reserved_ != 0);
    write_pos_ += reserved_;
    reserved_ = 0;
  }
  // Makes every committed entry visible to the consumer, oldest first, and
  // wakes it if it sleeps on the waker. Not while a reservation is open.
  void Publish();
  // Segments this ring has allocated (tests: memory stays bounded). The
  // producer thread, or any thread after joining it.
  std::uint64_t SegmentsAllocatedForTesting() const { return segments_allocated_; }
  // Segments freed as surplus spares (tests). Same rule.
  std::uint64_t SegmentsFreedForTesting() const { return segments_freed_; }

  // --- the consumer thread only ---

  // The oldest published entry not yet popped, or an empty Entry. The same
  // entry until Pop.
  Entry Front() {
    for (;;) {
      std::uint64_t index = read_pos_ - head_base_;
      if (index == segment_cells_) {
        Segment* next = head_seg_->next.load(std::memory_order_acquire);
        if (next == nullptr) return {};
        LeaveSegment(next);
        index = 0;
      }
      Header* h = HeaderAt(head_seg_, index);
      if (Word(h).load(std::memory_order_acquire) != read_pos_ + 1) return {};
      const std::uint32_t cells = h->cells;
      if (cells == 0) {  // skip marker: the entry is at the next segment's start
        read_pos_ = head_base_ + segment_cells_;
        continue;
      }
      front_cells_ = cells;
      return {Payload(h), cells};
    }
  }
  // Removes the entry Front returned; the consumer has destroyed it.
  void Pop() {
    assert(front_cells_ != 0);
    read_pos_ += front_cells_;
    front_cells_ = 0;
  }
  // True when Front may find an entry: the re-check of
  // RingConsumerWaker::SleepUnless. May say true for a skip marker or a
  // linked segment with nothing in it yet (the consumer then polls once
  // more, and the next re-check looks past them); never false while an
  // entry it has not popped is published.
  bool HasPublishedForWait() const {
    const std::uint64_t index = read_pos_ - head_base_;
    if (index == segment_cells_) return head_seg_->next.load(std::memory_order_acquire) != nullptr;
    return Word(HeaderAt(head_seg_, index)).load(std::memory_order_acquire) == read_pos_ + 1;
  }

 private:
  // A segment: its link line, then the cells. Allocated raw, 64-aligned;
  // only the link is constructed.
  struct Segment {
    // The next segment in the chain, or nullptr. Written by the producer
    // (release, when it links the next segment, before it writes a skip
    // marker or publishes into it; relaxed, when it takes a spare off the
    // chain's front, which the consumer has left); read (acquire) by the
    // consumer at the segment's end, and by the producer.
    std::atomic<Segment*> next;
  };
  // The start of an entry's first cell, in raw memory.
  struct Header {
    // The publication word (accessed through Word): the entry's position + 1
    // once it is published; 0 (cleared by the producer) or the next entry's
    // word before. Stored (release, or relaxed to clear) by the producer,
    // loaded (acquire) by the consumer.
    std::uint64_t published;
    // The entry's cell count, 0 for a skip marker. Written by the producer
    // before `published`, read by the consumer after it (and by the
    // producer's Publish walk and the destructor).
    std::uint32_t cells;
  };
  static_assert(sizeof(Header) <= kEntryHeaderBytes);
  static_assert(std::atomic_ref<std::uint64_t>::required_alignment <= alignof(std::uint64_t));

  static std::atomic_ref<std::uint64_t> Word(Header* h) {
    return std::atomic_ref<std::uint64_t>(h->published);
  }
  static void ClearWord(Header* h) { Word(h).store(0, std::memory_order_relaxed); }

  Header* HeaderAt(Segment* s, std::uint64_t index) const {
    return reinterpret_cast<Header*>(reinterpret_cast<std::byte*>(s) + kCellBytes +
                                     index * kCellBytes);
  }
  static void* Payload(Header* h) { return reinterpret_cast<std::byte*>(h) + kEntryHeaderBytes; }

  // Calls visit(header, position) for each entry from position `pos` up to
  // `end`, oldest first, stepping over skip markers (which a walk never
  // visits) by the producer's cell counts; `seg` and `base` are the segment
  // holding `pos` and its first position, and are left at the segment
  // holding `end`. The producer thread, or the destructor.
  template <class Visit>
  void WalkEntries(Segment*& seg, std::uint64_t& base, std::uint64_t pos, std::uint64_t end,
                   Visit&& visit) {
    while (pos != end) {
      std::uint64_t index = pos - base;
      if (index == segment_cells_) {
        seg = seg->next.load(std::memory_order_relaxed);  // the producer's own link
        base += segment_cells_;
        index = 0;
      }
      Header* h = HeaderAt(seg, index);
      if (h->cells == 0) {  // a skip marker (published when it was written)
        pos = base + segment_cells_;
        continue;
      }
      visit(h, pos);
      pos += h->cells;
    }
  }
  Segment* AllocateSegment();
  void FreeSegment(Segment* s);
  // The producer: links a spare or a new segment after its full one and
  // leaves a skip marker at `index` of the old one if cells are left there.
  void SkipToNextSegment(std::uint64_t index);
  // The producer: links a spare or a new segment after its full one.
  void NextSegment();
  // The consumer: moves to `next` and gives the old segment back.
  void LeaveSegment(Segment* next);

  // --- set at construction, read by both ---
  const std::uint32_t segment_cells_;
  const std::uint32_t max_spare_segments_;
  const std::size_t segment_bytes_;
  void (*const destroy_)(void*, std::uint32_t);
  RingConsumerWaker* const waker_;

  // --- the producer's line: the producer only ---
  alignas(64) Segment* tail_seg_;     // the segment the producer writes into
  std::uint64_t tail_base_ = 0;       // position of tail_seg_'s first cell
  std::uint64_t write_pos_ = 0;       // end of the committed entries
  std::uint32_t reserved_ = 0;        // cells of the open reservation, or 0
  Header* reserved_header_ = nullptr;  // its header
  // End of the published entries, and the segment (and its first position)
  // that holds that position: where Publish's walk starts.
  std::uint64_t published_pos_ = 0;
  Segment* published_seg_;
  std::uint64_t published_base_ = 0;
  Segment* oldest_;                   // the chain's front (oldest spare or the consumer's)
  std::uint64_t segments_taken_ = 0;  // segments taken off the chain's front
  std::uint64_t left_cached_ = 0;     // the producer's copy of segments_left_
  std::uint64_t segments_allocated_ = 0;
  std::uint64_t segments_freed_ = 0;

  // --- the consumer's line: the consumer only ---
  alignas(64) Segment* head_seg_;          // the segment the consumer reads
  std::uint64_t head_base_ = 0;            // position of head_seg_'s first cell
  std::uint64_t read_pos_ = 0;             // start of the oldest entry not popped
  std::uint32_t front_cells_ = 0;          // cells of the entry Front returned
  std::uint64_t segments_left_local_ = 0;  // the value of segments_left_

  // Segments the consumer has left (each one a spare the producer may
  // reuse). Incremented (release store) by the consumer only; loaded
  // (acquire) by the producer only when its copy shows no spare. Its own
  // line, for the producer's rare loads.
  alignas(64) std::atomic<std::uint64_t> segments_left_{0};
};

}  // namespace depengine::internal
