// GPU work in flight when main returns: the process-wide engine drains it at
// exit, whichever of the engine and the CUDA runtime started first. Each case
// runs gpu_exit_scenarios in a process of its own, and skips where no GPU is
// present.
#include <cuda_runtime_api.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <string>

#include "program_outcome.h"

namespace {

using Outcome = depengine::test::ProgramOutcome;

// Runs gpu_exit_scenarios `scenario` on the engine kind `engine_type`,
// killed after 60 s.
Outcome RunScenario(const std::string& engine_type, const std::string& scenario) {
  return depengine::test::RunProgram("DEPENGINE_ENGINE_TYPE=" + engine_type + " timeout 60 " +
                                     std::string(DEPENGINE_GPU_EXIT_SCENARIOS) + " " + scenario);
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
