// EngineOptions::worker_spin_us: how long a worker that runs out of work
// polls its queue before it sleeps. Observed through the queues' counts
// (ThreadedEngine::WorkerIdleCountsForTesting): sleeps, and idle periods
// that polled past their first round (the time-bounded spin). Not through
// CPU time, which a loaded machine bends: each assertion holds whatever the
// scheduler does, as long as a test lasts less than the longest spin (10 s).
#include <chrono>
#include <cstdint>
#include <thread>

#include "engine/engine_handle.h"
#include "engine/threaded_engine.h"
#include "engine_fixture.h"

namespace depengine::test {
namespace {

class WorkerSpinTest : public EngineTest {
 protected:
  using IdleCounts = internal::ThreadedEngine::IdleCounts;

  std::unique_ptr<Engine> EngineWithSpin(int spin_us) const {
    EngineOptions o = Options();
    o.worker_spin_us = spin_us;
    return CreateEngine(o);
  }
  static IdleCounts Counts(Engine& e) { return internal::CoreOf(&e)->WorkerIdleCountsForTesting(); }
  // Pushes `n` functions on one var, each once the one before finished,
  // `gap` apart.
  static void Trickle(Engine& e, int n, std::chrono::microseconds gap) {
    VarHandle v = e.NewVariable();
    int value = 0;
    for (int i = 0; i < n; ++i) {
      e.PushSync([&value](RunContext) { ++value; }, Context::CPU(), {}, {v});
      e.WaitForVar(v);
      if (gap.count() > 0) std::this_thread::sleep_for(gap);
    }
    EXPECT_EQ(value, n);
    e.DeleteVariable(nullptr, Context::CPU(), v);
    e.WaitForAll();
  }
  // Waits (bounded) until the workers have slept as often as there are
  // workers: idle workers do come to sleep.
  bool WaitUntilEveryWorkerCouldHaveSlept(Engine& e) const {
    const auto enough = [&] { return Counts(e).sleeps >= static_cast<std::uint64_t>(workers()); };
    const auto deadline = std::chrono::steady_clock::now() + support::kWaitTimeout;
    while (!enough() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return enough();
  }
};

// No spin: idle workers sleep, and no idle period polls past its first
// look at the queue.
TEST_P(WorkerSpinTest, ZeroSpinSleepsWithoutPolling) {
  if (!threaded()) GTEST_SKIP() << "the naive engine has no workers";
  auto e = EngineWithSpin(0);
  Trickle(*e, 20, std::chrono::microseconds(1000));
  EXPECT_TRUE(WaitUntilEveryWorkerCouldHaveSlept(*e)) << Counts(*e).sleeps << " sleeps";
  EXPECT_EQ(Counts(*e).timed_spins, 0u);
}

// A spin longer than the test: the workers poll through every gap and
// never sleep (a spin bounded by a count of pauses, about 50 us here, slept
// in each 1 ms gap).
TEST_P(WorkerSpinTest, SpinLongerThanTheGapsNeverSleeps) {
  if (!threaded()) GTEST_SKIP() << "the naive engine has no workers";
  auto e = EngineWithSpin(EngineOptions::kMaxWorkerSpinUs);
  const auto start = std::chrono::steady_clock::now();
  Trickle(*e, 20, std::chrono::microseconds(1000));
  const IdleCounts after = Counts(*e);
  ASSERT_LT(std::chrono::steady_clock::now() - start,
            std::chrono::microseconds(EngineOptions::kMaxWorkerSpinUs))
      << "the test outlasted the spin, so the count says nothing";
  EXPECT_EQ(after.sleeps, 0u);
}

// The default spin polls and then ends by time: idle workers come to sleep
// (a spin with no end keeps them polling), and every sleep follows a timed
// spin.
TEST_P(WorkerSpinTest, DefaultSpinPollsThenSleeps) {
  if (!threaded()) GTEST_SKIP() << "the naive engine has no workers";
  auto e = EngineWithSpin(EngineOptions::kDefaultWorkerSpinUs);
  Trickle(*e, 20, std::chrono::microseconds(1000));
  EXPECT_TRUE(WaitUntilEveryWorkerCouldHaveSlept(*e))
      << Counts(*e).sleeps << " sleeps of " << workers() << " workers within "
      << support::kWaitTimeout.count() << " ms of idleness";
  const IdleCounts c = Counts(*e);
  EXPECT_GE(c.timed_spins, c.sleeps);
}

DEPENGINE_INSTANTIATE_ALL_ENGINES(WorkerSpinTest);

}  // namespace
}  // namespace depengine::test
