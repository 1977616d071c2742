// Semantics point 11, GPU: the per-device engine keeps per-GPU normal and
// copy pools with one stream per worker, handed to functions in
// RunContext.stream. The real-GPU tests skip where no GPU is present; the
// simulated-GPU tests run everywhere.
#include "depengine/gpu.h"

#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>

#include "engine_fixture.h"

namespace depengine::test {
namespace {

using ::testing::HasSubstr;

// Returns an engine with real GPU support, or nullptr when GPU(0) is not
// usable here (no CUDA build, or no device).
std::unique_ptr<Engine> MakeRealGpuEngine(int gpu_workers) {
  EngineOptions o;
  o.kind = EngineKind::kPerDevice;
  o.cpu_worker_threads = 1;
  o.gpu_worker_threads = gpu_workers;
  o.gpu_copy_threads = 1;
  auto e = CreateEngine(o);
  try {
    e->PushSync([](RunContext) {}, Context::GPU(0), {}, {});
  } catch (const std::invalid_argument&) {
    return nullptr;
  }
  e->WaitForAll();
  return e;
}

// Records, per thread, the streams its functions were given.
class StreamLog {
 public:
  void Add(const RunContext& r) {
    std::lock_guard<std::mutex> lock(mu_);
    by_thread_[std::this_thread::get_id()].insert(r.stream);
  }
  std::map<std::thread::id, std::set<void*>> Get() {
    std::lock_guard<std::mutex> lock(mu_);
    return by_thread_;
  }

