// The debug watchdog names a function that runs too long (here: an async
// function whose callback is held back) instead of letting it hang silently.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
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
    // Reported once: about six more scans go by, and none names it again (a
    // watchdog thread starved of CPU scans less often, which can only hide
    // a repeat, never invent one).
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const std::string text = err.Text();
    int reports = 0;
    for (std::size_t at = text.find("'never_finishes_yet'"); at != std::string::npos;
         at = text.find("'never_finishes_yet'", at + 1)) {
      ++reports;
    }
    EXPECT_EQ(reports, 1) << "stderr: " << text;
    held();  // finishing it lets the engine shut down
    e->WaitForVar(v);
  }
}

// A report to a stderr that nobody reads (a full pipe, a stopped terminal)
// blocks the watchdog's write. Every function's start and end takes the
// watchdog's lock, which the write used to hold: the whole engine stopped
// until somebody read stderr. Here stderr is a full pipe while a function
// runs past the limit; another function must still run and finish.
TEST(Watchdog, AReportStuckOnAFullStderrHoldsUpNoFunction) {
  EngineOptions o;
  o.kind = EngineKind::kPerDevice;
  o.cpu_worker_threads = 2;
  o.watchdog_seconds = 0.05;
  auto e = CreateEngine(o);
  VarHandle held_var = e->NewVariable(), other = e->NewVariable();

  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  std::fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  ASSERT_GE(saved, 0);
  ASSERT_GE(dup2(pipe_fds[1], STDERR_FILENO), 0);
  // Fill the pipe, so that the next write to stderr blocks.
  ASSERT_EQ(fcntl(pipe_fds[1], F_SETFL, O_NONBLOCK), 0);
  const std::string chunk(4096, 'x');
  while (write(pipe_fds[1], chunk.data(), chunk.size()) > 0) {
  }
  ASSERT_EQ(fcntl(pipe_fds[1], F_SETFL, 0), 0);  // stderr (a dup of it) blocks again

  CallbackOnComplete held;
  e->PushAsync([&](RunContext, CallbackOnComplete done) { held = done; }, Context::CPU(), {},
               {held_var}, FnProperty::kAsync, 0, "held_past_the_limit");
  // The report is due after 50-63 ms; give the watchdog time to be stuck in it.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto other_runs = std::async(std::launch::async, [&] {
    e->PushSync([](RunContext) {}, Context::CPU(), {}, {other}, FnProperty::kNormal, 0, "other");
    e->WaitForVar(other);
  });
  const bool finished = other_runs.wait_for(std::chrono::seconds(10)) == std::future_status::ready;

  // Unblock: read the pipe until the report has come through, then put
  // stderr back.
  ASSERT_EQ(fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK), 0);
  std::string seen;
  char buf[4096];
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (seen.find("held_past_the_limit") == std::string::npos &&
         std::chrono::steady_clock::now() < give_up) {
    const ssize_t n = read(pipe_fds[0], buf, sizeof buf);
    if (n > 0) {
      seen.append(buf, static_cast<std::size_t>(n));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  dup2(saved, STDERR_FILENO);
  close(saved);
  close(pipe_fds[1]);
  other_runs.wait();
  held();
  e->WaitForAll();
  close(pipe_fds[0]);
  EXPECT_TRUE(finished) << "a function waited for the watchdog's report to be read";
  EXPECT_NE(seen.find("held_past_the_limit"), std::string::npos) << "the report never came";
}

TEST(Watchdog, FromEnvReadsSecondsAndRejectsGarbage) {
  setenv("DEPENGINE_WATCHDOG_SECONDS", "2.5", 1);
  EXPECT_DOUBLE_EQ(EngineOptions::FromEnv().watchdog_seconds, 2.5);
  setenv("DEPENGINE_WATCHDOG_SECONDS", "0", 1);
  EXPECT_EQ(EngineOptions::FromEnv().watchdog_seconds, 0) << "0 turns the watchdog off";
  // Not a number of seconds, a negative one, and a NaN (strtod reads "nan"
  // whole, and no comparison with it is true).
  for (const char* bad : {"soon", "-1", "-0.5", "nan"}) {
    setenv("DEPENGINE_WATCHDOG_SECONDS", bad, 1);
    try {
      EngineOptions::FromEnv();
      ADD_FAILURE() << "DEPENGINE_WATCHDOG_SECONDS=" << bad << ": expected std::invalid_argument";
    } catch (const std::invalid_argument& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr(std::string("DEPENGINE_WATCHDOG_SECONDS=") + bad));
      EXPECT_THAT(e.what(), ::testing::HasSubstr("non-negative"));
    }
  }
  unsetenv("DEPENGINE_WATCHDOG_SECONDS");
}

TEST(Watchdog, OffByDefault) { EXPECT_EQ(EngineOptions{}.watchdog_seconds, 0); }

}  // namespace
}  // namespace depengine
