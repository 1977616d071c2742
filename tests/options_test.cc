// EngineOptions: FromEnv reads every DEPENGINE_* variable (and MXNet's alias
// ThreadedEngine); an unknown value is an error naming the variable and the
// values it accepts; thread counts are honoured; Engine::Get() is one
// process-wide engine.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine_fixture.h"

namespace depengine::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const char* const kVariables[] = {
    "DEPENGINE_ENGINE_TYPE",           "DEPENGINE_CPU_WORKER_NTHREADS",
    "DEPENGINE_CPU_PRIORITY_NTHREADS", "DEPENGINE_GPU_WORKER_NTHREADS",
    "DEPENGINE_GPU_COPY_NTHREADS",     "DEPENGINE_MAX_IN_FLIGHT",
    "DEPENGINE_SIMULATED_GPUS",        "DEPENGINE_WORKER_SPIN_US",
};

// Unsets every DEPENGINE_* variable for the test and restores them after.
class OptionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kVariables) {
      const char* v = std::getenv(name);
      saved_.emplace_back(name, v != nullptr ? std::optional<std::string>(v) : std::nullopt);
      unsetenv(name);
    }
  }
  void TearDown() override {
    for (const auto& [name, value] : saved_) {
      if (value) {
        setenv(name.c_str(), value->c_str(), 1);
      } else {
        unsetenv(name.c_str());
      }
    }
  }
  static void Set(const char* name, const char* value) { setenv(name, value, 1); }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_F(OptionsTest, NothingSetGivesTheDefaults) {
  const EngineOptions o = EngineOptions::FromEnv();
  const EngineOptions d;
  EXPECT_EQ(o.kind, EngineKind::kPerDevice);
  EXPECT_EQ(o.kind, d.kind);
  EXPECT_EQ(o.cpu_worker_threads, 0);
  EXPECT_EQ(o.cpu_priority_threads, 0);
  EXPECT_EQ(o.gpu_worker_threads, 0);
  EXPECT_EQ(o.gpu_copy_threads, 0);
  EXPECT_EQ(o.max_in_flight, 0u);
  EXPECT_EQ(o.simulated_gpus, 0);
  EXPECT_EQ(o.worker_spin_us, EngineOptions::kDefaultWorkerSpinUs);
  EXPECT_EQ(o.worker_spin_us, d.worker_spin_us);
}

TEST_F(OptionsTest, EngineTypeAcceptsEveryNameAndMXNetsAlias) {
  const std::pair<const char*, EngineKind> cases[] = {
      {"NaiveEngine", EngineKind::kNaive},
      {"ThreadedEnginePooled", EngineKind::kPooled},
      {"ThreadedEngine", EngineKind::kPooled},  // MXNet's name for the pooled engine
      {"ThreadedEnginePerDevice", EngineKind::kPerDevice},
  };
  for (const auto& [name, kind] : cases) {
    Set("DEPENGINE_ENGINE_TYPE", name);
    EXPECT_EQ(EngineOptions::FromEnv().kind, kind) << name;
  }
  for (EngineKind kind : {EngineKind::kNaive, EngineKind::kPooled, EngineKind::kPerDevice}) {
    Set("DEPENGINE_ENGINE_TYPE", EngineKindName(kind));
    EXPECT_EQ(EngineOptions::FromEnv().kind, kind) << EngineKindName(kind);
  }
}

TEST_F(OptionsTest, UnknownEngineTypeNamesTheVariableAndTheAcceptedValues) {
  for (const char* bad : {"Bogus", "naiveengine", "ThreadedEnginePerDevice2"}) {
    Set("DEPENGINE_ENGINE_TYPE", bad);
    EXPECT_THAT(MessageOf<std::invalid_argument>([] { EngineOptions::FromEnv(); }),
                AllOf(HasSubstr("DEPENGINE_ENGINE_TYPE"), HasSubstr(bad), HasSubstr("NaiveEngine"),
                      HasSubstr("ThreadedEnginePooled"),
                      ::testing::ContainsRegex("ThreadedEngine([^A-Za-z]|$)"),
                      HasSubstr("ThreadedEnginePerDevice")))
        << bad;
  }
}

