// A kernel that faults after its function returned: the engine finds the
// error when it waits for a sync function's stream (CompleteWhenStreamDone
// finds it for an async one), fails the function's vars with a message that
// names the function and the CUDA error, skips what depends on them, and
// keeps running CPU work. A fault leaves the
// process's CUDA context unusable, so ctest runs each of these tests in a
// process of its own. Each test skips where no GPU is present.
#include <atomic>

#include "depengine/gpu.h"
#include "gpu_support.h"

namespace depengine::test {
namespace {

// PTX for `void store_seven(unsigned* p) { *p = 7; }`.
constexpr char kStorePtx[] = R"(
.visible .entry store_seven(.param .u64 p)
{
  .reg .b32 %r<2>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [p];
  mov.u32 %r1, 7;
  st.global.u32 [%rd1], %r1;
  ret;
}
)";

// Queues store_seven(p) on `stream`.
void LaunchStoreSeven(cudaStream_t stream, unsigned* p) {
  static const cudaKernel_t kernel = LoadPtxKernel(kStorePtx, "store_seven");
  LaunchOneThread(kernel, stream, p);
}

class GpuFaultTest : public RealGpuTest {};

TEST_P(GpuFaultTest, TheKernelStoresWhenGivenAGoodAddress) {
  // The kernel itself works: the fault below is the bad address alone.
  void* raw = nullptr;
  CudaCheck(cudaMalloc(&raw, sizeof(unsigned)), "cudaMalloc");
  auto* word = static_cast<unsigned*>(raw);
  VarHandle v = engine().NewVariable();
  unsigned seen = 0;
  engine().PushSync(
      [&](RunContext r) { LaunchStoreSeven(static_cast<cudaStream_t>(r.stream), word); },
      Context::GPU(0), {}, {v});
  engine().PushSync(
      [&](RunContext r) {
        CudaCheck(cudaMemcpyAsync(&seen, word, sizeof seen, cudaMemcpyDeviceToHost,
                                  static_cast<cudaStream_t>(r.stream)),
                  "cudaMemcpyAsync");
      },
      Context::GPU(0), {v}, {}, FnProperty::kCopyFromGPU);
  engine().WaitForAll();
  EXPECT_EQ(seen, 7u);
  cudaFree(word);
}

TEST_P(GpuFaultTest, AFaultFoundAfterASyncFunctionReturnedFailsItsVarsAndReachesTheWaiter) {
  VarHandle v = engine().NewVariable();
  VarHandle after = engine().NewVariable();
  std::atomic<bool> dependent_ran{false}, cpu_ran{false};
  engine().PushSync(
      [](RunContext r) {
        LaunchStoreSeven(static_cast<cudaStream_t>(r.stream), reinterpret_cast<unsigned*>(8));
      },
      Context::GPU(0), {}, {v}, FnProperty::kNormal, 0, "bad_store");
  engine().PushSync([&](RunContext) { dependent_ran = true; }, Context::CPU(), {v}, {after});
  const std::string message = MessageOf<std::runtime_error>([&] { engine().WaitForVar(v); });
  EXPECT_THAT(message, ::testing::HasSubstr("bad_store"));
  EXPECT_THAT(message, ::testing::HasSubstr("gpu(0)"));
  EXPECT_THAT(message, ::testing::HasSubstr("cudaErrorIllegalAddress"));
  EXPECT_THAT(MessageOf<std::runtime_error>([&] { engine().WaitForVar(after); }),
              ::testing::HasSubstr("bad_store"));
  EXPECT_FALSE(dependent_ran.load()) << "a function that reads the failed var ran";
  engine().PushSync([&](RunContext) { cpu_ran = true; }, Context::CPU(), {}, {v});
  engine().WaitForVar(v);
  EXPECT_TRUE(cpu_ran.load()) << "the engine stopped running CPU work after the fault";
}

TEST_P(GpuFaultTest, AFaultReachesAnAsyncFunctionFinishedWhenItsStreamIsDone) {
  VarHandle v = engine().NewVariable();
  engine().PushAsync(
      [](RunContext r, CallbackOnComplete done) {
        LaunchStoreSeven(static_cast<cudaStream_t>(r.stream), reinterpret_cast<unsigned*>(8));
        CompleteWhenStreamDone(r, done);
      },
      Context::GPU(0), {}, {v});
  const std::string message = MessageOf<std::runtime_error>([&] { engine().WaitForVar(v); });
  EXPECT_THAT(message, ::testing::HasSubstr("gpu(0)"));
  EXPECT_THAT(message, ::testing::HasSubstr("cudaErrorIllegalAddress"));
  bool cpu_ran = false;
  engine().PushSync([&](RunContext) { cpu_ran = true; }, Context::CPU(), {}, {v});
  engine().WaitForVar(v);
  EXPECT_TRUE(cpu_ran);
}

DEPENGINE_INSTANTIATE_ALL_ENGINES(GpuFaultTest);

}  // namespace
}  // namespace depengine::test
