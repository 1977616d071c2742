// Profiles seed 003's two example programs and writes what a user reads:
//   A = 2; B = A + 1; C = A + 2; D = B * C
//   A = 2; B = 2; B = A + B; C = A + 2; A.del()
// Usage: profile_example [OUT_DIR]   (default: the current directory)
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include "depengine/engine.h"
#include "depengine/profiler.h"

using namespace depengine;

namespace {
// A little work per function, so the timeline shows the overlap.
void Work() { std::this_thread::sleep_for(std::chrono::microseconds(200)); }
}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ".";
  EngineOptions options;
  options.cpu_worker_threads = 2;
  auto engine = CreateEngine(options);
  SetProfiling(*engine, true);

  int A = 0, B = 0, C = 0, D = 0;
  VarHandle a = engine->NewVariable(), b = engine->NewVariable();
  VarHandle c = engine->NewVariable(), d = engine->NewVariable();
  // The dumps then say "A RAW" on an edge instead of "v0 RAW".
  SetVarName(*engine, a, "A");
  SetVarName(*engine, b, "B");
  SetVarName(*engine, c, "C");
  SetVarName(*engine, d, "D");
  const Context cpu = Context::CPU();
  engine->PushSync(
      [&](RunContext) {
        Work();
        A = 2;
      },
      cpu, {}, {a}, FnProperty::kNormal, 0, "A = 2");
  engine->PushSync(
      [&](RunContext) {
        Work();
        B = A + 1;
      },
      cpu, {a}, {b}, FnProperty::kNormal, 0, "B = A + 1");
  engine->PushSync(
      [&](RunContext) {
        Work();
        C = A + 2;
      },
      cpu, {a}, {c}, FnProperty::kNormal, 0, "C = A + 2");
  engine->PushSync(
      [&](RunContext) {
        Work();
        D = B * C;
      },
      cpu, {b, c}, {d}, FnProperty::kNormal, 0, "D = B * C");
  engine->WaitForVar(d);
  std::printf("program 1: D = %d (expected 12)\n", D);

  engine->PushSync(
      [&](RunContext) {
        Work();
        A = 2;
      },
      cpu, {}, {a}, FnProperty::kNormal, 0, "A = 2");
  engine->PushSync(
      [&](RunContext) {
        Work();
        B = 2;
      },
      cpu, {}, {b}, FnProperty::kNormal, 0, "B = 2");
  engine->PushSync(
      [&](RunContext) {
        Work();
        B = A + B;
      },
      cpu, {a}, {b}, FnProperty::kNormal, 0, "B = A + B");
  engine->PushSync(
      [&](RunContext) {
        Work();
        C = A + 2;
      },
      cpu, {a}, {c}, FnProperty::kNormal, 0, "C = A + 2");
  engine->DeleteVariable([](RunContext) {}, cpu, a);
  engine->WaitForAll();
  std::printf("program 2: B = %d, C = %d (expected 4, 4)\n", B, C);

  DumpProfile(*engine, dir + "/profile_example.trace.json");
  DumpProfileStats(*engine, std::cout, dir + "/profile_example.stats.json");
  DumpDependencyGraph(*engine, dir + "/profile_example.graph.dot");
  std::printf("wrote %s/profile_example.{trace.json,stats.json,graph.dot}\n", dir.c_str());
  for (VarHandle v : {b, c, d}) engine->DeleteVariable({}, cpu, v);
  engine->WaitForAll();
  return (D == 12 && B == 4 && C == 4) ? 0 : 1;
}
