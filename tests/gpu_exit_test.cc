// GPU work in flight when main returns: the process-wide engine drains it at
// exit, whichever of the engine and the CUDA runtime started first. Each case
// runs gpu_exit_scenarios in a process of its own, and skips where no GPU is
// present.
#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

struct Outcome {
  int status = -1;  // as pclose reports timeout(1)'s
  std::string output;
};

Outcome RunScenario(const std::string& engine_type, const std::string& scenario) {
  const std::string cmd = "DEPENGINE_ENGINE_TYPE=" + engine_type + " timeout 60 " +
                          std::string(DEPENGINE_GPU_EXIT_SCENARIOS) + " " + scenario + " 2>&1";
  Outcome out;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return out;
  std::array<char, 512> buf;
  while (std::fgets(buf.data(), buf.size(), pipe) != nullptr) out.output += buf.data();
  out.status = pclose(pipe);
  return out;
}

bool GpuPresent() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

class GpuExitTest : public ::testing::TestWithParam<const char*> {};

TEST_P(GpuExitTest, GpuWorkInFlightAtExitIsDrainedWhateverStartedFirst) {
  if (!GpuPresent()) GTEST_SKIP() << "no GPU here";
  for (const char* scenario : {"engine-first", "cuda-first"}) {
    const Outcome r = RunScenario(GetParam(), scenario);
    EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0)
        << scenario << ": status " << r.status << ": " << r.output;
    EXPECT_EQ(r.output, "last byte 20\n") << scenario;
  }
}

INSTANTIATE_TEST_SUITE_P(Engines, GpuExitTest,
                         ::testing::Values("NaiveEngine", "ThreadedEnginePooled",
                                           "ThreadedEnginePerDevice"));

}  // namespace
