// CellRing: an unbounded single-producer / single-consumer FIFO whose entries
// live in place in 64-byte, 64-aligned cells, stored in segments; and
// RingConsumerWaker, the one sleep of a consumer that serves several rings.
// Step 2 of "Next: the engine on tickets" in docs/performance.md: the ring a
// pusher writes a function (closure included) into and a worker runs it
// from. Built and tested on its own (tests/experiments/), outside the
// library, which does not use it.
//
// Use. The producer calls Reserve(n) for 1 <= n <= kMaxEntryCells contiguous
// cells, constructs its object there (placement new, any type of at most
// n * 64 bytes and alignment 64), and calls Commit() (commit and publish) or
// CommitUnpublished() (commit; a later Publish() makes every committed entry
// visible at once). The consumer calls Front(), which returns the oldest
// published entry (its address and cell count) or an empty Entry, uses the
// object in place, destroys it, and calls Pop(). The ring never copies or
// moves an entry.
//
// Storage. A segment holds `segment_cells` cells (a power of two, at least
// kMaxEntryCells), a byte per cell giving the entry's cell count, and a link
// to the next segment. Cells are numbered by a 64-bit position that only
// grows; position p lies in cell p % segment_cells of its segment. An entry
// that does not fit in what is left of a segment makes the producer write a
// skip marker (count 0) in the first cell left, and the entry goes to the
// start of the next segment; the consumer skips to the segment's end when it
// reads a 0. The segments form one chain, oldest first: the ones the
// consumer has left (spares), the consumer's, ..., the producer's. When the
// producer fills its segment it takes the oldest spare off the front of the
// chain, or allocates one, and links it at the end. It learns how many
// segments the consumer has left from a counter it reloads only when its
// cached copy says there is no spare: segments come back in bulk, and the
// producer loads a consumer-written line about once per segment at most,
// never per push. Spares beyond `max_spare_segments` are freed (two per
// segment switch), so memory follows the entries in flight once a burst has
// drained; a working set above the limit costs a malloc and a free per
// segment (per 256 entries at the default).
//
// Memory ordering:
// - Entries. The producer writes a cell's bytes and its count byte with plain
//   stores, then stores `published_` (the position up to which entries are
//   visible) with release, or seq_cst when a waker is attached. The consumer
//   loads `published_` with acquire, so it sees the entries below it
//   complete, and then reads them with plain loads. It loads `published_`
//   only when its cached copy says the ring is empty.
// - Segment links. The producer writes a segment's `next` before it writes
//   any cell of the next segment, hence before publishing a position beyond
//   the segment; the consumer follows `next` only when `published_` (acquire)
//   is beyond the segment.
// - Recycling. The consumer's last access to a segment (its last entry's
//   destruction, the `next` load) comes before its release increment of
//   `segments_left_`; the producer reuses a segment only after an acquire
//   load of `segments_left_` counts it, so its new writes come after.
// - Sleep (RingConsumerWaker, shared by every ring that points to it). The
//   consumer (1) stores `sleeping_ = 1` (seq_cst), (2) loads `epoch_`
//   (seq_cst), (3) re-checks every ring with a seq_cst load of `published_`
//   (and any other work source), and sleeps only if all are empty and
//   `epoch_` still holds what (2) read (a futex wait on `epoch_`). A producer
//   (a) stores `published_` (seq_cst), then (b) loads `sleeping_` (seq_cst);
//   if it is set, (c) exchanges it to 0 and, when it took the 1, (d)
//   increments `epoch_` (seq_cst) and wakes the futex. In the single total
//   order of seq_cst operations, either (3) comes after (a) and sees the
//   entry, or (b) comes after (1) and sees the flag: then whichever producer
//   takes the 1 in (c) increments `epoch_` after it, and the consumer either
//   read that increment in (2) (so (a) happened before (3), which sees the
//   entry) or finds `epoch_` changed at its wait (the futex checks the value
//   atomically with going to sleep). A producer whose (c) finds 0 lost the
//   race to another producer's (c), whose (d) ends this sleep, or to the
//   consumer's own reset (it found work or woke): either way its (c)
//   precedes the consumer's next (1) in `sleeping_`'s modification order,
//   so its (a) precedes that sleep's (3), which sees the entry. No wake-up
//   is lost. When the consumer is awake
//   `sleeping_` stays 0 and is not written, so the producer's (b) reads a
//   line that stays shared in its cache: on the common path the producer
//   loads no line the consumer writes, and the consumer never writes a line
//   the producer writes.
#pragma once

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <new>

namespace depengine::internal {

// The size and alignment of one cell.
inline constexpr std::size_t kCellBytes = 64;
// The most cells one entry may take.
inline constexpr std::uint32_t kMaxEntryCells = 4;

// The wake-up of one consumer thread, shared by every ring (and any other
// work source) it serves: the consumer sleeps once for all of them, and any
// of their producers wakes it. The consumer owns it and must outlive every
// ring that points to it. See "Sleep" in the header's Memory ordering.
class RingConsumerWaker {
 public:
  RingConsumerWaker() = default;
  RingConsumerWaker(const RingConsumerWaker&) = delete;
  RingConsumerWaker& operator=(const RingConsumerWaker&) = delete;

