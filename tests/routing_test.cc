// Semantics point 6, routing: kCPUPrioritized goes to the CPU priority pool;
// kCopyFromGPU / kCopyToGPU to that GPU's copy workers; kAsync runs directly
// on the thread that made it ready; kNormal to the context's normal pool.
// ThreadedEnginePooled keeps one normal and one copy queue shared by all
// devices; ThreadedEnginePerDevice keeps pools per device; NaiveEngine runs
// everything inline. GPU routing is tested on CPU with simulated GPUs.
//
// Method: threads are identified by std::this_thread::get_id(). To prove
// that a function runs on a pool other than P, every worker of P is blocked
// by a Gate first: the function must still finish, on a thread not in P.
#include <pthread.h>

#include <atomic>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine_fixture.h"

namespace depengine::test {
namespace {

class RoutingTest : public EngineTest {
 protected:
  static constexpr int kGpus = 2;
  EngineOptions Options() const override {
    EngineOptions o = EngineTest::Options();
    o.simulated_gpus = kGpus;
    return o;
  }

  // Blocks every worker of the pool that (ctx, prop) goes to, `pool_size`
  // workers, recording their threads in `ids`.
  struct BlockedPool {
    std::vector<std::unique_ptr<Gate>> gates;
    ThreadSet ids;
    ~BlockedPool() { Open(); }
    void Open() {
      for (auto& g : gates) g->Open();
    }
  };
  void Block(BlockedPool& pool, int pool_size, Context ctx, FnProperty prop = FnProperty::kNormal) {
    for (int i = 0; i < pool_size; ++i) {
      pool.gates.push_back(std::make_unique<Gate>());
      SyncFn body = pool.gates.back()->Body();
      engine().PushSync(
          [&pool, body](RunContext r) {
            pool.ids.AddCurrent();
            body(r);
          },
          ctx, {}, {}, prop);
    }
    for (auto& g : pool.gates) ASSERT_TRUE(g->WaitStarted()) << "a pool worker never started";
  }

