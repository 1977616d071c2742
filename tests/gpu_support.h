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
