// The ticket tracker on its own (experiments/tickets/ticket_var.h, step 1 of
// "Next: the engine on tickets" in docs/performance.md; not used by the
// engine): a use stamped on a var, checked, parked when its turn has not
// come, and finished, with no engine, no threads and no queue. The same three shapes
// as tracker_micro.cc times for the present tracker.
#include <memory>
#include <vector>

#include "micro/micro_engines.h"
#include "tickets/ticket_var.h"

namespace depengine::micro {
namespace {

using internal::AcquireUses;
using internal::ReleaseUses;
using internal::TaskList;
using internal::TicketTask;
using internal::TicketUse;
using internal::TicketVar;

// kBatch one-use tasks on one var.
class TicketTasks {
 public:
  TicketTasks() : uses_(kBatch), tasks_(kBatch) {
    for (std::size_t i = 0; i < tasks_.size(); ++i) {
      tasks_[i].uses = &uses_[i];
      tasks_[i].num_uses = 1;
    }
  }
  // Takes task i's ticket, as a push does.
  TicketTask& Stamp(TicketVar& var, int i, bool write) NO_THREAD_SAFETY_ANALYSIS {
    const auto k = static_cast<std::size_t>(i);
    var.push_lock.lock();
    uses_[k] = write ? var.StampWrite() : var.StampRead();
    var.push_lock.unlock();
    tasks_[k].acquired = 0;
    return tasks_[k];
  }

 private:
  std::vector<TicketUse> uses_;
  std::vector<TicketTask> tasks_;
};

// A write on a var with nothing pending: stamped, found due, finished.
void BM_TicketVarWriteOnIdleVar(benchmark::State& state) {
  auto var = std::make_unique<TicketVar>();
  TicketTasks tasks;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      TicketTask& t = tasks.Stamp(*var, i, true);
      TaskList ready;
      if (!AcquireUses(&t, &ready)) state.SkipWithError("a write on an idle var waited");
      ReleaseUses(t, &ready);
    }
  }
  ReportPerPush(state);
}
BENCHMARK(BM_TicketVarWriteOnIdleVar)->UseRealTime();

// A chain: kBatch writes stamped and checked (all but the first park, in
// order), then finished one after another, each completion resuming the next.
void BM_TicketVarWriteChain(benchmark::State& state) {
  auto var = std::make_unique<TicketVar>();
  TicketTasks tasks;
  std::vector<TicketTask*> chain(kBatch);
  for (auto _ : state) {
    TaskList ready;
    for (int i = 0; i < kBatch; ++i) {
      chain[static_cast<std::size_t>(i)] = &tasks.Stamp(*var, i, true);
      if (AcquireUses(chain[static_cast<std::size_t>(i)], &ready) != (i == 0)) {
        state.SkipWithError("only the chain's first write may be due at once");
      }
    }
    for (int i = 0; i < kBatch; ++i) {
      TaskList next;
      ReleaseUses(*chain[static_cast<std::size_t>(i)], &next);
      if (next.size() != (i + 1 < kBatch ? 1 : 0))
        state.SkipWithError("the chain did not advance by one");
    }
  }
  ReportPerPush(state);
}
BENCHMARK(BM_TicketVarWriteChain)->UseRealTime();

// W3's and W4's shape: a run of reads parks behind a write, the write's
// completion resumes the whole run, and the reads finish.
void BM_TicketVarReadRunBehindWrite(benchmark::State& state) {
  auto var = std::make_unique<TicketVar>();
  TicketTasks writer_task;
  TicketTasks readers;
  std::vector<TicketTask*> reads(kBatch);
  for (auto _ : state) {
    TaskList ready;
    TicketTask& writer = writer_task.Stamp(*var, 0, true);
    if (!AcquireUses(&writer, &ready)) state.SkipWithError("the write waited");
    for (int i = 0; i < kBatch; ++i) {
      reads[static_cast<std::size_t>(i)] = &readers.Stamp(*var, i, false);
      if (AcquireUses(reads[static_cast<std::size_t>(i)], &ready))
        state.SkipWithError("a read ran before the write");
    }
    TaskList run;
    ReleaseUses(writer, &run);
    if (run.size() != kBatch) state.SkipWithError("the write did not resume the whole run");
    for (TicketTask* r : reads) {
      TaskList none;
      ReleaseUses(*r, &none);
    }
  }
  ReportPerPush(state);
}
BENCHMARK(BM_TicketVarReadRunBehindWrite)->UseRealTime();

}  // namespace
}  // namespace depengine::micro
