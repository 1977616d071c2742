// The debug watchdog names a function that runs too long (here: an async
// function whose callback is held back) instead of letting it hang silently.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <string>
#include <thread>

#include "depengine/engine.h"

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
    ::testing::internal::CaptureStderr();
    e->PushAsync([&](RunContext, CallbackOnComplete done) { held = done; }, Context::CPU(), {}, {v},
                 FnProperty::kAsync, 0, "never_finishes_yet");
    // The watchdog scans once a second: the report is due within limit + 1 s.
    // (A time-based feature: waiting out its period is the test.)
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    const std::string report = ::testing::internal::GetCapturedStderr();
    EXPECT_THAT(report, ::testing::HasSubstr("never_finishes_yet"));
    EXPECT_THAT(report, ::testing::HasSubstr("watchdog"));
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