TEST_F(OptionsTest, EveryCountVariableIsRead) {
  Set("DEPENGINE_CPU_WORKER_NTHREADS", "3");
  Set("DEPENGINE_CPU_PRIORITY_NTHREADS", "5");
  Set("DEPENGINE_GPU_WORKER_NTHREADS", "4");
  Set("DEPENGINE_GPU_COPY_NTHREADS", "2");
  Set("DEPENGINE_MAX_IN_FLIGHT", "1000");
  Set("DEPENGINE_SIMULATED_GPUS", "2");
  Set("DEPENGINE_WORKER_SPIN_US", "0");
  const EngineOptions o = EngineOptions::FromEnv();
  EXPECT_EQ(o.worker_spin_us, 0);
  EXPECT_EQ(o.cpu_worker_threads, 3);
  EXPECT_EQ(o.cpu_priority_threads, 5);
  EXPECT_EQ(o.gpu_worker_threads, 4);
  EXPECT_EQ(o.gpu_copy_threads, 2);
  EXPECT_EQ(o.max_in_flight, 1000u);
  EXPECT_EQ(o.simulated_gpus, 2);
  EXPECT_EQ(o.kind, EngineKind::kPerDevice);
}

TEST_F(OptionsTest, BadCountNamesTheVariable) {
  for (const char* name : kVariables) {
    if (std::string(name) == "DEPENGINE_ENGINE_TYPE") continue;
    for (const char* bad : {"abc", "-1", "3x"}) {
      Set(name, bad);
      EXPECT_THAT(MessageOf<std::invalid_argument>([] { EngineOptions::FromEnv(); }),
                  AllOf(HasSubstr(name), HasSubstr(bad)))
          << name << "=" << bad;
    }
    unsetenv(name);
  }
}

// A count that does not fit its field is refused, not wrapped: 2^32 + 1
// would become 1 thread and 2^31 a negative count.
TEST_F(OptionsTest, CountTooLargeForItsFieldNamesTheVariable) {
  for (const char* name : {"DEPENGINE_CPU_WORKER_NTHREADS", "DEPENGINE_CPU_PRIORITY_NTHREADS",
                           "DEPENGINE_GPU_WORKER_NTHREADS", "DEPENGINE_GPU_COPY_NTHREADS",
                           "DEPENGINE_SIMULATED_GPUS"}) {
    for (const char* big : {"2147483648", "4294967297", "99999999999999999999"}) {
      Set(name, big);
      EXPECT_THAT(MessageOf<std::invalid_argument>([] { EngineOptions::FromEnv(); }),
                  AllOf(HasSubstr(name), HasSubstr(big)))
          << name << "=" << big;
    }
    Set(name, "2147483647");  // the largest that fits is still read
    EXPECT_NO_THROW(EngineOptions::FromEnv()) << name;
    unsetenv(name);
  }
  Set("DEPENGINE_MAX_IN_FLIGHT", "99999999999999999999");
  EXPECT_THAT(MessageOf<std::invalid_argument>([] { EngineOptions::FromEnv(); }),
              HasSubstr("DEPENGINE_MAX_IN_FLIGHT"));
}

// DEPENGINE_WORKER_SPIN_US: 0 is a value (no spin), not "the default", and
// the bound is the field's range, not int's.
TEST_F(OptionsTest, WorkerSpinIsReadUpToItsBoundAndSaysWhatZeroMeans) {
  const std::string max = std::to_string(EngineOptions::kMaxWorkerSpinUs);
  Set("DEPENGINE_WORKER_SPIN_US", max.c_str());
  EXPECT_EQ(EngineOptions::FromEnv().worker_spin_us, EngineOptions::kMaxWorkerSpinUs);
  const std::string over = std::to_string(EngineOptions::kMaxWorkerSpinUs + 1);
  Set("DEPENGINE_WORKER_SPIN_US", over.c_str());
  EXPECT_THAT(MessageOf<std::invalid_argument>([] { EngineOptions::FromEnv(); }),
              AllOf(HasSubstr("DEPENGINE_WORKER_SPIN_US=" + over), HasSubstr("at most " + max)));
  Set("DEPENGINE_WORKER_SPIN_US", "-5");
  EXPECT_THAT(MessageOf<std::invalid_argument>([] { EngineOptions::FromEnv(); }),
              AllOf(HasSubstr("DEPENGINE_WORKER_SPIN_US=-5"), HasSubstr("0 = sleep at once")));
}

