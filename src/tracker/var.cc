#include "tracker/var.h"

#include <cassert>

#include "common/object_pool.h"
#include "common/prefetch.h"

namespace depengine {
namespace {

using GroupPool = internal::ObjectPool<internal::ReaderGroup>;

}  // namespace

void Var::ReserveGroups(std::size_t reads) {
  // Each read starts at most one group.
  GroupPool::Reserve(reads);
}

void Var::AddUse(internal::VarSlot** head, internal::VarSlot** tail, internal::VarSlot* slot) {
  internal::VarSlot* const last = *tail;
  // A read behind a read (a slot or a group) continues a run: it goes into
  // the group at the tail, or a new one.
  if (!slot->write() && last != nullptr && !last->write()) {
    if (last->is_group()) {
      auto* group = static_cast<internal::ReaderGroup*>(last);
      if (group->size < internal::ReaderGroup::kCapacity) {
        group->owners[group->size++] = slot->owner();
        return;
      }
    }
    // Reserved by the pusher (ReserveGroups), so this does not throw.
    internal::ReaderGroup* group = GroupPool::Allocate();
    group->size = 1;
    group->owners[0] = slot->owner();
    slot = group;
  }
  slot->set_next(nullptr);
  if (last == nullptr) {
    *head = slot;
  } else {
    last->set_next(slot);
  }
  *tail = slot;
}

void Var::Init(const internal::ThreadedEngine* owner) {
  engine = owner;
  deleted.store(false, std::memory_order_relaxed);
  scratch.store(false, std::memory_order_relaxed);
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

// Grants `slot` at once when nothing waits and the state allows it. The
// FIFO test is needed even when the caller saw `state` idle: Append reads
// that hint under push_lock only, and a completion that pulls the inbox into
// the FIFO (under `lock`) publishes the new state after it has let go of
// push_lock, so the pusher may read "idle", then get `lock` and find the FIFO
// full (VarTest.APushThatSawTheVarIdleTooEarlyStillQueuesBehindTheFifo fails
// without this test).
bool Var::TryGrantNowLocked(internal::VarSlot* slot) {
  if (queue_head != nullptr || write_running || (slot->write() && running_reads > 0)) return false;
  if (slot->write()) {
    write_running = true;
  } else {
    ++running_reads;
  }
  return true;
}

bool Var::GrantOrQueueLocked(internal::VarSlot* slot) {
  if (TryGrantNowLocked(slot)) return true;
  QueueLocked(slot);
  PublishStateLocked();  // not kIdle: the FIFO is not empty
  return false;
}

void Var::QueueLocked(internal::VarSlot* slot) {
  slot->set_next(nullptr);  // a read in a group stays unlinked (PrefetchSlots reads it)
  AddUse(&queue_head, &queue_tail, slot);
  ++queue_len;
  // A long FIFO is a chain the worker is draining: later pushes should go to
  // the inbox and leave this line to the worker (a hint; stored only when it
  // changes, since it lives on the pushers' line).
  if (queue_len >= kLongBacklog && !chain_mode.load(std::memory_order_relaxed)) {
    chain_mode.store(true, std::memory_order_relaxed);
  }
}

void Var::PullInboxLocked() {
  internal::SpinLockGuard push_guard(push_lock);
  if (inbox_head != nullptr) {
    // Inbox slots follow everything in the FIFO: slots reach the FIFO
    // directly only while the inbox is empty.
    if (queue_tail == nullptr) {
      queue_head = inbox_head;
    } else {
      queue_tail->set_next(inbox_head);
    }
    queue_tail = inbox_tail;
    queue_len += inbox_len;
    inbox_head = inbox_tail = nullptr;
    inbox_len = 0;
  }
  inbox_pending.store(false, std::memory_order_relaxed);
}

bool Var::PublishStateLocked() {
  const GrantState now = queue_len >= kLongBacklog ? kBacklog
                         : queue_head != nullptr   ? kBusy
                                                   : kIdle;
  if (state.load(std::memory_order_relaxed) == now) return false;
  // A store of kIdle is seq_cst: SettleLocked follows it with a load of
  // inbox_pending, against a pusher's store of inbox_pending and load of
  // state. The other states promise a completion and need no such order.
  state.store(now, now == kIdle ? std::memory_order_seq_cst : std::memory_order_relaxed);
  return now == kIdle;
}

Var::AppendResult Var::Append(internal::VarSlot* slot, bool* granted) {
  slot->set_next(nullptr);  // a read in a group stays unlinked (PrefetchSlots reads it)
  *granted = false;
  if (inbox_head != nullptr) {
    // Whoever pulls the earlier uses (a completion, or that use's pusher
    // settling) takes push_lock after us, so it pulls this one too.
    AddUse(&inbox_head, &inbox_tail, slot);
    ++inbox_len;
    return AppendResult::kInbox;
  }
  const GrantState seen = state.load(std::memory_order_relaxed);  // a hint; see AppendToEmptyInbox
  if (seen != kBacklog && chain_mode.load(std::memory_order_relaxed)) {
    chain_mode.store(false, std::memory_order_relaxed);  // the chain drained (see PushSingle)
  }
  // Anything waits in the FIFO: its head waits on a running function, whose
  // completion will pull the inbox, so the slot can start the inbox without
  // taking the grant side's line from the workers using it. Taking it here
  // made the pushes of W3 (a fan of 64 and its reduce, on vars whose
  // functions are running) fight the workers' completions for those lines:
  // W3 took 1.2-1.4x as long (two sets of interleaved rounds), W4 at T = 0
  // about 1.15x.
  if (seen != kIdle) return AppendToEmptyInbox(slot);
  // The var is idle, or only runs functions: take the grant side's lock, if
  // free, and grant or queue directly, one transfer of a line the
  // completion needs back anyway (a push that finds the var idle would
  // otherwise take it twice: to start the inbox, then to settle it).
  // try_lock only: the grant side takes push_lock while holding lock
  // (PullInboxLocked), so blocking here could deadlock.
  if (lock.try_lock()) {
    *granted = GrantOrQueueLocked(slot);
    lock.unlock();
    return AppendResult::kDone;
  }
  return AppendToEmptyInbox(slot);
}

Var::AppendResult Var::AppendToEmptyInbox(internal::VarSlot* slot) {
  AddUse(&inbox_head, &inbox_tail, slot);
  inbox_len = 1;
  inbox_pending.store(true, std::memory_order_seq_cst);
  // seq_cst, after the flag: see SettleLocked.
  const GrantState now = state.load(std::memory_order_seq_cst);
  return now != kIdle ? AppendResult::kInbox : AppendResult::kNeedsSettle;
}

bool Var::PrepareSingleLocked(internal::GrantList* granted) {
  // Slots in the inbox were pushed earlier (or concurrently): pull them
  // first, so this push goes behind them. acquire pairs with the seq_cst
  // store made under push_lock; a flag set concurrently belongs to a
  // concurrent push, which may go either side of this one.
  if (inbox_pending.load(std::memory_order_acquire)) PullInboxLocked();
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

bool Var::QueueSingleLocked(internal::VarSlot* slot, internal::GrantList* granted) {
  // The common case: nothing waits, so the slot is granted here and no
  // state changes (a running write does not leave kIdle; see GrantState).
  if (queue_head == nullptr) return GrantOrQueueLocked(slot);
  QueueLocked(slot);
  GrantFromQueueLocked(granted);  // the pulled inbox may hold grantable slots
  PublishStateLocked();
  return false;
}

void Var::Settle(internal::GrantList* granted) {
  internal::SpinLockGuard guard(lock);
  SettleLocked(granted);
}

namespace {

inline void GrantOwner(internal::OprBlock* owner, internal::GrantList* granted) {
  // The caller updates owner->wait right after: starting every owner's
  // fetch here lets the misses of a wide grant (W3's fan) overlap instead of
  // stalling one locked update after another.
  internal::PrefetchForWrite(owner);
  granted->Add(owner);
}

}  // namespace

void Var::GrantFromQueueLocked(internal::GrantList* granted) {
  internal::VarSlot* s = queue_head;
  // Owners are recorded, not slots: a granted owner may finish and be
  // recycled before the caller hands the grants out.
  while (s != nullptr && !write_running) {
    if (s->write()) {
      if (running_reads > 0) break;
      write_running = true;
      GrantOwner(s->owner(), granted);
      s = s->next();
      --queue_len;
      break;
    }
    // Reads (a slot, or a group) join whatever reads run: nothing waits
    // ahead of them.
    internal::VarSlot* const next = s->next();
    const bool write_follows = s->next_is_write();
    if (s->is_group()) {
      auto* group = static_cast<internal::ReaderGroup*>(s);
      running_reads += static_cast<int>(group->size);
      queue_len -= group->size;
      for (std::uint32_t i = 0; i < group->size; ++i) GrantOwner(group->owners[i], granted);
      GroupPool::Free(group);
    } else {
      ++running_reads;
      GrantOwner(s->owner(), granted);
      --queue_len;
    }
    s = next;
    // A write waits for these reads: stop without touching its cold slot.
    if (write_follows) break;
  }
  queue_head = s;
  if (queue_head == nullptr) {
    queue_tail = nullptr;
  } else {
    // The element the next grant reads was usually pushed long ago (the
    // pusher runs ahead) and is cold: fetch it while the functions granted
    // now run. Both ends of a slot: a multi-var block's slots are 24 bytes
    // apart, so a slot may straddle two lines (its link in one, its owner in
    // the other). A group's first line holds its first three owners.
    __builtin_prefetch(s);
    __builtin_prefetch(reinterpret_cast<const char*>(s) + sizeof(internal::VarSlot) - 1);
  }
}

// Why no slot is left in the inbox. A pusher that starts the inbox stores
// inbox_pending = true and then loads `state`. If it reads kIdle it settles
// the var itself. Otherwise it relies on a completion: any other state means
// the FIFO is not empty, so its head waits on a running function, whose
// completion ends here. Here, each time the FIFO runs empty, the settle
// either stores kIdle (seq_cst) and then loads inbox_pending (seq_cst), or
// finds kIdle already stored by an earlier settle that did so. In the single
// order of those four accesses, either the pusher's load of state follows
// the store of kIdle, and the pusher settles the var itself, or that
// settle's load of inbox_pending follows the pusher's store, and it pulls
// the slot. Slots appended behind a non-empty inbox are pulled with it (the
// pull takes push_lock after their append). The flag spares a completion
// that finds the var idle a trip to the pushers' cache line.
void Var::SettleLocked(internal::GrantList* granted) {
  for (;;) {
    GrantFromQueueLocked(granted);
    if (queue_head != nullptr) {
      PublishStateLocked();
      return;
    }
    const bool stored_idle = PublishStateLocked();
    // After an earlier store of kIdle, a set flag belongs to a pusher that
    // settles itself: pulling for it is optional, so a relaxed look will do.
    if (!inbox_pending.load(stored_idle ? std::memory_order_seq_cst : std::memory_order_relaxed)) {
      return;
    }
    PullInboxLocked();
    if (queue_head == nullptr) return;
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
