// Semantics point 6, priority: among ready functions waiting in the same
// pool, a higher priority starts first. The naive engine runs each function
// inline, at push, in push order.
//
// Method: block every worker of the pool with Gates, queue functions of
// different priorities, then open one gate: that single worker starts the
// queued functions one by one, so their start order is the pool's order.
#include <algorithm>
#include <memory>
#include <mutex>
#include <vector>

#include "engine_fixture.h"

namespace depengine::test {
namespace {

using ::testing::ElementsAreArray;

class PriorityTest : public EngineTest {
 protected:
  // Workers of the pool that `prop` on CPU(0) goes to.
  int PoolSize(FnProperty prop) const {
    if (kind() == EngineKind::kPerDevice && prop == FnProperty::kCPUPrioritized) {
      return Options().cpu_priority_threads;
    }
    return workers();
  }

  struct StartLog {
    std::mutex mu;
    std::vector<int> order;  // guarded by mu
    Counter count;
    void Add(int p) {
      {
        std::lock_guard<std::mutex> lock(mu);
        order.push_back(p);
      }
      count.Add();
    }
    std::vector<int> Get() {
      std::lock_guard<std::mutex> lock(mu);
      return order;
    }
  };

  void CheckQueuedOrder(FnProperty prop) {
    const int pool = PoolSize(prop);
    std::vector<std::unique_ptr<Gate>> gates;
    for (int i = 0; i < pool; ++i) {
      gates.push_back(std::make_unique<Gate>());
      engine().PushSync(gates.back()->Body(), Context::CPU(), {}, {}, prop);
    }
    for (auto& g : gates) ASSERT_TRUE(g->WaitStarted()) << "a pool worker never started";
    StartLog log;
    const std::vector<int> priorities = {-5, 0, 7, 3, 100, -1, 42, kMaxPriority, kMinPriority, 1};
    for (int p : priorities) {
      engine().PushSync([&log, p](RunContext) { log.Add(p); }, Context::CPU(), {}, {}, prop, p);
    }
    gates[0]->Open();
    EXPECT_TRUE(log.count.WaitAtLeast(static_cast<int>(priorities.size())));
    for (auto& g : gates) g->Open();
    engine().WaitForAll();
    std::vector<int> expected = priorities;
    std::sort(expected.rbegin(), expected.rend());
    EXPECT_THAT(log.Get(), ElementsAreArray(expected));
    for (auto& g : gates) EXPECT_FALSE(g->TimedOut());
  }

  // One completion makes several functions ready at once: the most urgent
  // starts first, even when a less urgent one was made ready before it and
  // could have run next on the same worker.
  void CheckSuccessorOrder(FnProperty prop) {
    StartLog log;
    std::vector<std::unique_ptr<Gate>> gates;
    DrainGuard drain(engine());
    VarHandle v = engine().NewVariable();
    for (int i = 0; i < PoolSize(prop); ++i) {
      gates.push_back(std::make_unique<Gate>());
      engine().PushSync(gates.back()->Body(), Context::CPU(), {},
                        i == 0 ? std::vector<VarHandle>{v} : std::vector<VarHandle>{}, prop);
    }
    for (auto& g : gates) ASSERT_TRUE(g->WaitStarted());
    // Readers of v, granted together when gate 0 (v's writer) finishes.
    for (int p : {1, 100, 7}) {
      engine().PushSync([&log, p](RunContext) { log.Add(p); }, Context::CPU(), {v}, {}, prop, p);
    }
    gates[0]->Open();
    EXPECT_TRUE(log.count.WaitAtLeast(3));
    for (auto& g : gates) g->Open();
    engine().WaitForAll();
    EXPECT_THAT(log.Get(), ElementsAreArray({100, 7, 1}));
    for (auto& g : gates) EXPECT_FALSE(g->TimedOut());
  }
};

TEST_P(PriorityTest, QueuedNormalFunctionsStartHighestPriorityFirst) {
  if (!threaded()) GTEST_SKIP() << "the naive engine runs each function at push: nothing queues";
  CheckQueuedOrder(FnProperty::kNormal);
}

TEST_P(PriorityTest, QueuedPrioritizedFunctionsStartHighestPriorityFirst) {
  if (!threaded()) GTEST_SKIP() << "the naive engine runs each function at push: nothing queues";
  CheckQueuedOrder(FnProperty::kCPUPrioritized);
}

TEST_P(PriorityTest, SuccessorMadeReadyByAWorkerYieldsToHigherPriorityQueuedWork) {
  if (!threaded()) GTEST_SKIP() << "the naive engine runs each function at push: nothing queues";
  // Gate 0 holds v; when it finishes, its worker makes S (priority 50)
  // ready while P100 and P5 wait in the queue: S must start between them,
  // not ahead of P100 just because its worker is free.
  const int pool = workers();
  StartLog log;
  std::vector<std::unique_ptr<Gate>> gates;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  for (int i = 0; i < pool; ++i) {
    gates.push_back(std::make_unique<Gate>());
    engine().PushSync(gates.back()->Body(), Context::CPU(), {}, i == 0 ? std::vector<VarHandle>{v}
                                                                        : std::vector<VarHandle>{});
  }
  for (auto& g : gates) ASSERT_TRUE(g->WaitStarted());
  engine().PushSync([&](RunContext) { log.Add(100); }, Context::CPU(), {}, {}, FnProperty::kNormal,
                    100);
  engine().PushSync([&](RunContext) { log.Add(5); }, Context::CPU(), {}, {}, FnProperty::kNormal, 5);
  engine().PushSync([&](RunContext) { log.Add(50); }, Context::CPU(), {v}, {}, FnProperty::kNormal,
                    50);
  gates[0]->Open();
  EXPECT_TRUE(log.count.WaitAtLeast(3));
  for (auto& g : gates) g->Open();
  engine().WaitForAll();
  EXPECT_THAT(log.Get(), ElementsAreArray({100, 50, 5}));
  for (auto& g : gates) EXPECT_FALSE(g->TimedOut());
}

TEST_P(PriorityTest, NormalSuccessorsMadeReadyTogetherStartHighestPriorityFirst) {
  if (!threaded()) GTEST_SKIP() << "the naive engine runs each function at push: nothing queues";
  CheckSuccessorOrder(FnProperty::kNormal);
}

TEST_P(PriorityTest, PrioritizedSuccessorsMadeReadyTogetherStartHighestPriorityFirst) {
  if (!threaded()) GTEST_SKIP() << "the naive engine runs each function at push: nothing queues";
  CheckSuccessorOrder(FnProperty::kCPUPrioritized);
}

TEST_P(PriorityTest, NaiveEngineRunsEachFunctionAtPushWhateverItsPriority) {
  if (threaded()) GTEST_SKIP() << "only the naive engine promises to run functions at push";
  std::vector<int> log;
  VarHandle v = engine().NewVariable();
  const std::vector<int> priorities = {-5, 100, 0, 7, kMinPriority, kMaxPriority};
  for (std::size_t i = 0; i < priorities.size(); ++i) {
    const int p = priorities[i];
    engine().PushSync([&log, p](RunContext) { log.push_back(p); }, Context::CPU(),
                      i % 2 == 0 ? std::vector<VarHandle>{} : std::vector<VarHandle>{v}, {},
                      FnProperty::kNormal, p);
    EXPECT_EQ(log.size(), i + 1) << "the naive engine did not run the function at push";
  }
  EXPECT_THAT(log, ElementsAreArray(priorities));
}

DEPENGINE_INSTANTIATE_ALL_ENGINES(PriorityTest);

}  // namespace
}  // namespace depengine::test
