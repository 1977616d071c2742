// The dependency tracker on its own (tracker/var.h): a use appended to a
// var, granted, and finished, with no engine, no threads and no queue. What
// is left is the tracker's own cost per use, the part of a push and of a
// completion that depends on the var's state.
#include <deque>
#include <memory>
#include <vector>

#include "micro/micro_engines.h"
#include "tracker/opr_block.h"
#include "tracker/var.h"

namespace depengine::micro {
namespace {

using internal::GrantList;
using internal::OprBlock;
using internal::VarSlot;

// kBatch owners with one slot each on `var`.
struct Uses {
  Uses(Var* var, bool write) : owners(kBatch) {
    for (OprBlock& owner : owners) slots.emplace_back(var, &owner, write);
  }
  std::vector<OprBlock> owners;
  std::deque<VarSlot> slots;  // stable addresses
};

std::unique_ptr<Var> NewVar() {
  auto var = std::make_unique<Var>();
  var->Init(nullptr);
  return var;
}

// The general push path (Enqueue): Append under push_lock, Settle if asked.
bool Append(Var& var, VarSlot* slot, GrantList* granted) NO_THREAD_SAFETY_ANALYSIS {
  bool self = false;
  var.push_lock.lock();
  const Var::AppendResult result = var.Append(slot, &self);
  var.push_lock.unlock();
  if (result == Var::AppendResult::kNeedsSettle) var.Settle(granted);
  return self;
}

// A write on an idle var, through the general push path: granted at once
// and finished; nothing ever waits.
void BM_VarWriteOnIdleVar(benchmark::State& state) {
  auto var = NewVar();
  Uses uses(var.get(), true);
  for (auto _ : state) {
    for (VarSlot& slot : uses.slots) {
      GrantList granted;
      if (!Append(*var, &slot, &granted)) state.SkipWithError("a write on an idle var waited");
      var->CompleteWrite(nullptr, &granted);
    }
  }
  ReportPerPush(state);
}
BENCHMARK(BM_VarWriteOnIdleVar)->UseRealTime();

// A chain behind a running write: kBatch writes appended (each waits), then
// finished one after another, each completion granting the next.
void BM_VarWriteChain(benchmark::State& state) {
  auto var = NewVar();
  Uses uses(var.get(), true);
  for (auto _ : state) {
    GrantList granted;
    for (VarSlot& slot : uses.slots) Append(*var, &slot, &granted);
    // The first was granted at push; each completion grants the next.
    for (int i = 0; i < kBatch; ++i) {
      GrantList next;
      var->CompleteWrite(nullptr, &next);
      if (next.size != (i + 1 < kBatch ? 1 : 0)) state.SkipWithError("the chain did not advance by one");
    }
  }
  ReportPerPush(state);
}
BENCHMARK(BM_VarWriteChain)->UseRealTime();

// W3's and W4's shape: a run of reads waits behind a write (in ReaderGroups),
// the write's completion grants the whole run, and the reads finish.
void BM_VarReadRunBehindWrite(benchmark::State& state) {
  auto var = NewVar();
  OprBlock writer_owner;
  VarSlot writer(var.get(), &writer_owner, true);
  Uses readers(var.get(), false);
  for (auto _ : state) {
    GrantList granted;
    if (!Append(*var, &writer, &granted)) state.SkipWithError("the write waited");
    Var::ReserveGroups(kBatch);
    for (VarSlot& slot : readers.slots) Append(*var, &slot, &granted);
    GrantList run;
    var->CompleteWrite(nullptr, &run);
    if (run.size != kBatch) state.SkipWithError("the write did not grant the whole run");
    for (int i = 0; i < kBatch; ++i) {
      GrantList none;
      var->CompleteRead(&none);
    }
  }
  ReportPerPush(state);
}
BENCHMARK(BM_VarReadRunBehindWrite)->UseRealTime();

}  // namespace
}  // namespace depengine::micro
