// Shared by the profiler tests: temporary paths, reading the JSON and text
// the profiler writes, seed 003's program, and the ProfilerTest fixture
// (parameterized over engine kinds; instantiated once, in
// profiler_trace_test.cc, for the TEST_Ps of every profiler_*_test.cc).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "depengine/engine.h"
#include "depengine/profiler.h"

namespace depengine::profiler_test {

using nlohmann::json;

inline std::string TempPath(const std::string& name) {
  return "/tmp/depengine_profiler_" + std::to_string(getpid()) + "_" + name;
}

inline json ReadJson(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);
}

// A function's event in a trace (the trace also holds the waits of the
// threads that called WaitForVar and WaitForAll, category "wait").
inline bool IsFunctionEvent(const json& ev) { return ev["ph"] == "X" && ev["cat"] == "function"; }

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Seed 003's program: A = 2; B = A + 1; C = A + 2; D = B * C.
inline void RunSeedProgram(Engine& e, bool profile_flag_only = false) {
  VarHandle a = e.NewVariable(), b = e.NewVariable(), c = e.NewVariable(), d = e.NewVariable();
  static int A, B, C, D;
  auto push = [&](const char* name, SyncFn fn, std::vector<VarHandle> r, std::vector<VarHandle> w) {
    if (profile_flag_only) {
      OprHandle op = e.NewOperator(
          [fn](RunContext ctx, CallbackOnComplete done) {
            fn(ctx);
            done();
          },
          r, w, FnProperty::kNormal, name);
      e.Push(op, Context::CPU(), 0, /*profiling=*/std::string(name) == "B=A+1");
      e.DeleteOperator(op);
    } else {
      e.PushSync(fn, Context::CPU(), r, w, FnProperty::kNormal, 0, name);
    }
  };
  push("A=2", [](RunContext) { A = 2; }, {}, {a});
  push("B=A+1", [](RunContext) { B = A + 1; }, {a}, {b});
  push("C=A+2", [](RunContext) { C = A + 2; }, {a}, {c});
  push("D=B*C", [](RunContext) { D = B * C; }, {b, c}, {d});
  e.WaitForAll();
  EXPECT_EQ(D, 12);
  for (VarHandle v : {a, b, c, d}) e.DeleteVariable({}, Context::CPU(), v);
  e.WaitForAll();
}

// Runs on every engine kind (INSTANTIATE_TEST_SUITE_P in profiler_trace_test.cc).
class ProfilerTest : public ::testing::TestWithParam<EngineKind> {
 protected:
  std::unique_ptr<Engine> MakeEngine() {
    EngineOptions o;
    o.kind = GetParam();
    o.cpu_worker_threads = 2;
    return CreateEngine(o);
  }
};

}  // namespace depengine::profiler_test
