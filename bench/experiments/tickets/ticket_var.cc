// TicketVar: see ticket_var.h.
#include "tickets/ticket_var.h"

#include <cassert>
#include <utility>

namespace depengine::internal {

#ifdef DEPENGINE_TICKET_VAR_TEST_HOOK
void (*ticket_park_delay_for_testing)() = nullptr;
void (*ticket_complete_delay_for_testing)() = nullptr;
std::atomic<std::uint64_t> ticket_insert_steps_for_testing{0};
#endif

void TaskList::Grow() {
  auto** bigger = new TicketTask*[static_cast<std::size_t>(cap_) * 2];
  for (int i = 0; i < size_; ++i) bigger[i] = data_[i];
  if (data_ != inline_) delete[] data_;
  data_ = bigger;
  cap_ *= 2;
}

TicketUse TicketVar::StampRead() {
  reads_pushed_ = (reads_pushed_ + 1) & kReadMask;
  return TicketUse{this, writes_pushed_, 0, false};
}

TicketUse TicketVar::StampWrite() {
  const TicketUse u{this, writes_pushed_, reads_pushed_, true};
  ++writes_pushed_;
  reads_pushed_ = 0;
  return u;
}

void TicketVar::InsertLocked(TicketTask* t) {
  // A task taken from a queue parks near the newest end; one resumed on
  // another var (a multi-var task) parks near the oldest end, behind which
  // many newer tasks may wait already (W3's reduce on X, behind the next
  // rounds' reads). So the place is searched from both ends at once, one
  // step each: the cost is twice the distance to the nearer end.
  const TicketUse& u = UseOf(t);
  TicketTask* after = parked_tail_;   // insert after it when !Before(u, after)
  TicketTask* before = parked_head_;  // insert before it when Before(u, before)
  for (;;) {
    if (after == nullptr || !Before(u, UseOf(after))) break;
    if (Before(u, UseOf(before))) {
      after = before->park_prev;  // t goes first among the equal tickets' successors
      break;
    }
    after = after->park_prev;
    before = before->park_next;
#ifdef DEPENGINE_TICKET_VAR_TEST_HOOK
    ticket_insert_steps_for_testing.fetch_add(1, std::memory_order_relaxed);
#endif
  }
  t->park_prev = after;
  t->park_next = after != nullptr ? after->park_next : parked_head_;
  if (t->park_next != nullptr) {
    t->park_next->park_prev = t;
  } else {
    parked_tail_ = t;
  }
  if (after != nullptr) {
    after->park_next = t;
  } else {
    parked_head_ = t;
  }
}

bool TicketVar::TakeDueLocked(std::uint64_t state, TicketTask* self, TaskList* resumed) {
  bool self_due = false;
  // Sorted by ticket, so the due tasks are a prefix: the reads of the
  // current epoch, then its write once every one of them finished.
  while (parked_head_ != nullptr && IsDueAt(state, UseOf(parked_head_))) {
    TicketTask* t = parked_head_;
    parked_head_ = t->park_next;
    if (parked_head_ != nullptr) {
      parked_head_->park_prev = nullptr;
    } else {
      parked_tail_ = nullptr;
    }
    t->park_next = t->park_prev = nullptr;
    ++t->acquired;
    if (t == self) {
      self_due = true;
    } else {
      resumed->Push(t);
    }
  }
  if (parked_head_ == nullptr) has_parked_.store(false, std::memory_order_relaxed);
  return self_due;
}

bool TicketVar::Park(TicketTask* t, TaskList* resumed) {
#ifdef DEPENGINE_TICKET_VAR_TEST_HOOK
  if (ticket_park_delay_for_testing != nullptr) ticket_park_delay_for_testing();
#endif
  SpinLockGuard guard(park_lock_);
  InsertLocked(t);
  has_parked_.store(true, std::memory_order_seq_cst);
  // A completion that stored `state` before the flag was set did not look
  // at the list: whatever it made due, this thread takes.
  return TakeDueLocked(state_.load(std::memory_order_seq_cst), t, resumed);
}

void TicketVar::ResumeAfter(std::uint64_t stored, TaskList* resumed) {
  if (!has_parked_.load(std::memory_order_seq_cst)) return;
  SpinLockGuard guard(park_lock_);
  // With the value this completion stored, not a fresh load: a later
  // completion takes what it made due itself, so each parked task is taken
  // by the completion that made it due (a kAsync function then runs on
  // that completion's thread). What was due at `stored` is still due: a
  // parked task has not run.
  TakeDueLocked(stored, nullptr, resumed);
}

void TicketVar::CompleteRead(TaskList* resumed) {
  std::uint64_t s = state_.load(std::memory_order_relaxed);
  std::uint64_t next;
  // Reads finished wrap within their 31 bits instead of carrying into the
  // write count (see state_).
  do {
    next = (s & ~std::uint64_t{0xffffffff}) | (static_cast<std::uint32_t>(s + 1) & kReadMask);
  } while (
      !state_.compare_exchange_weak(s, next, std::memory_order_seq_cst, std::memory_order_relaxed));
#ifdef DEPENGINE_TICKET_VAR_TEST_HOOK
  if (ticket_complete_delay_for_testing != nullptr) ticket_complete_delay_for_testing();
#endif
  ResumeAfter(next, resumed);
}

void TicketVar::CompleteWrite(const TicketUse& u, TaskList* resumed) {
  assert(state_.load(std::memory_order_relaxed) == Pack(u.epoch, u.reads_before) &&
         "a write completes only while it is due");
  const std::uint64_t next = Pack(u.epoch + 1, 0);
  state_.store(next, std::memory_order_seq_cst);
#ifdef DEPENGINE_TICKET_VAR_TEST_HOOK
  if (ticket_complete_delay_for_testing != nullptr) ticket_complete_delay_for_testing();
#endif
  ResumeAfter(next, resumed);
}

bool TicketVar::SetFailure(FailurePtr f) {
  SpinLockGuard guard(park_lock_);
  const bool had_none = failure_ == nullptr;
  failure_ = std::move(f);
  return had_none;
}

FailurePtr TicketVar::Failure() const {
  SpinLockGuard guard(park_lock_);
  return failure_;
}

FailurePtr TicketVar::TakeFailure() {
  SpinLockGuard guard(park_lock_);
  return std::exchange(failure_, nullptr);
}

void TicketVar::ResetForReuse() {
  assert(parked_head_ == nullptr);
  writes_pushed_ = 0;
  reads_pushed_ = 0;
  state_.store(0, std::memory_order_relaxed);
  has_parked_.store(false, std::memory_order_relaxed);
  failure_.reset();
}

void TicketVar::StartAtForTesting(std::uint32_t writes, std::uint32_t reads) {
  writes_pushed_ = writes;
  reads_pushed_ = reads & kReadMask;
  state_.store(Pack(writes, reads & kReadMask), std::memory_order_relaxed);
}

int TicketVar::ParkedCountForTesting() const {
  SpinLockGuard guard(park_lock_);
  int n = 0;
  for (const TicketTask* t = parked_head_; t != nullptr; t = t->park_next) ++n;
  return n;
}

namespace {

// Takes t's uses from its cursor until one is not due; parks t there.
// Returns true when t holds all of them. Tasks a park found due go to
// `resumed` with their cursors advanced.
bool Drive(TicketTask* t, TaskList* resumed) {
  while (t->acquired < t->num_uses) {
    const TicketUse& u = t->uses[t->acquired];
    if (u.var->IsDue(u)) {
      ++t->acquired;
      continue;
    }
    if (!u.var->Park(t, resumed)) return false;
  }
  return true;
}

// Drives every task in `resumed` (and those their parks resume) as far as
// it goes; the ones that hold all their uses go to `ready`.
void DriveResumed(TaskList* resumed, TaskList* ready) {
  while (!resumed->empty()) {
    TicketTask* t = resumed->Pop();
    if (Drive(t, resumed)) ready->Push(t);
  }
}

}  // namespace

bool AcquireUses(TicketTask* t, TaskList* ready) {
  TaskList resumed;
  const bool holds_all = Drive(t, &resumed);
  DriveResumed(&resumed, ready);
  return holds_all;
}

void ReleaseUses(const TicketTask& t, TaskList* ready) {
  TaskList resumed;
  for (std::uint16_t i = 0; i < t.num_uses; ++i) {
    const TicketUse& u = t.uses[i];
    if (u.write) {
      u.var->CompleteWrite(u, &resumed);
    } else {
      u.var->CompleteRead(&resumed);
    }
  }
  DriveResumed(&resumed, ready);
}

}  // namespace depengine::internal
