// What the real-GPU tests share: a check of CUDA runtime calls and an engine
// fixture that skips where no GPU is usable. Built only with CUDA.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

#include "engine_fixture.h"

namespace depengine::test {

// Throws std::runtime_error naming `what` when a CUDA call failed: inside a
// function, that fails the function's vars and reaches the test's wait.
inline void CudaCheck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Loads kernel `name` from the PTX text of its entry (".visible .entry
// name(...) {...}"), JIT-compiled by the driver for whatever GPU is present
// (no nvcc needed to build the tests).
inline cudaKernel_t LoadPtxKernel(const char* entry, const char* name) {
  const std::string ptx = std::string(".version 7.0\n.target sm_50\n.address_size 64\n") + entry;
  cudaLibrary_t library = nullptr;
  CudaCheck(cudaLibraryLoadData(&library, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0),
            "cudaLibraryLoadData");
  cudaKernel_t kernel = nullptr;
  CudaCheck(cudaLibraryGetKernel(&kernel, library, name), "cudaLibraryGetKernel");
  return kernel;
}

// Queues `kernel(arg)` on `stream`, one block of one thread.
inline void LaunchOneThread(cudaKernel_t kernel, cudaStream_t stream, void* arg) {
  void* args[] = {&arg};
  CudaCheck(
      cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(1), dim3(1), args, 0, stream),
      "cudaLaunchKernel");
}

// Every engine kind on a real GPU(0); each test skips where none is usable.
class RealGpuTest : public EngineTest {
 protected:
  void SetUp() override {
    EngineTest::SetUp();
    try {
      engine().PushSync([](RunContext) {}, Context::GPU(0), {}, {});
      engine().WaitForAll();
    } catch (const std::invalid_argument& e) {
      GTEST_SKIP() << "no usable GPU here: " << e.what();
    }
  }
};

}  // namespace depengine::test