  // Pushes `n` functions and waits (bounded) until all of them ran; returns
  // false if they did not.
  bool RunAndCollect(int n, Context ctx, FnProperty prop, ThreadSet& ids) {
    auto done = std::make_shared<Counter>();
    for (int i = 0; i < n; ++i) {
      engine().PushSync(
          [&ids, done](RunContext) {
            ids.AddCurrent();
            done->Add();
          },
          ctx, {}, {}, prop);
    }
    return done->WaitAtLeast(n);
  }
};

TEST_P(RoutingTest, RunContextReportsTheContextWithNoStreamWhenSimulated) {
  struct Case {
    Context ctx;
    FnProperty prop;
  };
  const std::vector<Case> cases = {
      {Context::CPU(0), FnProperty::kNormal},          {Context::CPU(1), FnProperty::kNormal},
      {Context::CPUPinned(0), FnProperty::kNormal},    {Context::CPU(0), FnProperty::kCPUPrioritized},
      {Context::GPU(0), FnProperty::kNormal},          {Context::GPU(1), FnProperty::kNormal},
      {Context::GPU(0), FnProperty::kCopyToGPU},       {Context::GPU(1), FnProperty::kCopyFromGPU},
      {Context::GPU(1), FnProperty::kAsync},           {Context::CPU(2), FnProperty::kAsync},
  };
  std::vector<RunContext> seen(cases.size(), RunContext{Context::CPU(63), reinterpret_cast<void*>(1)});
  for (std::size_t i = 0; i < cases.size(); ++i) {
    engine().PushSync([&seen, i](RunContext r) { seen[i] = r; }, cases[i].ctx, {}, {}, cases[i].prop);
  }
  engine().WaitForAll();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    EXPECT_TRUE(seen[i].ctx == cases[i].ctx) << "case " << i;
    EXPECT_EQ(seen[i].stream, nullptr) << "case " << i;
  }
}

TEST_P(RoutingTest, NaiveEngineRunsEveryFunctionOnThePushingThread) {
  if (threaded()) GTEST_SKIP() << "threaded engines run functions on their workers";
  ThreadSet ids;
  for (FnProperty prop : {FnProperty::kNormal, FnProperty::kCPUPrioritized, FnProperty::kCopyToGPU,
                          FnProperty::kCopyFromGPU, FnProperty::kAsync}) {
    for (Context ctx : {Context::CPU(0), Context::CPU(1), Context::GPU(0), Context::GPU(1)}) {
      bool ran = false;
      engine().PushSync(
          [&](RunContext) {
            ids.AddCurrent();
            ran = true;
          },
          ctx, {}, {}, prop);
      EXPECT_TRUE(ran) << "the naive engine did not run a ready function at push";
    }
  }
  EXPECT_EQ(ids.Get(), std::set<std::thread::id>{std::this_thread::get_id()});
}

// engine.h (kNaive): one at a time. A function pushed from inside a running
// one runs once that one returns, on the same thread; a chain of such pushes
// is a loop, not a recursion, so a long one cannot overflow the stack.
TEST_P(RoutingTest, NaiveEngineRunsANestedPushAfterItsParentReturns) {
  if (threaded()) GTEST_SKIP() << "threaded engines run functions on their workers";
  constexpr int kDepth = 200000;  // recursing this deep would need far more than 8 MiB
  VarHandle v = engine().NewVariable();
  int depth = 0;
  bool overlapped = false;
  bool running = false;
  std::function<void(RunContext)> step = [&](RunContext) {
    if (running) overlapped = true;
    running = true;
    if (++depth < kDepth) engine().PushSync(step, Context::CPU(), {}, {v});
    running = false;
  };
  engine().PushSync(step, Context::CPU(), {}, {v});
  EXPECT_EQ(depth, kDepth) << "the nested pushes had not all run when the outer push returned";
  EXPECT_FALSE(overlapped) << "a nested push ran inside its parent";
  engine().WaitForAll();
}

TEST_P(RoutingTest, NormalFunctionsRunOnWorkersNotOnThePushingThread) {
  if (!threaded()) GTEST_SKIP() << "the naive engine runs functions on the pushing thread";
  ThreadSet ids;
  ASSERT_TRUE(RunAndCollect(50, Context::CPU(), FnProperty::kNormal, ids));
  EXPECT_EQ(ids.Get().count(std::this_thread::get_id()), 0u);
  EXPECT_LE(ids.Get().size(), static_cast<std::size_t>(workers()))
      << "more threads ran normal CPU functions than the pool has workers";
}

TEST_P(RoutingTest, PrioritizedFunctionsRunOnTheCpuPriorityPool) {
  if (!threaded()) GTEST_SKIP() << "the naive engine runs functions on the pushing thread";
  BlockedPool normal;
  Block(normal, workers(), Context::CPU(0));
  ThreadSet prio;
  if (kind() == EngineKind::kPerDevice) {
    // A separate pool shared by all CPU devices: runs while every normal
    // worker is blocked, on its own threads.
    EXPECT_TRUE(RunAndCollect(20, Context::CPU(0), FnProperty::kCPUPrioritized, prio))
        << "a prioritized function waited for the normal pool";
    EXPECT_TRUE(RunAndCollect(20, Context::CPU(1), FnProperty::kCPUPrioritized, prio))
        << "a prioritized function on CPU(1) did not run on the shared priority pool";
    EXPECT_TRUE(Disjoint(prio.Get(), normal.ids.Get()));
    EXPECT_EQ(prio.Get().count(std::this_thread::get_id()), 0u);
    EXPECT_LE(prio.Get().size(), static_cast<std::size_t>(Options().cpu_priority_threads));
  } else {
    // The pooled engine has one normal queue: prioritized work waits in it.
    Event ran;
    engine().PushSync([&](RunContext) { ran.Notify(); }, Context::CPU(0), {}, {},
                      FnProperty::kCPUPrioritized);
    ExpectQuiet(ran, "pooled: a prioritized function ran while every normal worker was blocked");
    normal.Open();
    EXPECT_TRUE(ran.WaitFor());
    EXPECT_TRUE(RunAndCollect(20, Context::CPU(0), FnProperty::kCPUPrioritized, prio));
    for (const auto& id : prio.Get()) EXPECT_EQ(normal.ids.Get().count(id), 1u);
  }
  normal.Open();
  engine().WaitForAll();
}

TEST_P(RoutingTest, CopyFunctionsRunOnCopyWorkers) {
  if (!threaded()) GTEST_SKIP() << "the naive engine runs functions on the pushing thread";
  BlockedPool cpu;
  Block(cpu, workers(), Context::CPU(0));
  if (kind() == EngineKind::kPooled) {
    // One copy queue for every device, with gpu_copy_threads (1) threads.
    ThreadSet copy;
    EXPECT_TRUE(RunAndCollect(10, Context::CPU(0), FnProperty::kCopyToGPU, copy));
    EXPECT_TRUE(RunAndCollect(10, Context::GPU(0), FnProperty::kCopyFromGPU, copy));
    EXPECT_TRUE(RunAndCollect(10, Context::GPU(1), FnProperty::kCopyToGPU, copy));
    EXPECT_EQ(copy.Get().size(), 1u) << "pooled: copies of all devices share one copy thread";
    EXPECT_TRUE(Disjoint(copy.Get(), cpu.ids.Get()));
  } else {
    // Per device: each GPU has its own copy workers, apart from its normal
    // workers and from the CPU pools.
    BlockedPool gpu0;
    Block(gpu0, workers(), Context::GPU(0));
    ThreadSet copy0, copy1;
    EXPECT_TRUE(RunAndCollect(10, Context::GPU(0), FnProperty::kCopyToGPU, copy0));
    EXPECT_TRUE(RunAndCollect(10, Context::GPU(0), FnProperty::kCopyFromGPU, copy0));
    EXPECT_TRUE(RunAndCollect(10, Context::GPU(1), FnProperty::kCopyToGPU, copy1));
    EXPECT_EQ(copy0.Get().size(), 1u) << "gpu_copy_threads = 1";
    EXPECT_EQ(copy1.Get().size(), 1u) << "gpu_copy_threads = 1";
    EXPECT_TRUE(Disjoint(copy0.Get(), copy1.Get())) << "GPUs 0 and 1 share copy workers";
    EXPECT_TRUE(Disjoint(copy0.Get(), gpu0.ids.Get()));
    EXPECT_TRUE(Disjoint(copy0.Get(), cpu.ids.Get()));
    EXPECT_TRUE(Disjoint(copy1.Get(), cpu.ids.Get()));
    gpu0.Open();
  }
  cpu.Open();
  engine().WaitForAll();
}

TEST_P(RoutingTest, GpuNormalFunctionsRunOnTheirDevicePool) {
  if (!threaded()) GTEST_SKIP() << "the naive engine runs functions on the pushing thread";
  BlockedPool cpu;
  Block(cpu, workers(), Context::CPU(0));
  if (kind() == EngineKind::kPooled) {
    // One normal queue for every device: GPU work waits behind the CPU's.
    Event ran;
    engine().PushSync([&](RunContext) { ran.Notify(); }, Context::GPU(1), {}, {});
    ExpectQuiet(ran, "pooled: a GPU function ran while every normal worker was blocked");
    cpu.Open();
    EXPECT_TRUE(ran.WaitFor());
  } else {
    BlockedPool gpu0;
    Block(gpu0, workers(), Context::GPU(0));
    ThreadSet gpu1;
    EXPECT_TRUE(RunAndCollect(20, Context::GPU(1), FnProperty::kNormal, gpu1))
        << "GPU(1) work waited for GPU(0)'s or the CPU's pool";
    EXPECT_TRUE(Disjoint(gpu0.ids.Get(), cpu.ids.Get()));
    EXPECT_TRUE(Disjoint(gpu1.Get(), cpu.ids.Get()));
    EXPECT_TRUE(Disjoint(gpu1.Get(), gpu0.ids.Get()));
    EXPECT_LE(gpu1.Get().size(), static_cast<std::size_t>(Options().gpu_worker_threads));
    gpu0.Open();
  }
  cpu.Open();
  engine().WaitForAll();
}

TEST_P(RoutingTest, CpuDevicesHaveTheirOwnPoolsOnlyOnThePerDeviceEngine) {
  if (!threaded()) GTEST_SKIP() << "the naive engine runs functions on the pushing thread";
  BlockedPool cpu0;
  Block(cpu0, workers(), Context::CPU(0));
  if (kind() == EngineKind::kPerDevice) {
    ThreadSet cpu1;
    EXPECT_TRUE(RunAndCollect(20, Context::CPU(1), FnProperty::kNormal, cpu1));
    EXPECT_TRUE(Disjoint(cpu1.Get(), cpu0.ids.Get()));
  } else {
    Event ran;
    engine().PushSync([&](RunContext) { ran.Notify(); }, Context::CPU(1), {}, {});
    ExpectQuiet(ran, "pooled: CPU(1) work ran while every normal worker was blocked");
    cpu0.Open();
    EXPECT_TRUE(ran.WaitFor());
  }
  cpu0.Open();
  engine().WaitForAll();
}

TEST_P(RoutingTest, WorkerThreadsCarryTheirPoolsNameForTheOs) {
  if (!threaded()) GTEST_SKIP() << "the naive engine has no worker threads";
  const bool per_device = kind() == EngineKind::kPerDevice;
  struct Case {
    Context ctx;
    FnProperty prop;
    std::string pool;  // the pool the function is routed to
    int size;          // its threads
  };
  const std::vector<Case> cases = {
      {Context::CPU(0), FnProperty::kNormal, per_device ? "cpu/normal" : "pooled/normal", workers()},
      {Context::CPU(1), FnProperty::kNormal, per_device ? "cpu1/normal" : "pooled/normal", workers()},
      {Context::CPU(0), FnProperty::kCPUPrioritized, per_device ? "cpu/priority" : "pooled/normal",
       workers()},
      {Context::GPU(1), FnProperty::kNormal, per_device ? "gpu1/normal" : "pooled/normal", workers()},
      {Context::GPU(0), FnProperty::kCopyToGPU, per_device ? "gpu0/copy" : "pooled/copy", 1},
  };
  for (const Case& c : cases) {
    std::string name;
    engine().PushSync(
        [&name](RunContext) {
          char buf[16] = {};
          if (pthread_getname_np(pthread_self(), buf, sizeof buf) == 0) name = buf;
        },
        c.ctx, {}, {}, c.prop);
    engine().WaitForAll();
    std::set<std::string> expected;
    for (int i = 0; i < c.size; ++i) expected.insert(c.pool + "/" + std::to_string(i));
    EXPECT_EQ(expected.count(name), 1u)
        << "a function for pool " << c.pool << " ran on a thread named '" << name << "'";
  }
}

TEST_P(RoutingTest, KAsyncReadyAtPushRunsOnThePushingThreadBeforePushReturns) {
  std::thread::id ran_on;
  bool ran = false;
  VarHandle v = engine().NewVariable();
  engine().PushSync(
      [&](RunContext) {
        ran_on = std::this_thread::get_id();
        ran = true;
      },
      Context::CPU(), {}, {v}, FnProperty::kAsync);
  EXPECT_TRUE(ran) << "a ready kAsync function did not run at push";
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  engine().WaitForAll();
}

TEST_P(RoutingTest, KAsyncMadeReadyByAFinishingFunctionRunsOnThatFunctionsThread) {
  constexpr int kRounds = 20;
  std::vector<std::thread::id> pred(kRounds), succ(kRounds);  // slot i: round i
  DrainGuard drain(engine());
  std::vector<VarHandle> vars;
  for (int i = 0; i < kRounds; ++i) vars.push_back(engine().NewVariable());
  for (int i = 0; i < kRounds; ++i) {
    // The predecessor writes the var, so the successor is made ready by it.
    Hold hold(engine(), {}, {vars[i]});
    ASSERT_TRUE(hold.WaitStarted());
    engine().PushSync([&, i](RunContext) { pred[i] = std::this_thread::get_id(); }, Context::CPU(),
                      {}, {vars[i]});
    engine().PushSync([&, i](RunContext) { succ[i] = std::this_thread::get_id(); }, Context::CPU(),
                      {vars[i]}, {}, FnProperty::kAsync);
    hold.Release();
  }
  engine().WaitForAll();
  for (int i = 0; i < kRounds; ++i) {
    EXPECT_EQ(succ[i], pred[i]) << "round " << i << ": the kAsync successor hopped threads";
  }
}

TEST_P(RoutingTest, KAsyncMadeReadyByACallbackRunsInsideThatCallback) {
  Completer completer;
  std::thread::id succ_on;
  std::atomic<bool> ran_before_callback_returned{false};
  bool succ_ran = false;
  Event succ_pushed;
  Event callback_returned;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  engine().PushAsync(
      [&](RunContext, CallbackOnComplete cb) {
        completer.Post([&, cb] {
          succ_pushed.WaitFor();  // so that the callback is what makes it ready
          cb();
          ran_before_callback_returned = succ_ran;
          callback_returned.Notify();
        });
      },
      Context::CPU(), {}, {v});
  engine().PushSync(
      [&](RunContext) {
        succ_on = std::this_thread::get_id();
        succ_ran = true;
      },
      Context::CPU(), {v}, {}, FnProperty::kAsync);
  succ_pushed.Notify();
  engine().WaitForAll();
  ASSERT_TRUE(callback_returned.WaitFor());
  EXPECT_EQ(succ_on, completer.id());
  EXPECT_TRUE(ran_before_callback_returned.load());
}

TEST_P(RoutingTest, NormalSuccessorOfACallbackRunsOnAWorkerOfThreadedEngines) {
  Completer completer;
  std::thread::id succ_on;
  Event succ_pushed;
  DrainGuard drain(engine());
  VarHandle v = engine().NewVariable();
  engine().PushAsync(
      [&](RunContext, CallbackOnComplete cb) {
        completer.Post([&, cb] {
          succ_pushed.WaitFor();  // so that the callback is what makes it ready
          cb();
        });
      },
      Context::CPU(), {}, {v});
  engine().PushSync([&](RunContext) { succ_on = std::this_thread::get_id(); }, Context::CPU(), {v},
                    {});
  succ_pushed.Notify();
  engine().WaitForAll();
  if (threaded()) {
    EXPECT_NE(succ_on, completer.id()) << "a kNormal function ran on a callback's thread";
    EXPECT_NE(succ_on, std::this_thread::get_id());
  } else {
    EXPECT_EQ(succ_on, completer.id()) << "naive: runs where it becomes ready";
  }
}

DEPENGINE_INSTANTIATE_ALL_ENGINES(RoutingTest);

}  // namespace
}  // namespace depengine::test
