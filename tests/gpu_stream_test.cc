// Semantics point 11 on a real GPU, on every engine kind: a GPU function gets
// a stream on its device, a sync GPU function is done only when the work it
// queued on that stream is, and an async one finishes when its stream is
// done through CompleteWhenStreamDone. Each test skips where no GPU is present.
#include <atomic>
#include <cstddef>
#include <memory>
#include <set>
#include <vector>

#include "depengine/gpu.h"
#include "gpu_support.h"

namespace depengine::test {
namespace {

constexpr std::size_t kBytes = std::size_t{64} << 20;  // 64 MiB: ms of copying
constexpr std::size_t kSampleStride = 4096;

// A device buffer and a pinned host buffer of kBytes each, so that copies
// between them are truly asynchronous.
class Buffers {
 public:
  Buffers() {
    CudaCheck(cudaSetDevice(0), "cudaSetDevice");
    CudaCheck(cudaMalloc(&device_, kBytes), "cudaMalloc");
    CudaCheck(cudaMallocHost(&host_, kBytes), "cudaMallocHost");
  }
  ~Buffers() {
    cudaFree(device_);
    cudaFreeHost(host_);
  }
  void* device() const { return device_; }
  unsigned char* host() const { return static_cast<unsigned char*>(host_); }

  // How many sampled bytes of the host buffer differ from `value`.
  int HostMismatches(int value) const {
    int bad = 0;
    for (std::size_t i = 0; i < kBytes; i += kSampleStride) bad += host()[i] != value;
    bad += host()[kBytes - 1] != value;
    return bad;
  }