 private:
  std::mutex mu_;
  std::map<std::thread::id, std::set<void*>> by_thread_;  // guarded by mu_
};

TEST(GpuTest, EachGpuWorkerHandsItsOwnStreamToItsFunctions) {
  constexpr int kWorkers = 2;
  auto e = MakeRealGpuEngine(kWorkers);
  if (!e) GTEST_SKIP() << "no usable GPU here (CUDA not built or no device present)";
  StreamLog normal, copy;
  std::vector<void*> cpu_streams(50, reinterpret_cast<void*>(1));
  for (int i = 0; i < 200; ++i) {
    e->PushSync([&](RunContext r) { normal.Add(r); }, Context::GPU(0), {}, {});
    e->PushSync([&](RunContext r) { copy.Add(r); }, Context::GPU(0), {}, {}, FnProperty::kCopyToGPU);
  }
  for (int i = 0; i < 50; ++i) {
    e->PushSync([&cpu_streams, i](RunContext r) { cpu_streams[i] = r.stream; }, Context::CPU(), {},
                {});
  }
  e->WaitForAll();
  std::set<void*> all;
  for (auto* log : {&normal, &copy}) {
    for (const auto& [thread, streams] : log->Get()) {
      EXPECT_EQ(streams.size(), 1u) << "a GPU worker handed out more than one stream";
      for (void* s : streams) {
        EXPECT_NE(s, nullptr) << "a GPU worker handed out no stream";
        EXPECT_TRUE(all.insert(s).second) << "two GPU workers share a stream";
      }
    }
  }
  EXPECT_LE(normal.Get().size(), static_cast<std::size_t>(kWorkers));
  for (void* s : cpu_streams) EXPECT_EQ(s, nullptr) << "a CPU function was given a stream";
}

TEST(GpuTest, GpuBeyondTheDeviceCountIsRejected) {
  auto e = MakeRealGpuEngine(1);
  if (!e) GTEST_SKIP() << "no usable GPU here (CUDA not built or no device present)";
  EXPECT_THAT(MessageOf<std::invalid_argument>(
                  [&] { e->PushSync([](RunContext) {}, Context::GPU(4096), {}, {}); }),
              HasSubstr("GPU"));
}

TEST(GpuTest, SimulatedGpusGetNoStream) {
  EngineOptions o;
  o.kind = EngineKind::kPerDevice;
  o.simulated_gpus = 1;
  auto e = CreateEngine(o);
  void* normal = reinterpret_cast<void*>(1);
  void* copy = reinterpret_cast<void*>(1);
  e->PushSync([&](RunContext r) { normal = r.stream; }, Context::GPU(0), {}, {});
  e->PushSync([&](RunContext r) { copy = r.stream; }, Context::GPU(0), {}, {}, FnProperty::kCopyFromGPU);
  e->WaitForAll();
  EXPECT_EQ(normal, nullptr);
  EXPECT_EQ(copy, nullptr);
}

TEST(GpuTest, CompleteWhenStreamDoneWithNoStreamFinishesTheFunctionAtOnce) {
  // CPU functions, and GPU ones on simulated GPUs, have no stream.
  EngineOptions o;
  o.kind = EngineKind::kPerDevice;
  o.simulated_gpus = 1;
  auto e = CreateEngine(o);
  VarHandle v = e->NewVariable();
  int runs = 0;
  for (Context ctx : {Context::CPU(), Context::GPU(0)}) {
    e->PushAsync([](RunContext r, CallbackOnComplete done) { CompleteWhenStreamDone(r, done); },
                 ctx, {}, {v});
    e->PushSync([&](RunContext) { ++runs; }, Context::CPU(), {v}, {});
  }
  e->WaitForAll();
  EXPECT_EQ(runs, 2);
}

TEST(GpuTest, ManySimulatedGpusAreRejectedOrEachGetsItsOwnPools) {
  // More simulated GPUs than any fixed-size device table: the engine must
  // either refuse the option or route every GPU to pools of its own.
  constexpr int kGpus = 70;
  EngineOptions o;
  o.kind = EngineKind::kPerDevice;
  o.simulated_gpus = kGpus;
  o.cpu_priority_threads = 1;
  o.gpu_worker_threads = 1;
  o.gpu_copy_threads = 1;
  std::unique_ptr<Engine> e;
  try {
    e = CreateEngine(o);
  } catch (const std::invalid_argument& err) {
    EXPECT_THAT(err.what(), HasSubstr("simulated_gpus"));
    return;
  }
  std::thread::id prio_thread;
  e->PushSync([&](RunContext) { prio_thread = std::this_thread::get_id(); }, Context::CPU(), {}, {},
              FnProperty::kCPUPrioritized);
  e->WaitForAll();
  std::mutex mu;
  std::map<int, std::set<std::thread::id>> copy_threads, normal_threads;  // guarded by mu
  std::map<int, Context> seen_ctx;                                         // guarded by mu
  std::string error;
  for (int g = kGpus - 10; g < kGpus; ++g) {
    try {
      e->PushSync(
          [&, g](RunContext r) {
            std::lock_guard<std::mutex> lock(mu);
            copy_threads[g].insert(std::this_thread::get_id());
            seen_ctx[g] = r.ctx;
          },
          Context::GPU(g), {}, {}, FnProperty::kCopyToGPU);
      e->PushSync(
          [&, g](RunContext) {
            std::lock_guard<std::mutex> lock(mu);
            normal_threads[g].insert(std::this_thread::get_id());
          },
          Context::GPU(g), {}, {});
    } catch (const std::invalid_argument& err) {
      error = err.what();  // rejecting the GPU id at push is acceptable too
    }
  }
  e->WaitForAll();
  if (!error.empty()) {
    EXPECT_THAT(error, HasSubstr("GPU"));
    return;
  }
  std::lock_guard<std::mutex> lock(mu);
  for (int g = kGpus - 10; g < kGpus; ++g) {
    EXPECT_TRUE(seen_ctx[g] == Context::GPU(g)) << "gpu " << g;
    EXPECT_EQ(copy_threads[g].count(prio_thread), 0u)
        << "gpu " << g << "'s copies ran on the CPU priority pool";
    EXPECT_EQ(normal_threads[g].count(prio_thread), 0u)
        << "gpu " << g << "'s work ran on the CPU priority pool";
    for (int h = kGpus - 10; h < g; ++h) {
      EXPECT_TRUE(Disjoint(copy_threads[g], copy_threads[h])) << "gpus " << g << " and " << h;
    }
  }
}

}  // namespace
}  // namespace depengine::test
