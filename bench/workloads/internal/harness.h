// What every depengine workload runner shares: the timed region, the
// untimed teardown, and turning an engine exception into a failed check.
// Internal to depengine_workloads.
#pragma once

#include <chrono>
#include <cstddef>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "common/process_cpu.h"
#include "depengine/engine.h"
#include "workloads/workloads.h"

namespace depengine::bench::internal {

// Seconds elapsed since construction, on the steady clock.
class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double Seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

// The message of the exception being handled.
inline std::string CurrentExceptionMessage() {
  try {
    throw;
  } catch (const std::exception& e) {
    return std::string("engine raised: ") + e.what();
  } catch (...) {
    return "engine raised a non-standard exception";
  }
}

// Times `push_all()` (which pushes the workload's `ops` functions) and the
// WaitForAll after it. On an exception the result is a failed check naming
// it, and this waits until nothing pushed still runs, so the caller may then
// destroy what the functions use.
// Not inlined: tools/instructions_per_op.py counts the instructions run
// inside it, by name.
template <class PushAll>
[[gnu::noinline]] WorkloadResult TimePushes(Engine& engine, std::size_t ops, PushAll&& push_all) {
  WorkloadResult r;
  r.ops = ops;
  try {
    const double cpu_start = ProcessCpuSeconds();
    Stopwatch watch;
    push_all();
    engine.WaitForAll();
    r.seconds = watch.Seconds();
    r.cpu_seconds = ProcessCpuSeconds() - cpu_start;
    r.ok = true;
  } catch (...) {
    r.ok = false;
    r.check_error = CurrentExceptionMessage();
    try {
      engine.WaitForAll();
    } catch (...) {
      // Already reported the first failure.
    }
  }
  return r;
}

// Records a failed check, keeping the first reason.
inline void Fail(WorkloadResult& r, std::string why) {
  if (!r.ok && !r.check_error.empty()) return;
  r.ok = false;
  r.check_error = std::move(why);
}

// Deletes `vars` and waits until they are gone (untimed). An engine
// exception fails `r`.
template <class Result>
void DeleteVars(Engine& engine, const std::vector<VarHandle>& vars, Result& r) {
  try {
    for (VarHandle v : vars) engine.DeleteVariable([](RunContext) {}, Context::CPU(), v);
    engine.WaitForAll();
  } catch (...) {
    if (r.ok) {
      r.ok = false;
      r.check_error = "teardown: " + CurrentExceptionMessage();
    }
  }
}

}  // namespace depengine::bench::internal
