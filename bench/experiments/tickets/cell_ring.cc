// CellRing and RingConsumerWaker: the slow paths (segment switches, the
// sleep, construction and destruction). See cell_ring.h.
#include "tickets/cell_ring.h"

#include <climits>
#include <cstdlib>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace depengine::internal {

namespace {

// A futex on a std::atomic<uint32_t> needs it to be the bare 32-bit word.
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);

}  // namespace

// The sleep: a private futex on epoch_ (Linux), which returns at once when
// epoch_ no longer holds `epoch`, atomically with going to sleep; elsewhere
// std::atomic::wait, which gives the same guarantee.
void RingConsumerWaker::WaitWhileEpoch(std::uint32_t epoch) {
  while (epoch_.load(std::memory_order_seq_cst) == epoch) {
#if defined(__linux__)
    syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&epoch_), FUTEX_WAIT_PRIVATE, epoch,
            nullptr, nullptr, 0);
#else
    epoch_.wait(epoch, std::memory_order_seq_cst);
#endif
  }
}

void RingConsumerWaker::WakeEpoch() {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&epoch_), FUTEX_WAKE_PRIVATE, 1, nullptr,
          nullptr, 0);
#else
  epoch_.notify_one();
#endif
}

CellRing::CellRing(const CellRingOptions& options)
    : segment_cells_(options.segment_cells),
      max_spare_segments_(options.max_spare_segments),
      segment_bytes_(kCellBytes + std::size_t{options.segment_cells} * kCellBytes),
      destroy_(options.destroy),
      waker_(options.waker) {
  const std::uint32_t s = options.segment_cells;
  if (destroy_ == nullptr || s < kMaxEntryCells || (s & (s - 1)) != 0) std::abort();
  tail_seg_ = AllocateSegment();
  ClearWord(HeaderAt(tail_seg_, 0));  // the consumer's first look
  oldest_ = tail_seg_;
  head_seg_ = tail_seg_;
  published_seg_ = tail_seg_;
}

CellRing::~CellRing() {
  assert(reserved_ == 0);
  // Destroy the committed entries not popped, oldest first (published or
  // not: the walk goes by the cell counts).
  Segment* seg = head_seg_;
  std::uint64_t base = head_base_;
  WalkEntries(seg, base, read_pos_, write_pos_,
              [&](Header* h, std::uint64_t) { destroy_(Payload(h), h->cells); });
  // Free the whole chain, spares first.
  for (Segment* s = oldest_; s != nullptr;) {
    Segment* next = s->next.load(std::memory_order_relaxed);
    FreeSegment(s);
    s = next;
  }
}

void CellRing::Publish() {
  assert(reserved_ == 0);
  if (published_pos_ == write_pos_) return;
  // Write the words of the committed entries from the last published one,
  // oldest first. The consumer may take each as soon as it is written; it
  // never looks past the first one not yet written.
  WalkEntries(published_seg_, published_base_, published_pos_, write_pos_,
              [](Header* h, std::uint64_t pos) {
                Word(h).store(pos + 1, std::memory_order_release);  // (a)
              });
  published_pos_ = write_pos_;
  if (waker_ != nullptr) waker_->Notify();
}

CellRing::Segment* CellRing::AllocateSegment() {
  void* raw = ::operator new (segment_bytes_, std::align_val_t{kCellBytes});
  auto* s = static_cast<Segment*>(raw);
  new (&s->next) std::atomic<Segment*>(nullptr);
  ++segments_allocated_;
  return s;
}

void CellRing::FreeSegment(Segment* s) {
  s->next.~atomic();
  ::operator delete (static_cast<void*>(s), std::align_val_t{kCellBytes});
}

void CellRing::SkipToNextSegment(std::uint64_t index) {
  Segment* full = tail_seg_;
  const std::uint64_t pos = write_pos_;
  NextSegment();  // links the next segment first: a consumer past the marker finds it
  if (index < segment_cells_) {
    Header* marker = HeaderAt(full, index);
    marker->cells = 0;
    // Published at once: the consumer reaches it only after every entry
    // before it, so an unpublished one still stops it there.
    Word(marker).store(pos + 1, std::memory_order_release);
  }
  if (published_pos_ == pos) {  // everything before was published: so is the marker
    published_pos_ = write_pos_;
    published_seg_ = tail_seg_;
    published_base_ = tail_base_;
  }
}

void CellRing::NextSegment() {
  // Spares are the first (segments_left_ - segments_taken_) segments of the
  // chain; reload the consumer's count only when the cached one has none.
  if (segments_taken_ == left_cached_)
    left_cached_ = segments_left_.load(std::memory_order_acquire);
  Segment* s;
  if (segments_taken_ < left_cached_) {
    // Spares beyond max_spare_segments_ are freed, two per switch: a drained
    // burst gives its memory back over the next switches, never in one long
    // pause. (The count is the producer's copy, so it shrinks geometrically
    // over a few reloads.) A working set larger than the limit frees and
    // allocates a segment per switch: one malloc per segment_cells entries.
    for (int freed = 0;
         freed < 2 && left_cached_ - segments_taken_ > std::uint64_t{max_spare_segments_} + 1;
         ++freed) {
      Segment* surplus = oldest_;
      oldest_ = surplus->next.load(std::memory_order_relaxed);
      ++segments_taken_;
      FreeSegment(surplus);
      ++segments_freed_;
    }
    s = oldest_;
    oldest_ = s->next.load(std::memory_order_relaxed);
    ++segments_taken_;
    s->next.store(nullptr, std::memory_order_relaxed);  // the consumer left it
  } else {
    s = AllocateSegment();
  }
  ClearWord(HeaderAt(s, 0));  // before the link (release) shows it to the consumer
  tail_seg_->next.store(s, std::memory_order_release);
  tail_seg_ = s;
  tail_base_ += segment_cells_;
  write_pos_ = tail_base_;
}

void CellRing::LeaveSegment(Segment* next) {
  head_seg_ = next;
  head_base_ += segment_cells_;
  // The last access to the old segment (its link, just read) comes before
  // this store.
  segments_left_.store(++segments_left_local_, std::memory_order_release);
}

}  // namespace depengine::internal