 private:
  void* device_ = nullptr;
  void* host_ = nullptr;
};

cudaStream_t StreamOf(const RunContext& r) { return static_cast<cudaStream_t>(r.stream); }

class GpuStreamTest : public RealGpuTest {};

TEST_P(GpuStreamTest, GpuFunctionsGetAStreamOnTheirDeviceAndCpuFunctionsNone) {
  std::atomic<int> null_streams{0}, wrong_devices{0}, cpu_streams{0};
  auto check_gpu = [&](RunContext r) {
    if (r.stream == nullptr) ++null_streams;
    int dev = -1;
    CudaCheck(cudaGetDevice(&dev), "cudaGetDevice");
    if (dev != r.ctx.dev_id) ++wrong_devices;
  };
  for (FnProperty prop : {FnProperty::kNormal, FnProperty::kCopyToGPU, FnProperty::kCopyFromGPU,
                          FnProperty::kAsync}) {
    for (int i = 0; i < 20; ++i) {
      engine().PushSync(check_gpu, Context::GPU(0), {}, {}, prop);
      engine().PushAsync(
          [&](RunContext r, CallbackOnComplete done) {
            check_gpu(r);
            done();
          },
          Context::GPU(0), {}, {}, prop);
      engine().PushSync([&](RunContext r) { cpu_streams += r.stream != nullptr; }, Context::CPU(),
                        {}, {}, prop == FnProperty::kAsync ? prop : FnProperty::kNormal);
    }
  }
  engine().WaitForAll();
  EXPECT_EQ(null_streams.load(), 0) << "GPU functions given no stream";
  EXPECT_EQ(wrong_devices.load(), 0) << "GPU functions run with another current device";
  EXPECT_EQ(cpu_streams.load(), 0) << "CPU functions given a stream";
}

TEST_P(GpuStreamTest, WhatASyncFunctionQueuesOnItsStreamIsDoneBeforeItsSuccessorsStart) {
  // Each round fills the device buffer (a GPU worker), copies it to the host
  // (a copy worker, another stream) and checks the copy on a CPU worker.
  // Neither GPU function waits for its own stream: the engine must.
  Buffers buf;
  VarHandle on_device = engine().NewVariable();
  VarHandle on_host = engine().NewVariable();
  std::atomic<int> stale{0}, checked{0};
  constexpr int kRounds = 12;
  for (int round = 1; round <= kRounds; ++round) {
    engine().PushSync(
        [&, round](RunContext r) {
          CudaCheck(cudaMemsetAsync(buf.device(), round, kBytes, StreamOf(r)), "cudaMemsetAsync");
        },
        Context::GPU(0), {}, {on_device}, FnProperty::kNormal, 0, "fill");
    engine().PushSync(
        [&](RunContext r) {
          CudaCheck(cudaMemcpyAsync(buf.host(), buf.device(), kBytes, cudaMemcpyDeviceToHost,
                                    StreamOf(r)),
                    "cudaMemcpyAsync");
        },
        Context::GPU(0), {on_device}, {on_host}, FnProperty::kCopyFromGPU, 0, "copy to host");
    engine().PushSync(
        [&, round](RunContext) {
          stale += buf.HostMismatches(round);
          ++checked;
        },
        Context::CPU(), {on_host}, {});
  }
  engine().WaitForAll();
  EXPECT_EQ(checked.load(), kRounds);
  EXPECT_EQ(stale.load(), 0) << "a successor saw GPU work of its predecessor unfinished";
  engine().DeleteVariable([](RunContext) {}, Context::CPU(), on_device);
  engine().DeleteVariable([](RunContext) {}, Context::CPU(), on_host);
  engine().WaitForAll();
}

// On the naive engine (and for kAsync successors on any engine) a successor
// runs on the thread that calls the callback; CUDA's callback thread would
// refuse its CUDA calls.
TEST_P(GpuStreamTest, AnAsyncGpuFunctionFinishedWhenItsStreamIsDoneLetsItsSuccessorsUseCuda) {
  Buffers buf;
  VarHandle on_device = engine().NewVariable();
  VarHandle on_host = engine().NewVariable();
  std::atomic<int> stale{0}, checked{0};
  constexpr int kRounds = 12;
  for (int round = 1; round <= kRounds; ++round) {
    engine().PushAsync(
        [&, round](RunContext r, CallbackOnComplete done) {
          CudaCheck(cudaMemsetAsync(buf.device(), round, kBytes, StreamOf(r)), "cudaMemsetAsync");
          CompleteWhenStreamDone(r, done);
        },
        Context::GPU(0), {}, {on_device});
    engine().PushAsync(
        [&](RunContext r, CallbackOnComplete done) {
          CudaCheck(cudaMemcpyAsync(buf.host(), buf.device(), kBytes, cudaMemcpyDeviceToHost,
                                    StreamOf(r)),
                    "cudaMemcpyAsync");
          CompleteWhenStreamDone(r, done);
        },
        // kAsync: runs on the thread that finished the fill.
        Context::GPU(0), {on_device}, {on_host},
        round % 2 == 0 ? FnProperty::kCopyFromGPU : FnProperty::kAsync);
    engine().PushSync(
        [&, round](RunContext) {
          stale += buf.HostMismatches(round);
          ++checked;
        },
        Context::CPU(), {on_host}, {});
  }
  engine().WaitForAll();
  EXPECT_EQ(checked.load(), kRounds);
  EXPECT_EQ(stale.load(), 0) << "a successor saw GPU work of its predecessor unfinished";
  engine().DeleteVariable([](RunContext) {}, Context::CPU(), on_device);
  engine().DeleteVariable([](RunContext) {}, Context::CPU(), on_host);
  engine().WaitForAll();
}

TEST_P(GpuStreamTest, ACudaErrorReturnedInsideAGpuFunctionFailsItsVarsAndTheEngineGoesOn) {
  VarHandle v = engine().NewVariable();
  engine().PushSync(
      [](RunContext r) {
        // Not a sticky error: an invalid argument, refused at the call.
        CudaCheck(cudaMemsetAsync(nullptr, 0, 16, StreamOf(r)), "cudaMemsetAsync");
      },
      Context::GPU(0), {}, {v});
  EXPECT_THAT(MessageOf<std::runtime_error>([&] { engine().WaitForVar(v); }),
              ::testing::HasSubstr("cudaMemsetAsync"));
  Buffers buf;
  engine().PushSync(
      [&](RunContext r) {
        CudaCheck(cudaMemsetAsync(buf.device(), 3, kBytes, StreamOf(r)), "cudaMemsetAsync");
        CudaCheck(
            cudaMemcpyAsync(buf.host(), buf.device(), kBytes, cudaMemcpyDeviceToHost, StreamOf(r)),
            "cudaMemcpyAsync");
      },
      Context::GPU(0), {}, {v});
  engine().WaitForVar(v);
  EXPECT_EQ(buf.HostMismatches(3), 0);
  engine().DeleteVariable([](RunContext) {}, Context::CPU(), v);
  engine().WaitForAll();
}

// PTX for `void wait_for_flag(volatile unsigned* flag) { while (*flag == 0) {} }`.
constexpr char kWaitPtx[] = R"(
.version 7.0
.target sm_50
.address_size 64
.visible .entry wait_for_flag(.param .u64 flag)
{
  .reg .b32 %r<2>;
  .reg .b64 %rd<2>;
  .reg .pred %p<2>;
  ld.param.u64 %rd1, [flag];
SPIN:
  ld.volatile.global.u32 %r1, [%rd1];
  setp.eq.u32 %p1, %r1, 0;
  @%p1 bra SPIN;
  ret;
}
)";

TEST_P(GpuStreamTest, AnAsyncGpuFunctionFinishesWhileAnEarlierOneOnAnotherStreamStillRuns) {
  // A's kernel spins until the CPU function after B sets a flag, so B must
  // finish, and C run, while A's kernel still runs: the completion of async
  // GPU functions follows their own streams, not the order they started in.
  // B is a copy (kCopyToGPU): on another thread than A, so on another stream.
  if (kind() == EngineKind::kNaive) {
    GTEST_SKIP() << "the naive engine runs every function on one thread, one stream";
  }
  static const cudaKernel_t wait_for_flag = LoadPtxKernel(kWaitPtx, "wait_for_flag");
  void* flag_raw = nullptr;
  CudaCheck(cudaHostAlloc(&flag_raw, sizeof(unsigned), cudaHostAllocMapped), "cudaHostAlloc");
  auto* flag = static_cast<volatile unsigned*>(flag_raw);
  *flag = 0;
  Buffers buf;
  VarHandle a = engine().NewVariable();
  VarHandle b = engine().NewVariable();
  std::atomic<bool> a_done_before_c{false};
  std::atomic<bool> a_done{false};
  engine().PushAsync(
      [&](RunContext r, CallbackOnComplete done) {
        LaunchOneThread(wait_for_flag, StreamOf(r), flag_raw);
        CompleteWhenStreamDone(r, done);
      },
      Context::GPU(0), {}, {a});
  engine().PushSync([&](RunContext) { a_done = true; }, Context::CPU(), {a}, {});
  engine().PushAsync(
      [&](RunContext r, CallbackOnComplete done) {
        CudaCheck(cudaMemsetAsync(buf.device(), 1, kBytes, StreamOf(r)), "cudaMemsetAsync");
        CompleteWhenStreamDone(r, done);
      },
      Context::GPU(0), {}, {b}, FnProperty::kCopyToGPU);
  Event c_ran;
  engine().PushSync(
      [&](RunContext) {
        a_done_before_c = a_done.load();
        c_ran.Notify();
      },
      Context::CPU(), {b}, {});
  const bool c_ran_with_a_running = c_ran.WaitFor();
  *flag = 1;  // lets A's kernel end, also when C did not run: no hang
  engine().WaitForAll();
  EXPECT_TRUE(c_ran_with_a_running) << "B finished only after A (or never)";
  EXPECT_FALSE(a_done_before_c.load()) << "A finished before C";
  EXPECT_TRUE(a_done.load());
  cudaFreeHost(flag_raw);
  engine().DeleteVariable([](RunContext) {}, Context::CPU(), a);
  engine().DeleteVariable([](RunContext) {}, Context::CPU(), b);
  engine().WaitForAll();
}

DEPENGINE_INSTANTIATE_ALL_ENGINES(GpuStreamTest);

}  // namespace
}  // namespace depengine::test