  // Sleeps until a producer calls Notify, unless `has_work()` returns true
  // once the sleep is announced. `has_work` must check every source this
  // consumer serves with seq_cst loads (CellRing::HasPublishedForWait for a
  // ring). May return without work (a wake-up meant for an earlier sleep):
  // the caller polls again. The consumer thread only.
  template <class HasWork>
  void SleepUnless(HasWork&& has_work) {
    sleeping_.store(1, std::memory_order_seq_cst);                       // (1)
    const std::uint32_t epoch = epoch_.load(std::memory_order_seq_cst);  // (2)
    if (!has_work()) {                                                   // (3)
      sleeps_.store(sleeps_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      WaitWhileEpoch(epoch);
    }
    // A producer's exchange may have cleared it already; both write 0.
    if (sleeping_.load(std::memory_order_relaxed) != 0)
      sleeping_.store(0, std::memory_order_seq_cst);
  }

  // Wakes the consumer if it sleeps or is about to. Call it after making
  // work visible with a seq_cst store (CellRing::Publish does). Any thread.
  void Notify() {
    if (sleeping_.load(std::memory_order_seq_cst) == 0) return;         // (b)
    if (sleeping_.exchange(0, std::memory_order_seq_cst) == 0) return;  // (c)
    epoch_.fetch_add(1, std::memory_order_seq_cst);                     // (d)
    WakeEpoch();
  }

  // How many times the consumer found nothing and went to sleep (counted
  // before its futex wait). Any thread (tests: a producer reads it,
  // publishes, and waits for it to grow, so that its next publish must wake
  // a sleeping consumer).
  std::uint64_t SleepsForTesting() const { return sleeps_.load(std::memory_order_relaxed); }

 private:
  void WaitWhileEpoch(std::uint32_t epoch);  // futex wait while epoch_ == epoch
  void WakeEpoch();                          // futex wake of the consumer

  // 1 while the consumer is about to sleep or sleeps. Written by the
  // consumer ((1), and 0 on return) and, only while it is 1, exchanged by
  // the producer that wakes it; read (seq_cst) by every publish. Its own
  // line: it changes only around a sleep.
  alignas(64) std::atomic<std::uint32_t> sleeping_{0};
  // Sleeps taken: written (relaxed) by the consumer before each futex wait,
  // read by tests; orders nothing.
  std::atomic<std::uint64_t> sleeps_{0};
  // The futex word: incremented (seq_cst) by the producer that wakes the
  // consumer, read by the consumer around its sleep. Its own line: written
  // only by wake-ups.
  alignas(64) std::atomic<std::uint32_t> epoch_{0};
};

// The options of a CellRing.
struct CellRingOptions {
  // Destroys an entry that is still in the ring when the ring is destroyed
  // (committed, published or not, and not popped). Required.
  void (*destroy)(void* entry, std::uint32_t cells) = nullptr;
  // Cells per segment: a power of two, at least kMaxEntryCells.
  std::uint32_t segment_cells = 256;
  // Spare segments (left by the consumer, not yet reused) kept for reuse;
  // more are freed. 64 segments of 256 cells: 1 MiB.
  std::uint32_t max_spare_segments = 64;
  // The consumer's waker, or nullptr (the consumer never sleeps on this
  // ring; publishing is then a release store).
  RingConsumerWaker* waker = nullptr;
};

class CellRing {
 public:
  // One entry as the consumer sees it: its first cell and its cell count;
  // `data` is nullptr when the ring had nothing published.
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

