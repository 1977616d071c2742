// When the system refuses a worker thread (EAGAIN, no memory for a stack),
// the engine raises std::system_error to the caller that needed the thread,
// naming the pool, and keeps working: CreateEngine for the pools an engine
// starts with, the push for a pool the per-device engine creates on demand.
// The refusal is simulated with internal::LimitThreadStartsForTesting.
#include <gtest/gtest.h>

#include <string>
#include <system_error>

#include "depengine/engine.h"
#include "exec/worker_pool.h"

namespace depengine::test {
namespace {

using internal::LimitThreadStartsForTesting;

// Sets the limit for one scope; no limit again afterwards.
class ThreadStartLimit {
 public:
  explicit ThreadStartLimit(int n) { LimitThreadStartsForTesting(n); }
  ~ThreadStartLimit() { LimitThreadStartsForTesting(-1); }
  ThreadStartLimit(const ThreadStartLimit&) = delete;
  ThreadStartLimit& operator=(const ThreadStartLimit&) = delete;
};

// Runs `push`, expecting std::system_error whose message names `pool`.
template <typename F>
void ExpectRefused(F&& push, const std::string& pool) {
  try {
    push();
    ADD_FAILURE() << "expected std::system_error naming pool '" << pool << "'";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code(), std::errc::resource_unavailable_try_again) << e.what();
    EXPECT_NE(std::string(e.what()).find("'" + pool + "'"), std::string::npos) << e.what();
  }
}

EngineOptions Options(EngineKind kind) {
  EngineOptions o;
  o.kind = kind;
  o.cpu_worker_threads = 4;
  o.cpu_priority_threads = 2;
  o.gpu_worker_threads = 2;
  o.gpu_copy_threads = 1;
  o.simulated_gpus = 1;
  return o;
}

TEST(ThreadStartTest, PooledEngineRefusedAThreadRaisesFromCreateEngine) {
  {
    ThreadStartLimit limit(2);  // 2 of the 4 normal workers start
    try {
      (void)CreateEngine(Options(EngineKind::kPooled));
      ADD_FAILURE() << "expected std::system_error";
    } catch (const std::system_error& e) {
      EXPECT_NE(std::string(e.what()).find("'pooled/normal' could not start thread 3 of 4"),
                std::string::npos)
          << e.what();
    }
  }
  {
    ThreadStartLimit limit(4);  // the normal pool starts, the copy pool does not
    EXPECT_THROW((void)CreateEngine(Options(EngineKind::kPooled)), std::system_error);
  }
  // The threads that did start were joined, and engines still work.
  auto engine = CreateEngine(Options(EngineKind::kPooled));
  int x = 0;
  VarHandle v = engine->NewVariable();
  engine->PushSync([&](RunContext) { ++x; }, Context::CPU(), {}, {v});
  engine->WaitForAll();
  EXPECT_EQ(x, 1);
}

TEST(ThreadStartTest, PerDeviceEngineStartsItsDefaultPoolInCreateEngine) {
  ThreadStartLimit limit(0);
  ExpectRefused([] { (void)CreateEngine(Options(EngineKind::kPerDevice)); }, "cpu/normal");
}

// A push that needs a pool the system refuses to start raises, queues
// nothing, and leaves the engine and the work pushed before it intact.
TEST(ThreadStartTest, PerDevicePushThatNeedsARefusedPoolRaisesAndTheEngineKeepsWorking) {
  auto engine = CreateEngine(Options(EngineKind::kPerDevice));
  VarHandle v = engine->NewVariable();
  int x = 0;  // written only by functions serialized on v
  engine->PushSync([&](RunContext) { x = x * 10 + 1; }, Context::CPU(), {}, {v});
  auto append = [&](int digit) { return [&x, digit](RunContext) { x = x * 10 + digit; }; };
  OprHandle prioritized = engine->NewOperator(
      [&x](RunContext, CallbackOnComplete done) {
        x = x * 10 + 9;
        done();
      },
      {}, {v}, FnProperty::kCPUPrioritized, "prioritized");
  {
    ThreadStartLimit limit(0);
    ExpectRefused(
        [&] { engine->PushSync(append(2), Context::CPU(), {}, {v}, FnProperty::kCPUPrioritized); },
        "cpu/priority");
    ExpectRefused([&] { engine->Push(prioritized, Context::CPU()); }, "cpu/priority");
    ExpectRefused([&] { engine->PushSync(append(3), Context::CPU(1), {}, {v}); }, "cpu1/normal");
    ExpectRefused([&] { engine->PushSync(append(4), Context::CPUPinned(2), {}, {v}); },
                  "cpu2/normal");
    ExpectRefused([&] { engine->PushSync(append(5), Context::GPU(0), {}, {v}); }, "gpu0/normal");
    ExpectRefused(
        [&] { engine->PushSync(append(6), Context::GPU(0), {}, {v}, FnProperty::kCopyToGPU); },
        "gpu0/copy");
    ExpectRefused([&] { engine->DeleteVariable({}, Context::CPU(3), v); }, "cpu3/normal");
    // Pools that exist, and inline functions, need no thread.
    engine->PushSync(append(7), Context::CPU(), {}, {v});
    engine->PushSync(append(8), Context::CPU(), {}, {v}, FnProperty::kAsync);
    engine->WaitForVar(v);
    EXPECT_EQ(x, 178);
  }
  // Once threads can start again, so do the pools, and v was not deleted.
  engine->PushSync(append(2), Context::CPU(), {}, {v}, FnProperty::kCPUPrioritized);
  engine->Push(prioritized, Context::CPU());
  engine->PushSync(append(3), Context::CPU(1), {}, {v});
  engine->PushSync(append(5), Context::GPU(0), {}, {v});
  engine->PushSync(append(6), Context::GPU(0), {}, {v}, FnProperty::kCopyToGPU);
  engine->WaitForVar(v);
  EXPECT_EQ(x, 17829356);
  engine->DeleteOperator(prioritized);
  engine->DeleteVariable({}, Context::CPU(3), v);
  engine->WaitForAll();
}

}  // namespace
}  // namespace depengine::test
