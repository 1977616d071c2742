#include "tracker/var.h"

#include <cassert>

namespace depengine {

void Var::Init(const internal::ThreadedEngine* owner) {
  engine = owner;
  deleted.store(false, std::memory_order_relaxed);
  inbox_head = inbox_tail = nullptr;
  inbox_len = 0;
  chain_mode.store(false, std::memory_order_relaxed);
  running_reads = 0;
  write_running = false;
  queue_head = queue_tail = nullptr;
  queue_len = 0;
  state.store(kIdle, std::memory_order_relaxed);
  inbox_pending.store(false, std::memory_order_relaxed);
  failure.reset();
  magic.store(kLive, std::memory_order_relaxed);
}

Var::AppendResult Var::Append(internal::VarSlot* slot, bool* granted) {
  slot->next = nullptr;
  *granted = false;
  if (inbox_head != nullptr) {
    // Whoever pulls the earlier slots (a completion, or that slot's pusher
    // settling) takes push_lock after us, so it pulls this one too.
    inbox_tail->next = slot;
    inbox_tail = slot;
    ++inbox_len;
    return AppendResult::kInbox;
  }
  // Fast path: take the grant side's lock, if free, and queue or grant
  // directly: one transfer of the grant side's line, which the completion
  // will need back anyway. Not in chain mode while the FIFO is long: a
  // pusher running ahead of a chain would pull that line from the worker on
  // every push. try_lock only: the grant side takes push_lock while holding
  // lock (SettleLocked), so blocking here could deadlock.
  if (chain_mode.load(std::memory_order_relaxed)) {
    if (state.load(std::memory_order_relaxed) == kBacklog) return AppendToEmptyInbox(slot);
    chain_mode.store(false, std::memory_order_relaxed);
  }
  if (lock.try_lock()) {
    if (queue_head == nullptr && !write_running && (!slot->write() || running_reads == 0)) {
      if (slot->write()) {
        write_running = true;
      } else {
        ++running_reads;
      }
      *granted = true;
    } else {
      if (queue_tail == nullptr) {
        queue_head = queue_tail = slot;
      } else {
        queue_tail->next = slot;
        queue_tail = slot;
      }
      ++queue_len;
      chain_mode.store(queue_len >= kLongBacklog, std::memory_order_relaxed);
    }
    PublishStateLocked();
    lock.unlock();
    return AppendResult::kDone;
  }
  return AppendToEmptyInbox(slot);
}

Var::AppendResult Var::AppendToEmptyInbox(internal::VarSlot* slot) {
  inbox_head = inbox_tail = slot;
  inbox_len = 1;
  inbox_pending.store(true, std::memory_order_seq_cst);
  // seq_cst, after the flag: see SettleLocked.
  const GrantState now = state.load(std::memory_order_seq_cst);
  return now != kIdle ? AppendResult::kInbox : AppendResult::kNeedsSettle;
}

bool Var::PrepareSingleLocked(internal::GrantList* granted) {
  // Slots in the inbox were pushed earlier (or concurrently): pull them
  // first. They follow everything in the FIFO, which was appended only
  // while the inbox was empty. acquire pairs with the seq_cst store made
  // under push_lock; a flag set concurrently belongs to a concurrent push,
  // which may go either side of this one.
  if (inbox_pending.load(std::memory_order_acquire)) {
    internal::SpinLockGuard push_guard(push_lock);
    if (inbox_head != nullptr) {
      if (queue_tail == nullptr) {
        queue_head = inbox_head;
      } else {
        queue_tail->next = inbox_head;
      }
      queue_tail = inbox_tail;
      queue_len += inbox_len;
      inbox_head = inbox_tail = nullptr;
      inbox_len = 0;
    }
    inbox_pending.store(false, std::memory_order_relaxed);
  }
  // A deletion sets `deleted` before it publishes its slot (under lock, or
  // in the inbox just pulled under push_lock), so a push ordered after it
  // sees the flag here.
  if (deleted.load(std::memory_order_relaxed)) {
    GrantFromQueueLocked(granted);
    PublishStateLocked();
    return false;
  }
  return true;
}

void Var::QueueSingleLocked(internal::VarSlot* slot, internal::GrantList* granted) {
  slot->next = nullptr;
  if (queue_tail == nullptr) {
    queue_head = queue_tail = slot;
  } else {
    queue_tail->next = slot;
    queue_tail = slot;
  }
  ++queue_len;
  GrantFromQueueLocked(granted);
  PublishStateLocked();
}

void Var::Settle(internal::GrantList* granted) {
  internal::SpinLockGuard guard(lock);
  SettleLocked(granted);
}

void Var::GrantFromQueueLocked(internal::GrantList* granted) {
  internal::VarSlot* s = queue_head;
  // Owners are recorded, not slots: a granted owner may finish and be
  // recycled before the caller hands the grants out.
  while (s != nullptr && !write_running) {
    if (s->write()) {
      if (running_reads > 0) break;
      write_running = true;
      granted->Add(s->owner());
      s = s->next;
      --queue_len;
      break;
    }
    ++running_reads;
    granted->Add(s->owner());
    s = s->next;
    --queue_len;
  }
  queue_head = s;
  if (queue_head == nullptr) queue_tail = nullptr;
}

// Why no slot is left in the inbox: a pusher that appended to an empty
// inbox stored inbox_pending = true and then loaded `state`; if it read a
// state other than kIdle, it relies on a later SettleLocked to pull its
// slot. That state means a write runs or slots wait on running functions, so
// a completion is certain to come, and every completion ends here with the
// var either not idle (then a later one comes) or idle: state == kIdle was
// stored (seq_cst) by this or an earlier settle, which then loads
// inbox_pending (seq_cst). In the single order of those four accesses,
// either the pusher's load of state follows the store of kIdle, and the
// pusher settles the var itself, or the settle's load of inbox_pending
// follows the pusher's store, and it pulls the slot. Slots appended behind
// a non-empty inbox are pulled with it (the pull takes push_lock after
// their append). The flag spares a completion that finds the var idle a
// trip to the pushers' cache line.
void Var::SettleLocked(internal::GrantList* granted) {
  for (;;) {
    GrantFromQueueLocked(granted);
    PublishStateLocked();
    if (write_running || queue_head != nullptr) return;
    if (!inbox_pending.load(std::memory_order_seq_cst)) return;
    internal::VarSlot* first;
    internal::VarSlot* last;
    std::uint32_t len;
    {
      internal::SpinLockGuard push_guard(push_lock);
      first = inbox_head;
      last = inbox_tail;
      len = inbox_len;
      inbox_head = inbox_tail = nullptr;
      inbox_len = 0;
      inbox_pending.store(false, std::memory_order_relaxed);
    }
    if (first == nullptr) return;
    queue_head = first;  // the FIFO is empty here
    queue_tail = last;
    queue_len = len;
  }
}

void Var::CompleteRead(internal::GrantList* granted) {
  internal::SpinLockGuard guard(lock);
  assert(running_reads > 0 && !write_running);
  --running_reads;
  SettleLocked(granted);
}

bool Var::CompleteWrite(const internal::FailurePtr& fail, internal::GrantList* granted) {
  internal::SpinLockGuard guard(lock);
  assert(write_running && running_reads == 0);
  write_running = false;
  bool newly_failed = false;
  if (fail && !failure) {
    failure = fail;
    newly_failed = true;
  } else if (fail) {
    failure = fail;
  }
  SettleLocked(granted);
  return newly_failed;
}

}  // namespace depengine