  // Returns `n` contiguous, 64-aligned cells (1 <= n <= kMaxEntryCells) to
  // construct one entry in. Moves to a new segment when the entry does not
  // fit in the current one. Must be followed by Commit or CommitUnpublished
  // before the next Reserve.
  void* Reserve(std::uint32_t n) {
    assert(n >= 1 && n <= kMaxEntryCells && reserved_ == 0);
    std::uint64_t index = write_pos_ - tail_base_;
    if (index + n > segment_cells_) {
      if (index < segment_cells_) Counts(tail_seg_)[index] = 0;  // skip marker
      NextSegment();
      index = 0;
    }
    Counts(tail_seg_)[index] = static_cast<std::uint8_t>(n);
    reserved_ = n;
    return Cell(tail_seg_, index);
  }
  // Commits the reserved entry and publishes every committed one.
  void Commit() {
    CommitUnpublished();
    Publish();
  }
  // Commits the reserved entry without making it visible to the consumer.
  void CommitUnpublished() {
    assert(reserved_ != 0);
    write_pos_ += reserved_;
    reserved_ = 0;
  }
  // Makes every committed entry visible to the consumer, and wakes it if it
  // sleeps on the waker. Not while a reservation is open.
  void Publish() {
    assert(reserved_ == 0);
    if (write_pos_ == last_published_) return;
    last_published_ = write_pos_;
    if (waker_ == nullptr) {
      published_.store(write_pos_, std::memory_order_release);
    } else {
      published_.store(write_pos_, std::memory_order_seq_cst);  // (a)
      waker_->Notify();
    }
  }
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
      if (read_pos_ == visible_) {
        visible_ = published_.load(std::memory_order_acquire);
        if (read_pos_ == visible_) return {};
      }
      std::uint64_t index = read_pos_ - head_base_;
      if (index == segment_cells_) {
        LeaveSegment();
        index = 0;
      }
      const std::uint32_t cells = Counts(head_seg_)[index];
      if (cells == 0) {  // skip marker: the entry is at the next segment's start
        read_pos_ = head_base_ + segment_cells_;
        continue;
      }
      front_cells_ = cells;
      return {Cell(head_seg_, index), cells};
    }
  }
  // Removes the entry Front returned; the consumer has destroyed it.
  void Pop() {
    assert(front_cells_ != 0);
    read_pos_ += front_cells_;
    front_cells_ = 0;
  }
  // True when the producer has published an entry the consumer has not
  // popped: the seq_cst re-check of RingConsumerWaker::SleepUnless.
  bool HasPublishedForWait() const {
    return published_.load(std::memory_order_seq_cst) != read_pos_;
  }

 private:
  // A segment: its link line, then a count byte per cell (padded to a line),
  // then the cells. Allocated raw, 64-aligned; never constructed as a whole.
  struct Segment {
    // The next segment in the chain, or nullptr. Written by the producer
    // (when it links the next segment, before publishing into it, and when it
    // takes a spare off the chain's front); read by the consumer after
    // acquiring a position beyond this segment, and by the producer.
    Segment* next;
  };
  // The count byte of each cell of `s` (the line after the link).
  static std::uint8_t* Counts(Segment* s) {
    return reinterpret_cast<std::uint8_t*>(s) + kCellBytes;
  }
  // Cell `index` of `s` (after the count lines).
  void* Cell(Segment* s, std::uint64_t index) const {
    return reinterpret_cast<std::byte*>(s) + cells_offset_ + index * kCellBytes;
  }

  Segment* AllocateSegment();
  void FreeSegment(Segment* s);
  // The producer: links a spare or a new segment after its full one.
  void NextSegment();
  // The consumer: moves to the next segment and gives the old one back.
  void LeaveSegment();

  // --- set at construction, read by both ---
  const std::uint32_t segment_cells_;
  const std::uint32_t max_spare_segments_;
  const std::size_t cells_offset_;  // bytes from a segment's start to its first cell
  const std::size_t segment_bytes_;
  void (*const destroy_)(void*, std::uint32_t);
  RingConsumerWaker* const waker_;

  // --- the producer's line: the producer only ---
  alignas(64) Segment* tail_seg_;     // the segment the producer writes into
  std::uint64_t tail_base_ = 0;       // position of tail_seg_'s first cell
  std::uint64_t write_pos_ = 0;       // end of the committed entries
  std::uint64_t last_published_ = 0;  // the last value stored to published_
  std::uint32_t reserved_ = 0;        // cells of the open reservation, or 0
  Segment* oldest_;                   // the chain's front (oldest spare or the consumer's)
  std::uint64_t segments_taken_ = 0;  // segments taken off the chain's front
  std::uint64_t left_cached_ = 0;     // the producer's copy of segments_left_
  std::uint64_t segments_allocated_ = 0;
  std::uint64_t segments_freed_ = 0;

  // End of the published entries. Stored by the producer (release, or
  // seq_cst with a waker: step (a)); loaded by the consumer (acquire when its
  // copy runs out, seq_cst in HasPublishedForWait). Its own line: the
  // consumer's loads do not take the producer's private line.
  alignas(64) std::atomic<std::uint64_t> published_{0};

  // --- the consumer's line: the consumer only ---
  alignas(64) Segment* head_seg_;          // the segment the consumer reads
  std::uint64_t head_base_ = 0;            // position of head_seg_'s first cell
  std::uint64_t read_pos_ = 0;             // start of the oldest entry not popped
  std::uint64_t visible_ = 0;              // the consumer's copy of published_
  std::uint32_t front_cells_ = 0;          // cells of the entry Front returned
  std::uint64_t segments_left_local_ = 0;  // the value of segments_left_

  // Segments the consumer has left (each one a spare the producer may
  // reuse). Incremented (release store) by the consumer only; loaded
  // (acquire) by the producer only when its copy shows no spare. Its own
  // line, for the producer's rare loads.
  alignas(64) std::atomic<std::uint64_t> segments_left_{0};
};

}  // namespace depengine::internal
