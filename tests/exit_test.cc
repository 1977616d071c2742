// The process-wide engine at exit, and engines released from inside their
// own functions. Each case runs exit_scenarios in a process of its own:
// what is tested happens at process exit, or ends the process.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <string>

#include "program_outcome.h"

namespace {

using ::testing::HasSubstr;

using Outcome = depengine::test::ProgramOutcome;

// Runs exit_scenarios with `args`, killed after 60 s.
Outcome RunScenario(const std::string& env, const std::string& args) {
  return depengine::test::RunProgram(env + " timeout 60 " + std::string(DEPENGINE_EXIT_SCENARIOS) +
                                     " " + args);
}

// The naive engine runs a function at push, never at exit: threaded kinds only.
const char* const kEngineTypes[] = {"ThreadedEnginePooled", "ThreadedEnginePerDevice"};

TEST(ExitTest, FunctionDrainedAtExitMayCallGet) {
  for (const char* type : kEngineTypes) {
    const Outcome r = RunScenario(std::string("DEPENGINE_ENGINE_TYPE=") + type, "get-at-exit");
    EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << type << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("exit: Get() returned the engine")) << type;
  }
}

TEST(ExitTest, SharedRefRequestedWhileTheEngineIsDestroyedAtExitIsRefused) {
  for (const char* type : kEngineTypes) {
    const Outcome r =
        RunScenario(std::string("DEPENGINE_ENGINE_TYPE=") + type, "shared-ref-at-exit");
    EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << type << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("_GetSharedRef() refused")) << type;
    EXPECT_THAT(r.output, HasSubstr("being destroyed at exit")) << type;
  }
}

// Bug: _GetSharedRef() read the process-wide engine's weak reference, a
// member of an object destroyed at exit, so a static destructor that ran
// after it (an object built before the engine) read freed memory
// (AddressSanitizer: heap-use-after-free) instead of being refused.
TEST(ExitTest, SharedRefRequestedAfterTheEngineWasDestroyedAtExitIsRefused) {
  for (const char* type : {"NaiveEngine", "ThreadedEnginePooled", "ThreadedEnginePerDevice"}) {
    const Outcome r =
        RunScenario(std::string("DEPENGINE_ENGINE_TYPE=") + type, "shared-ref-after-exit");
    EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << type << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("_GetSharedRef() refused")) << type << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("being destroyed at exit")) << type;
  }
}

TEST(ExitTest, GetAfterTheEngineWasDestroyedAtExitIsRefused) {
  for (const char* type : {"NaiveEngine", "ThreadedEnginePooled", "ThreadedEnginePerDevice"}) {
    const Outcome r = RunScenario(std::string("DEPENGINE_ENGINE_TYPE=") + type, "get-after-exit");
    EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << type << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("Get() refused")) << type << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("destroyed at exit")) << type;
  }
}

// An engine whose last reference is dropped inside one of its own functions
// cannot be destroyed on that thread (it would wait for that function): it
// is finished and its threads joined by a thread of its own, after the
// function returns. What was pushed after the function still runs, the
// engine's threads end, and the process goes on.
TEST(ExitTest, EngineWhoseLastReferenceIsInAClosureFinishesItsWorkAndEnds) {
  const struct {
    int kind;
    const char* mode;
  } cases[] = {{1, "sync"}, {2, "sync"}, {0, "async"}, {1, "async"}, {2, "async"}};
  for (const auto& c : cases) {
    const Outcome r = RunScenario(
        "", std::string("last-ref-in-closure ") + std::to_string(c.kind) + " " + c.mode);
    const std::string name = std::to_string(c.kind) + " " + c.mode;
    EXPECT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0) << name << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("threads left: 0; later function ran after F: yes")) << name;
  }
}

}  // namespace
