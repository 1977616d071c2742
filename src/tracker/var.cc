#include "tracker/var.h"

#include <cassert>

namespace depengine {

void Var::Init(const internal::ThreadedEngine* owner) {
  engine = owner;
  deleted = false;
  running_reads = 0;
  write_running = false;
  queue_head = queue_tail = nullptr;
  failure.reset();
  magic.store(kLive, std::memory_order_relaxed);
}

bool Var::Append(internal::VarSlot* slot) {
  slot->next = nullptr;
  if (queue_head == nullptr && !write_running && (!slot->write() || running_reads == 0)) {
    if (slot->write()) {
      write_running = true;
    } else {
      ++running_reads;
    }
    return true;
  }
  if (queue_tail == nullptr) {
    queue_head = queue_tail = slot;
  } else {
    queue_tail->next = slot;
    queue_tail = slot;
  }
  return false;
}

void Var::CompleteRead(internal::GrantList* granted) {
  internal::SpinLockGuard guard(lock);
  assert(running_reads > 0 && !write_running);
  if (--running_reads == 0 && queue_head != nullptr) {
    // A waiting head is always a write: reads queue only behind a write.
    internal::VarSlot* s = queue_head;
    assert(s->write());
    queue_head = s->next;
    if (queue_head == nullptr) queue_tail = nullptr;
    write_running = true;
    granted->Add(s->owner());
  }
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
  GrantAfterWriteLocked(granted);
  return newly_failed;
}

void Var::GrantAfterWriteLocked(internal::GrantList* granted) {
  internal::VarSlot* s = queue_head;
  if (s == nullptr) return;
  if (s->write()) {
    queue_head = s->next;
    write_running = true;
    granted->Add(s->owner());
  } else {
    // Grant every reader up to the next writer. Owners are recorded, not
    // slots: a granted owner may finish and be recycled before we return.
    while (s != nullptr && !s->write()) {
      ++running_reads;
      granted->Add(s->owner());
      s = s->next;
    }
    queue_head = s;
  }
  if (queue_head == nullptr) queue_tail = nullptr;
}

}  // namespace depengine