// Every value of a size_t field is accepted (max_in_flight up to SIZE_MAX),
// and a count too large for any integer says "too large", not that it is
// not a non-negative integer.
TEST_F(OptionsTest, CountsAreReadUpToTheLargestValueOfTheirField) {
  const std::string max = std::to_string(std::numeric_limits<std::size_t>::max());
  Set("DEPENGINE_MAX_IN_FLIGHT", max.c_str());
  EXPECT_EQ(EngineOptions::FromEnv().max_in_flight, std::numeric_limits<std::size_t>::max());
  for (const char* name : {"DEPENGINE_CPU_WORKER_NTHREADS", "DEPENGINE_MAX_IN_FLIGHT"}) {
    Set(name, "99999999999999999999999");
    EXPECT_THAT(
        MessageOf<std::invalid_argument>([] { EngineOptions::FromEnv(); }),
        AllOf(HasSubstr(name), HasSubstr("99999999999999999999999"), HasSubstr("too large")))
        << name;
    unsetenv(name);
  }
}

// Whitespace around a value is ignored on both sides alike (it was accepted
// before a count and refused after it), a blank value is unset, and a
// leading '+' is accepted; a sign or space inside the number is not.
TEST_F(OptionsTest, SurroundingWhitespaceIsIgnoredOnBothSides) {
  for (const char* v : {" 3", "3 ", "\t3\n", "+3", " +3 "}) {
    Set("DEPENGINE_CPU_WORKER_NTHREADS", v);
    EXPECT_EQ(EngineOptions::FromEnv().cpu_worker_threads, 3) << "'" << v << "'";
  }
  Set("DEPENGINE_CPU_WORKER_NTHREADS", "   ");
  EXPECT_EQ(EngineOptions::FromEnv().cpu_worker_threads, 0) << "a blank value is unset";
  for (const char* bad : {"3 4", "+-3", "-3", "++3", "+", "- 3"}) {
    Set("DEPENGINE_CPU_WORKER_NTHREADS", bad);
    EXPECT_THAT(MessageOf<std::invalid_argument>([] { EngineOptions::FromEnv(); }),
                HasSubstr("DEPENGINE_CPU_WORKER_NTHREADS"))
        << "'" << bad << "'";
  }
  unsetenv("DEPENGINE_CPU_WORKER_NTHREADS");
  for (const char* v : {" NaiveEngine", "NaiveEngine ", "\tNaiveEngine\n"}) {
    Set("DEPENGINE_ENGINE_TYPE", v);
    EXPECT_EQ(EngineOptions::FromEnv().kind, EngineKind::kNaive) << "'" << v << "'";
  }
  Set("DEPENGINE_ENGINE_TYPE", " ");
  EXPECT_EQ(EngineOptions::FromEnv().kind, EngineKind::kPerDevice) << "a blank value is unset";
}

TEST_F(OptionsTest, FromEnvBuildsTheEngineItNames) {
  Set("DEPENGINE_ENGINE_TYPE", "NaiveEngine");
  {
    auto e = CreateEngine(EngineOptions::FromEnv());
    std::thread::id ran_on;
    e->PushSync([&](RunContext) { ran_on = std::this_thread::get_id(); }, Context::CPU(), {}, {});
    EXPECT_EQ(ran_on, std::this_thread::get_id()) << "NaiveEngine runs functions at push";
  }
  Set("DEPENGINE_ENGINE_TYPE", "ThreadedEnginePerDevice");
  Set("DEPENGINE_SIMULATED_GPUS", "1");
  {
    auto e = CreateEngine(EngineOptions::FromEnv());
    RunContext seen;
    e->PushSync([&](RunContext r) { seen = r; }, Context::GPU(0), {}, {});
    e->WaitForAll();
    EXPECT_TRUE(seen.ctx == Context::GPU(0));
  }
}

