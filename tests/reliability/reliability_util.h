// Helpers shared by the reliability tests: the engine configurations every
// test runs on, a gate that holds a var busy, exception-message checks, a
// deadline that turns a hang into a failure with a message, and the serial
// model of the failure rules used by the fault-injection tests.
#pragma once

#include <gtest/gtest.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "depengine/engine.h"
#include "hold.h"
#include "test_scale.h"

namespace depengine::reliability {

// One engine configuration a test runs on.
struct EngineConfig {
  EngineKind kind;
  int workers;
};

inline std::vector<EngineConfig> AllEngineConfigs() {
  return {{EngineKind::kNaive, 0},     {EngineKind::kPooled, 1},    {EngineKind::kPooled, 3},
          {EngineKind::kPerDevice, 1}, {EngineKind::kPerDevice, 3}};
}

inline std::string ConfigName(const ::testing::TestParamInfo<EngineConfig>& info) {
  std::string name = EngineKindName(info.param.kind);
  if (info.param.kind != EngineKind::kNaive) name += "_" + std::to_string(info.param.workers) + "w";
  return name;
}

inline std::unique_ptr<Engine> MakeEngine(const EngineConfig& c, std::size_t max_in_flight = 0,
                                          int simulated_gpus = 0) {
  EngineOptions o;
  o.kind = c.kind;
  o.cpu_worker_threads = c.workers;
  o.cpu_priority_threads = c.workers > 0 ? c.workers : 0;
  o.max_in_flight = max_in_flight;
  o.simulated_gpus = simulated_gpus;
  return CreateEngine(o);
}

// Runs `fn`, which must throw `E`; returns the exception's message (empty,
// with a test failure recorded, when it did not throw E).
template <class E, class Fn>
std::string ThrownMessage(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw the wrong exception type; message: " << e.what();
    return {};
  } catch (...) {
    ADD_FAILURE() << "threw a non-std exception";
    return {};
  }
  ADD_FAILURE() << "did not throw";
  return {};
}

// Expects `fn` to throw E with a message containing every one of `words`.
#define EXPECT_THROW_NAMING(E, stmt, ...)                                              \
  do {                                                                                 \
    const std::string reliability_msg_ = ::depengine::reliability::ThrownMessage<E>(   \
        [&] { stmt; });                                                                \
    for (const char* reliability_word_ : {__VA_ARGS__}) {                              \
      EXPECT_NE(reliability_msg_.find(reliability_word_), std::string::npos)           \
          << #stmt << ": message \"" << reliability_msg_ << "\" does not name \""      \
          << reliability_word_ << "\"";                                                \
    }                                                                                  \
  } while (0)

// Keeps vars busy until Release() (tools/common/hold.h).
using support::Hold;

// Prints every thread's stack of this process to stderr, through gdb when it
// is installed: what a hung test was waiting for.
inline void DumpOwnStacks() {
  if (::access("/usr/bin/gdb", X_OK) != 0) {
    std::fprintf(stderr, "(install gdb to see the threads' stacks)\n");
    return;
  }
  ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);  // let gdb attach (Yama)
  const std::string cmd = "/usr/bin/gdb -p " + std::to_string(::getpid()) +
                          " -batch -ex 'thread apply all bt 15' 2>/dev/null "
                          "| grep '^#\\|^Thread' 1>&2";
  if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "(gdb could not attach)\n");
}

// Aborts the process with `what` if it is still alive `seconds` from now:
// a hang becomes a failure with a message (and the threads' stacks) instead
// of a ctest timeout.
class Deadline {
 public:
  Deadline(double seconds, std::string what) : what_(std::move(what)) {
    thread_ = std::thread([this, seconds] {
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) {
        std::fprintf(stderr, "DEADLINE EXCEEDED (%.0f s): %s\n", seconds, what_.c_str());
        std::fflush(stderr);
        DumpOwnStacks();
        std::abort();
      }
    });
  }
  ~Deadline() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

 private:
  std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// A test exception that carries the id of the function that raised it.
struct InjectedFault : std::runtime_error {
  explicit InjectedFault(std::uint64_t origin)
      : std::runtime_error("injected fault " + std::to_string(origin)), id(origin) {}
  std::uint64_t id;
};

// A 64-bit mix (splitmix64's finalizer): values computed by functions.
inline std::uint64_t Mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t z = a + 0x9e3779b97f4a7c15ull + (b << 6) + (b >> 2);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Loop counts shrink in slow builds: DEPENGINE_TEST_SCALE (test_scale.h).
using support::Scaled;

// DEPENGINE_IGNORE_BUG3=1: work around bug 3 of docs/reliability.md
// (WaitForVar does not wait for earlier readers) where a test's subject is
// something else, to look for other bugs while it is open.
inline bool IgnoreBug3() {
  const char* s = std::getenv("DEPENGINE_IGNORE_BUG3");
  return s != nullptr && s[0] == '1';
}

}  // namespace depengine::reliability
