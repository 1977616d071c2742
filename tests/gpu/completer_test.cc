// The completer of async GPU functions (src/gpu/completer.h) on fake events,
// so that its protocol runs in CI, under TSan too, where no GPU is: each
// function finishes once its event is done and not before, in whatever
// order the events finish; events done after the completer went to sleep
// still finish their functions (no lost wake-up); a failed event fails its
// function; destruction waits for what is pending.
#include "gpu/completer.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine_fixture.h"

namespace depengine::test {
namespace {

using internal::gpu::Completer;

// A fake event: 0 not ready, 1 done, 2 failed.
struct FakeEvent {
  std::atomic<int> state{0};
};

std::atomic<int> g_released{0};  // done events handed back, over the whole test binary

Completer::EventState QueryFake(void* event, std::string* error) {
  switch (static_cast<FakeEvent*>(event)->state.load(std::memory_order_acquire)) {
    case 0:
      return Completer::EventState::kNotReady;
    case 1:
      return Completer::EventState::kDone;
    default:
      *error = "cudaErrorFake: a fake fault";
      return Completer::EventState::kFailed;
  }
}

void ReleaseFake(int, void*) { g_released.fetch_add(1, std::memory_order_relaxed); }

constexpr Completer::Hooks kFakeHooks{QueryFake, ReleaseFake};

// Waits until `pred` holds, for at most kTimeout. If it does not, the
// completer lost a wake-up and can no longer be joined (its destructor waits
// for what is pending): reports it and ends the process, so that the test
// fails now instead of at ctest's timeout.
template <class Pred>
void WaitOrFail(Pred pred, const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + kTimeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "FAILED: %s: a lost wake-up\n", what.c_str());
      std::fflush(nullptr);
      std::_Exit(1);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

// Marks `e` done, then signals, as a stream callback does after the work.
void Complete(Completer& c, FakeEvent& e, int state = 1) {
  e.state.store(state, std::memory_order_release);
  c.Signal();
}

std::unique_ptr<Engine> MakeEngine() {
  EngineOptions o;
  o.kind = EngineKind::kPerDevice;
  o.cpu_worker_threads = 2;
  return CreateEngine(o);
}

TEST(CompleterTest, EachFunctionFinishesWhenItsEventIsDoneInWhateverOrderTheyFinish) {
  constexpr int kFunctions = 2000;
  auto engine = MakeEngine();
  Completer completer(kFakeHooks);
  std::vector<FakeEvent> events(kFunctions);
  std::vector<VarHandle> vars(kFunctions);
  std::atomic<int> early{0}, checked{0};
  for (int i = 0; i < kFunctions; ++i) {
    vars[i] = engine->NewVariable();
    engine->PushAsync(
        [&, i](RunContext, CallbackOnComplete done) { completer.Add(done, 0, &events[i]); },
        Context::CPU(), {}, {vars[i]});
    engine->PushSync(
        [&, i](RunContext) {
          early += events[i].state.load(std::memory_order_acquire) != 1;
          ++checked;
        },
        Context::CPU(), {vars[i]}, {});
  }
  // The "device": finishes the events in a random order, now and then
  // pausing past the completer's spin so that it sleeps in between.
  std::vector<int> order(kFunctions);
  for (int i = 0; i < kFunctions; ++i) order[i] = i;
  std::mt19937 rng(12345);
  std::shuffle(order.begin(), order.end(), rng);
  std::thread device([&] {
    std::uniform_int_distribution<int> pause_us(0, 200);
    for (int i : order) {
      if (rng() % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(pause_us(rng)));
      Complete(completer, events[i]);
    }
  });
  device.join();
  WaitOrFail([&] { return checked.load() == kFunctions; }, "the last functions never finished");
  engine->WaitForAll();
  EXPECT_EQ(checked.load(), kFunctions);
  EXPECT_EQ(early.load(), 0) << "a function finished before its event was done";
}

TEST(CompleterTest, AnEventDoneLongAfterTheCompleterWentToSleepStillFinishesItsFunction) {
  // Each round: one function, its event done after a pause around the
  // completer's spin, then its Signal. A lost wake-up leaves the
  // function unfinished: the test fails after a timeout instead of hanging.
  auto engine = MakeEngine();
  Completer completer(kFakeHooks);
  VarHandle v = engine->NewVariable();
  std::mt19937 rng(777);
  // Most pauses end near the moment the completer gives up polling and goes
  // to sleep (kSpin after the add woke it), where a wake-up is easiest to lose.
  const int spin = static_cast<int>(Completer::kSpin.count());
  std::uniform_int_distribution<int> pause_us(spin / 2, spin * 2);
  for (int round = 0; round < 3000; ++round) {
    FakeEvent event;
    std::atomic<bool> finished{false};
    engine->PushAsync([&](RunContext, CallbackOnComplete done) { completer.Add(done, 0, &event); },
                      Context::CPU(), {}, {v});
    engine->PushSync([&](RunContext) { finished = true; }, Context::CPU(), {v}, {});
    const int pause = pause_us(rng);
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < std::chrono::microseconds(pause)) {
    }
    Complete(completer, event);
    WaitOrFail([&] { return finished.load(); }, "round " + std::to_string(round) + " (pause " +
                                                    std::to_string(pause) +
                                                    " us): the function never finished");
  }
  engine->WaitForAll();
}

TEST(CompleterTest, AFailedEventFailsItsFunctionWithTheErrorAndTheDevice) {
  auto engine = MakeEngine();
  Completer completer(kFakeHooks);
  VarHandle v = engine->NewVariable();
  FakeEvent event;
  const int released_before = g_released.load();
  engine->PushAsync([&](RunContext, CallbackOnComplete done) { completer.Add(done, 3, &event); },
                    Context::CPU(), {}, {v});
  Complete(completer, event, 2);
  const std::string message = MessageOf<std::runtime_error>([&] { engine->WaitForVar(v); });
  EXPECT_THAT(message, ::testing::HasSubstr("gpu(3)"));
  EXPECT_THAT(message, ::testing::HasSubstr("cudaErrorFake: a fake fault"));
  EXPECT_EQ(g_released.load(), released_before) << "a failed event was handed back for reuse";
}

TEST(CompleterTest, DestroyingTheCompleterWaitsForWhatIsPending) {
  auto engine = MakeEngine();
  constexpr int kFunctions = 50;
  std::vector<FakeEvent> events(kFunctions);
  std::atomic<int> finished{0};
  std::thread device;
  {
    Completer completer(kFakeHooks);
    for (int i = 0; i < kFunctions; ++i) {
      engine->PushAsync(
          [&, i](RunContext, CallbackOnComplete done) {
            completer.Add(done, 0, &events[i]);
            ++finished;  // counts the adds; the functions finish later
          },
          Context::CPU(), {}, {});
    }
    while (finished.load() < kFunctions) std::this_thread::yield();
    // The events finish while the destructor runs, with no Signal: nothing
    // may call the completer once its destruction started.
    device = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      for (auto& e : events) e.state.store(1, std::memory_order_release);
    });
    // ~Completer here: it must poll until the device thread's events are done.
  }
  device.join();
  engine->WaitForAll();  // would hang if a completion had been dropped
}

}  // namespace
}  // namespace depengine::test
