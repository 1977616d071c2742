// The debug watchdog names a function that runs too long (here: an async
// function whose callback is held back) instead of letting it hang silently.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <string>
#include <thread>

#include "depengine/engine.h"
#include "stderr_capture.h"

namespace depengine {
namespace {

TEST(Watchdog, ReportsAsyncFunctionWhoseCallbackIsLate) {
  for (EngineKind kind : {EngineKind::kNaive, EngineKind::kPooled, EngineKind::kPerDevice}) {
    SCOPED_TRACE(EngineKindName(kind));
    EngineOptions o;
    o.kind = kind;
    o.cpu_worker_threads = 1;
    o.watchdog_seconds = 0.2;
    auto e = CreateEngine(o);
    VarHandle v = e->NewVariable();
    CallbackOnComplete held;
    support::StderrCapture err;
    const auto pushed = std::chrono::steady_clock::now();
    e->PushAsync([&](RunContext, CallbackOnComplete done) { held = done; }, Context::CPU(), {}, {v},
                 FnProperty::kAsync, 0, "never_finishes_yet");
    // The watchdog looks every quarter of the limit: the report is due about
    // 0.25 s after the push. Waited for, not slept for (a loaded machine may
    // be late, and the test goes on as soon as it appears).
    // (EXPECT, not ASSERT: the callback below must run, or the engine's
    // destructor would wait for the function forever.)
    EXPECT_TRUE(err.WaitFor("never_finishes_yet")) << "stderr: " << err.Text();
    EXPECT_GE(std::chrono::steady_clock::now() - pushed, std::chrono::milliseconds(200))
        << "reported before the limit";
    EXPECT_THAT(err.Text(), ::testing::HasSubstr("watchdog"));
    EXPECT_THAT(err.Text(), ::testing::HasSubstr("running for"));
    held();  // finishing it lets the engine shut down
    e->WaitForVar(v);
  }
}

TEST(Watchdog, FromEnvReadsSecondsAndRejectsGarbage) {
  setenv("DEPENGINE_WATCHDOG_SECONDS", "2.5", 1);
  EXPECT_DOUBLE_EQ(EngineOptions::FromEnv().watchdog_seconds, 2.5);
  setenv("DEPENGINE_WATCHDOG_SECONDS", "soon", 1);
  try {
    EngineOptions::FromEnv();
    ADD_FAILURE() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("DEPENGINE_WATCHDOG_SECONDS"));
  }
  unsetenv("DEPENGINE_WATCHDOG_SECONDS");
}

TEST(Watchdog, OffByDefault) { EXPECT_EQ(EngineOptions{}.watchdog_seconds, 0); }

}  // namespace
}  // namespace depengine
