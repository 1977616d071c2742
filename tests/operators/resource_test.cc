// ResourceManager under several threads: Request never waits behind a
// SeedRandom that is waiting for the engine's backpressure, and two
// SeedRandom calls that race leave every device seeded by the same one.
#include "depengine/resource.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "depengine/engine.h"

namespace depengine {
namespace {

// One uniform draw from `ctx`'s generator, in a function that writes it.
double Draw(Engine& engine, ResourceManager& rm, Context ctx) {
  const Resource r = rm.Request(ctx, ResourceRequest::kRandom);
  double x = -1;
  engine.PushSync([&](RunContext) { r.get_random()->SampleUniform(&x, 1, 0.0, 1.0); }, ctx, {},
                  {r.var});
  engine.WaitForAll();
  return x;
}

// SeedRandom pushes its reseeds. With max_in_flight reached, a push from
// outside the engine waits for room; SeedRandom used to wait so while
// holding the manager's mutex, and every Request, from any thread, waited
// behind it until the engine drained (and for good, had a running function
// made the Request). The reseed is made to wait by a function that holds
// the engine full; SeedRandom's thread is given 100 ms to reach that wait.
TEST(ResourceManagerTest, RequestDoesNotWaitBehindASeedRandomWaitingForRoom) {
  EngineOptions options;
  options.kind = EngineKind::kPerDevice;
  options.max_in_flight = 1;
  auto engine = CreateEngine(options);
  ResourceManager rm(engine.get());
  rm.Request(Context::CPU(), ResourceRequest::kRandom);  // the device exists
  engine->WaitForAll();

  std::promise<CallbackOnComplete> held;
  engine->PushAsync([&](RunContext, CallbackOnComplete done) { held.set_value(done); },
                    Context::CPU(), {}, {engine->NewVariable()});
  const CallbackOnComplete release = held.get_future().get();  // the engine is full now
  std::thread seeder([&] { rm.SeedRandom(5); });               // waits for room
  std::this_thread::sleep_for(std::chrono::milliseconds(100));

  auto request = std::async(std::launch::async,
                            [&] { return rm.Request(Context::CPU(), ResourceRequest::kRandom); });
  const bool answered = request.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  release();  // lets the reseed in, and a waiting Request with it
  seeder.join();
  EXPECT_TRUE(answered) << "Request waited behind SeedRandom's push";
  EXPECT_NE(request.get().var, nullptr);
  engine->WaitForAll();
}

// Two SeedRandom calls on two threads push their reseeds in either order on
// each device; whichever call comes last (in the manager's order) must have
// seeded every device, so that a seed reproduces the same draws everywhere.
TEST(ResourceManagerTest, RacingSeedRandomCallsLeaveEveryDeviceOnOneSeed) {
  auto engine = CreateEngine();
  const Context devices[] = {Context::CPU(0), Context::CPU(1), Context::CPU(2)};
  // What each device draws first after SeedRandom(s) alone.
  auto reference = [&](std::uint32_t seed) {
    ResourceManager rm(engine.get());
    for (Context ctx : devices) rm.Request(ctx, ResourceRequest::kRandom);
    rm.SeedRandom(seed);
    std::vector<double> draws;
    for (Context ctx : devices) draws.push_back(Draw(*engine, rm, ctx));
    return draws;
  };
  const std::vector<double> one = reference(1), two = reference(2);
  ASSERT_NE(one, two);
  int ones = 0, twos = 0;
  for (int round = 0; round < 200; ++round) {
    ResourceManager rm(engine.get());
    for (Context ctx : devices) rm.Request(ctx, ResourceRequest::kRandom);
    std::atomic<int> ready{0};
    auto seed = [&](std::uint32_t s) {
      ready.fetch_add(1);
      while (ready.load() < 2) {
      }
      rm.SeedRandom(s);
    };
    std::thread a(seed, 1), b(seed, 2);
    a.join();
    b.join();
    std::vector<double> draws;
    for (Context ctx : devices) draws.push_back(Draw(*engine, rm, ctx));
    ASSERT_TRUE(draws == one || draws == two)
        << "round " << round << ": devices seeded by different calls";
    (draws == one ? ones : twos)++;
  }
  RecordProperty("last_was_1", ones);
  RecordProperty("last_was_2", twos);
}

}  // namespace
}  // namespace depengine
