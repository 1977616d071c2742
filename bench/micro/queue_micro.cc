// A worker pool's ready queue on its own (exec/task_queue.h): pushes and
// pops of ready blocks on one thread, without the engine around them.
#include <vector>

#include "exec/task_queue.h"
#include "micro/micro_engines.h"
#include "tracker/opr_block.h"

namespace depengine::micro {
namespace {

using internal::OprBlock;
using internal::TaskQueue;

// Takes the kBatch blocks just pushed back out.
void PopBatch(TaskQueue& queue, benchmark::State& state) {
  for (int i = 0; i < kBatch; ++i) {
    if (queue.Pop([] {}) == nullptr) state.SkipWithError("the queue lost a block");
  }
}

// kBatch pushes, one at a time (Dispatch from a pusher), then kBatch pops.
void BM_QueuePushPop(benchmark::State& state) {
  TaskQueue queue{std::chrono::microseconds(EngineOptions::kDefaultWorkerSpinUs)};
  std::vector<OprBlock> blocks(kBatch);
  for (auto _ : state) {
    for (OprBlock& b : blocks) queue.Push(&b);
    PopBatch(queue, state);
  }
  ReportPerPush(state);
}
BENCHMARK(BM_QueuePushPop)->UseRealTime();

// The same blocks pushed as one batch (a completion that makes several
// functions ready queues them with one tail exchange).
void BM_QueuePushBatchPop(benchmark::State& state) {
  TaskQueue queue{std::chrono::microseconds(EngineOptions::kDefaultWorkerSpinUs)};
  std::vector<OprBlock> blocks(kBatch);
  std::vector<OprBlock*> pointers;
  for (OprBlock& b : blocks) pointers.push_back(&b);
  for (auto _ : state) {
    queue.PushBatch(pointers.data(), kBatch);
    PopBatch(queue, state);
  }
  ReportPerPush(state);
}
BENCHMARK(BM_QueuePushBatchPop)->UseRealTime();

// Ready blocks of mixed priorities: the heap's path.
void BM_QueuePushPopPriorities(benchmark::State& state) {
  TaskQueue queue{std::chrono::microseconds(EngineOptions::kDefaultWorkerSpinUs)};
  std::vector<OprBlock> blocks(kBatch);
  for (int i = 0; i < kBatch; ++i) blocks[i].priority = i % 7 - 3;
  for (auto _ : state) {
    for (OprBlock& b : blocks) queue.Push(&b);
    PopBatch(queue, state);
  }
  ReportPerPush(state);
}
BENCHMARK(BM_QueuePushPopPriorities)->UseRealTime();

}  // namespace
}  // namespace depengine::micro