// Checks that the pool that (ctx, prop) goes to has exactly `n` workers: `n`
// functions run at the same time, and an (n+1)-th does not start while they
// all block. Returns "" when it does, else what went wrong.
std::string CheckPoolSize(Engine& e, int n, Context ctx, FnProperty prop) {
  Rendezvous meet(n);
  Counter met;
  Event release;
  Event extra_ran;
  for (int i = 0; i < n; ++i) {
    e.PushSync(
        [&](RunContext) {
          if (meet.ArriveAndWait()) met.Add();
          release.WaitFor();
        },
        ctx, {}, {}, prop);
  }
  e.PushSync([&](RunContext) { extra_ran.Notify(); }, ctx, {}, {}, prop);
  const bool all_met = met.WaitAtLeast(n);
  const bool extra_ran_early = extra_ran.WaitFor(kQuiet);
  release.Notify();
  e.WaitForAll();
  if (!all_met) return "fewer than " + std::to_string(n) + " workers";
  if (extra_ran_early) return "more than " + std::to_string(n) + " workers";
  return "";
}

TEST_F(OptionsTest, ThreadCountsFromTheEnvironmentAreHonoured) {
  Set("DEPENGINE_ENGINE_TYPE", "ThreadedEnginePerDevice");
  Set("DEPENGINE_CPU_WORKER_NTHREADS", "3");
  Set("DEPENGINE_CPU_PRIORITY_NTHREADS", "2");
  Set("DEPENGINE_GPU_WORKER_NTHREADS", "3");
  Set("DEPENGINE_GPU_COPY_NTHREADS", "2");
  Set("DEPENGINE_SIMULATED_GPUS", "1");
  auto e = CreateEngine(EngineOptions::FromEnv());
  EXPECT_EQ(CheckPoolSize(*e, 3, Context::CPU(), FnProperty::kNormal), "");
  EXPECT_EQ(CheckPoolSize(*e, 2, Context::CPU(), FnProperty::kCPUPrioritized), "");
  EXPECT_EQ(CheckPoolSize(*e, 3, Context::GPU(0), FnProperty::kNormal), "");
  EXPECT_EQ(CheckPoolSize(*e, 2, Context::GPU(0), FnProperty::kCopyToGPU), "");

  Set("DEPENGINE_ENGINE_TYPE", "ThreadedEngine");
  auto pooled = CreateEngine(EngineOptions::FromEnv());
  EXPECT_EQ(CheckPoolSize(*pooled, 3, Context::CPU(), FnProperty::kNormal), "");
  EXPECT_EQ(CheckPoolSize(*pooled, 2, Context::CPU(), FnProperty::kCopyFromGPU), "");
}

TEST_F(OptionsTest, DefaultThreadCountsAreSensible) {
  EngineOptions o;
  o.simulated_gpus = 1;
  auto e = CreateEngine(o);
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(CheckPoolSize(*e, hw, Context::CPU(), FnProperty::kNormal), "")
      << "default CPU workers: the hardware threads";
  EXPECT_EQ(CheckPoolSize(*e, 2, Context::CPU(), FnProperty::kCPUPrioritized), "")
      << "default CPU priority threads: 2";
  EXPECT_EQ(CheckPoolSize(*e, 2, Context::GPU(0), FnProperty::kNormal), "")
      << "default GPU workers: 2";
  EXPECT_EQ(CheckPoolSize(*e, 1, Context::GPU(0), FnProperty::kCopyFromGPU), "")
      << "default GPU copy threads: 1";
}

TEST_F(OptionsTest, EngineGetIsOneProcessWideEngine) {
  Engine* e = Engine::Get();
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(Engine::Get(), e);
  std::shared_ptr<Engine> ref = Engine::_GetSharedRef();
  EXPECT_EQ(ref.get(), e);
  int value = 0;
  VarHandle v = e->NewVariable();
  e->PushSync([&](RunContext) { value = 1; }, Context::CPU(), {}, {v});
  e->WaitForVar(v);
  EXPECT_EQ(value, 1);
  e->DeleteVariable(nullptr, Context::CPU(), v);
  e->WaitForAll();
}

}  // namespace
}  // namespace depengine::test
