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

// Rounds of: fill the device buffer with the round's number, copy it to the
// host, check the host buffer on a CPU worker. A test pushes the fill and
// the copy its way (sync or async), then PushCheck; none waits for its own
// stream, so a check sees the round's bytes only if the engine made each
// step wait for the last one's GPU work.
class FillCopyCheck {
 public:
  static constexpr int kRounds = 12;

  explicit FillCopyCheck(Engine& e)
      : engine_(e), on_device_(e.NewVariable()), on_host_(e.NewVariable()) {}

  VarHandle on_device() const { return on_device_; }
  VarHandle on_host() const { return on_host_; }

  void Fill(int round, const RunContext& r) {
    CudaCheck(cudaMemsetAsync(buf_.device(), round, kBytes, StreamOf(r)), "cudaMemsetAsync");
  }
  void CopyToHost(const RunContext& r) {
    CudaCheck(
        cudaMemcpyAsync(buf_.host(), buf_.device(), kBytes, cudaMemcpyDeviceToHost, StreamOf(r)),
        "cudaMemcpyAsync");
  }
  void PushCheck(int round) {
    engine_.PushSync(
        [this, round](RunContext) {
          stale_ += buf_.HostMismatches(round);
          ++checked_;
        },
        Context::CPU(), {on_host_}, {});
  }
  // Waits for every round, checks them, and deletes the vars.
  void Finish() {
    engine_.WaitForAll();
    EXPECT_EQ(checked_.load(), kRounds);
    EXPECT_EQ(stale_.load(), 0) << "a successor saw GPU work of its predecessor unfinished";
    engine_.DeleteVariable([](RunContext) {}, Context::CPU(), on_device_);
    engine_.DeleteVariable([](RunContext) {}, Context::CPU(), on_host_);
    engine_.WaitForAll();
  }

 private:
  Engine& engine_;
  Buffers buf_;
  VarHandle on_device_;
  VarHandle on_host_;
  std::atomic<int> stale_{0};    // sampled bytes of the wrong round, over all checks
  std::atomic<int> checked_{0};  // checks run
};

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
  // The fill on a GPU worker, the copy on a copy worker (another stream).
  FillCopyCheck run(engine());
  for (int round = 1; round <= FillCopyCheck::kRounds; ++round) {
    engine().PushSync([&, round](RunContext r) { run.Fill(round, r); }, Context::GPU(0), {},
                      {run.on_device()}, FnProperty::kNormal, 0, "fill");
    engine().PushSync([&](RunContext r) { run.CopyToHost(r); }, Context::GPU(0), {run.on_device()},
                      {run.on_host()}, FnProperty::kCopyFromGPU, 0, "copy to host");
    run.PushCheck(round);
  }
  run.Finish();
}

// On the naive engine (and for kAsync successors on any engine) a successor
// runs on the thread that calls the callback; CUDA's callback thread would
// refuse its CUDA calls.
TEST_P(GpuStreamTest, AnAsyncGpuFunctionFinishedWhenItsStreamIsDoneLetsItsSuccessorsUseCuda) {
  FillCopyCheck run(engine());
  for (int round = 1; round <= FillCopyCheck::kRounds; ++round) {
    engine().PushAsync(
        [&, round](RunContext r, CallbackOnComplete done) {
          run.Fill(round, r);
          CompleteWhenStreamDone(r, done);
        },
        Context::GPU(0), {}, {run.on_device()});
    engine().PushAsync(
        [&](RunContext r, CallbackOnComplete done) {
          run.CopyToHost(r);
          CompleteWhenStreamDone(r, done);
        },
        // kAsync: runs on the thread that finished the fill.
        Context::GPU(0), {run.on_device()}, {run.on_host()},
        round % 2 == 0 ? FnProperty::kCopyFromGPU : FnProperty::kAsync);
    run.PushCheck(round);
  }
  run.Finish();
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
