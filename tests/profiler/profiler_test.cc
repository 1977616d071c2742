// The profiler's outputs, parsed and checked against the dependencies of the
// program that produced them.
#include "depengine/profiler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

#include "alloc_counter.h"
#include "depengine/engine.h"

namespace depengine {
namespace {

using nlohmann::json;
using test::AllocationCountingAvailable;
using test::CountedAllocationBytes;
using test::StartCountingAllocations;
using test::StopCountingAllocations;

std::string TempPath(const std::string& name) {
  return "/tmp/depengine_profiler_" + std::to_string(getpid()) + "_" + name;
}

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return json::parse(in);
}

// A function's event in a trace (the trace also holds the waits of the
// threads that called WaitForVar and WaitForAll, category "wait").
bool IsFunctionEvent(const json& ev) { return ev["ph"] == "X" && ev["cat"] == "function"; }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Seed 003's program: A = 2; B = A + 1; C = A + 2; D = B * C.
void RunSeedProgram(Engine& e, bool profile_flag_only = false) {
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

class ProfilerTest : public ::testing::TestWithParam<EngineKind> {
 protected:
  std::unique_ptr<Engine> MakeEngine() {
    EngineOptions o;
    o.kind = GetParam();
    o.cpu_worker_threads = 2;
    return CreateEngine(o);
  }
};

TEST_P(ProfilerTest, TraceHasNamedRowsEventsFlowsAndCounters) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  EXPECT_TRUE(IsProfiling(*e));
  RunSeedProgram(*e);
  SetProfiling(*e, false);
  const std::string path = TempPath("trace.json");
  DumpProfile(*e, path);
  json trace = ReadJson(path);
  ASSERT_TRUE(trace.contains("traceEvents"));

  std::map<std::string, json> fn;  // name -> complete event
  std::map<int, std::string> row_names;
  int flows_start = 0, flows_end = 0, counters = 0;
  for (const json& ev : trace["traceEvents"]) {
    const std::string ph = ev["ph"];
    if (ph == "X") fn[ev["name"]] = ev;
    if (ph == "M" && ev["name"] == "thread_name") row_names[ev["tid"]] = ev["args"]["name"];
    if (ph == "s") ++flows_start;
    if (ph == "f") ++flows_end;
    if (ph == "C") ++counters;
  }
  for (const char* name : {"A=2", "B=A+1", "C=A+2", "D=B*C"}) ASSERT_TRUE(fn.count(name)) << name;
  EXPECT_TRUE(fn.count("DeleteVariable"));
  // Each event carries its vars, priority, property, device and queue wait.
  const json& d = fn["D=B*C"];
  EXPECT_EQ(d["args"]["reads"].size(), 2u);
  EXPECT_EQ(d["args"]["writes"].size(), 1u);
  EXPECT_EQ(d["args"]["property"], "kNormal");
  EXPECT_EQ(d["args"]["device"], "cpu(0)");
  EXPECT_TRUE(d["args"].contains("queue_wait_us"));
  // Ordering follows the dependencies: a writer ends before its readers start.
  auto start = [&](const char* n) { return fn[n]["ts"].get<double>(); };
  auto end = [&](const char* n) { return fn[n]["ts"].get<double>() + fn[n]["dur"].get<double>(); };
  EXPECT_LE(end("A=2"), start("B=A+1"));
  EXPECT_LE(end("A=2"), start("C=A+2"));
  EXPECT_LE(end("B=A+1"), start("D=B*C"));
  EXPECT_LE(end("C=A+2"), start("D=B*C"));
  // Rows are named; threaded engines name them by pool.
  for (const auto& [name, ev] : fn) EXPECT_TRUE(row_names.count(ev["tid"])) << name;
  if (GetParam() == EngineKind::kPerDevice) {
    EXPECT_THAT(row_names[fn["D=B*C"]["tid"]], ::testing::StartsWith("cpu/normal/"));
  }
  if (GetParam() == EngineKind::kPooled) {
    EXPECT_THAT(row_names[fn["D=B*C"]["tid"]], ::testing::StartsWith("pooled/normal/"));
  }
  // A=2 released B and C (at least those pushed before it finished), and
  // every flow has both ends.
  EXPECT_EQ(flows_start, flows_end);
  EXPECT_GT(counters, 0);
  std::remove(path.c_str());
}

// A program's waits are in the timeline: each WaitForVar and WaitForAll of
// a profiled engine is an event of category "wait" on the waiting thread's
// row, from the call to the return, WaitForVar's with its var. They are not
// functions: the statistics, the graph and the function count leave them
// out.
TEST_P(ProfilerTest, WaitsAreInTheTraceOnTheWaitingThreadsRow) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  VarHandle v = e->NewVariable();
  e->PushSync([](RunContext) { std::this_thread::sleep_for(std::chrono::milliseconds(20)); },
              Context::CPU(), {}, {v}, FnProperty::kNormal, 0, "slow");
  e->WaitForVar(v);
  e->WaitForAll();
  SetProfiling(*e, false);
  const std::string path = TempPath("waits.json");
  DumpProfile(*e, path);
  const json trace = ReadJson(path);
  std::map<std::string, json> waits, functions;
  std::map<int, std::string> row_names;
  for (const json& ev : trace["traceEvents"]) {
    if (ev["ph"] == "X" && ev["cat"] == "wait") waits[ev["name"]] = ev;
    if (IsFunctionEvent(ev)) functions[ev["name"]] = ev;
    if (ev["ph"] == "M" && ev["name"] == "thread_name") row_names[ev["tid"]] = ev["args"]["name"];
  }
  ASSERT_EQ(waits.size(), 2u) << trace.dump();
  ASSERT_TRUE(waits.count("WaitForVar"));
  ASSERT_TRUE(waits.count("WaitForAll"));
  ASSERT_TRUE(functions.count("slow"));
  const json& wait_var = waits["WaitForVar"];
  const json& slow = functions["slow"];
  EXPECT_EQ(wait_var["args"]["var"], slow["args"]["writes"][0]);
  EXPECT_FALSE(waits["WaitForAll"]["args"].contains("var"));
  // The wait returned after the function it waited for had finished.
  auto end = [](const json& ev) { return ev["ts"].get<double>() + ev["dur"].get<double>(); };
  EXPECT_GE(end(wait_var), end(slow));
  EXPECT_GE(waits["WaitForAll"]["ts"].get<double>(), end(wait_var));
  // On the waiting thread's row: named, and (threaded engines) not a
  // worker's.
  for (const auto& [name, ev] : waits) EXPECT_TRUE(row_names.count(ev["tid"])) << name;
  EXPECT_EQ(waits["WaitForVar"]["tid"], waits["WaitForAll"]["tid"]);
  if (GetParam() != EngineKind::kNaive) {
    EXPECT_NE(wait_var["tid"], slow["tid"]);
    EXPECT_THAT(row_names[wait_var["tid"]], ::testing::StartsWith("thread/"));
  }
  EXPECT_EQ(ProfiledFunctionCount(*e), 1u);
  std::ostringstream table;
  const std::string stats_path = TempPath("waits_stats.json");
  DumpProfileStats(*e, table, stats_path);
  const json stats = ReadJson(stats_path);
  ASSERT_EQ(stats["functions"].size(), 1u);
  EXPECT_EQ(stats["functions"][0]["name"], "slow");
  e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  std::remove(path.c_str());
  std::remove(stats_path.c_str());
}

// Waits are recorded only while the whole engine is profiled.
TEST_P(ProfilerTest, WaitsAreNotRecordedWhileProfilingIsOff) {
  auto e = MakeEngine();
  VarHandle v = e->NewVariable();
  OprHandle op = e->NewOperator([](RunContext, CallbackOnComplete done) { done(); }, {}, {v},
                                FnProperty::kNormal, "flagged");
  e->Push(op, Context::CPU(), 0, /*profiling=*/true);
  e->WaitForVar(v);
  e->WaitForAll();
  const std::string path = TempPath("no_waits.json");
  DumpProfile(*e, path);
  const json trace = ReadJson(path);
  int waits = 0, functions = 0;
  for (const json& ev : trace["traceEvents"]) {
    waits += ev["ph"] == "X" && ev["cat"] == "wait";
    functions += IsFunctionEvent(ev);
  }
  EXPECT_EQ(waits, 0);
  EXPECT_EQ(functions, 1);
  e->DeleteOperator(op);
  e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  std::remove(path.c_str());
}

TEST_P(ProfilerTest, PushWithProfilingFlagRecordsOnlyThatPush) {
  auto e = MakeEngine();
  RunSeedProgram(*e, /*profile_flag_only=*/true);
  EXPECT_EQ(ProfiledFunctionCount(*e), 1u);
}

TEST_P(ProfilerTest, StatsTableAndJson) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  VarHandle v = e->NewVariable();
  for (int i = 0; i < 50; ++i)
    e->PushSync([](RunContext) {}, Context::CPU(), {}, {v}, FnProperty::kNormal, 0, "tick");
  e->WaitForAll();
  std::ostringstream table;
  const std::string path = TempPath("stats.json");
  DumpProfileStats(*e, table, path);
  EXPECT_THAT(table.str(), ::testing::HasSubstr("| tick | 50 |"));
  json stats = ReadJson(path);
  bool found = false;
  for (const json& f : stats["functions"]) {
    if (f["name"] == "tick") {
      found = true;
      EXPECT_EQ(f["count"], 50);
      for (const char* k : {"total", "mean", "p50", "p99", "max"}) {
        EXPECT_TRUE(f["run"].contains(k));
        EXPECT_TRUE(f["queue_wait"].contains(k));
      }
      EXPECT_LE(f["run"]["p50"].get<double>(), f["run"]["max"].get<double>());
    }
  }
  EXPECT_TRUE(found);
  ClearProfile(*e);
  EXPECT_EQ(ProfiledFunctionCount(*e), 0u);
  e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  std::remove(path.c_str());
}

TEST_P(ProfilerTest, DependencyGraphHasKindsAndCriticalPathAndRenders) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  // A = 2; B = 2; B = A + B; C = A + 2; (seed 003's second program, minus the delete)
  VarHandle a = e->NewVariable(), b = e->NewVariable(), c = e->NewVariable();
  e->PushSync([](RunContext) {}, Context::CPU(), {}, {a}, FnProperty::kNormal, 0, "A=2");
  e->PushSync([](RunContext) {}, Context::CPU(), {}, {b}, FnProperty::kNormal, 0, "B=2");
  e->PushSync([](RunContext) {}, Context::CPU(), {a}, {b}, FnProperty::kNormal, 0, "B=A+B");
  e->PushSync([](RunContext) {}, Context::CPU(), {a}, {c}, FnProperty::kNormal, 0, "C=A+2");
  e->PushSync([](RunContext) {}, Context::CPU(), {}, {a}, FnProperty::kNormal, 0, "A=0");
  e->WaitForAll();
  const std::string path = TempPath("graph.dot");
  DumpDependencyGraph(*e, path);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string dot = ss.str();
  EXPECT_THAT(dot, ::testing::StartsWith("digraph"));
  EXPECT_THAT(dot, ::testing::HasSubstr("RAW"));  // A=2 -> B=A+B
  EXPECT_THAT(dot, ::testing::HasSubstr("WAW"));  // B=2 -> B=A+B
  EXPECT_THAT(dot, ::testing::HasSubstr("WAR"));  // B=A+B, C=A+2 -> A=0
  EXPECT_THAT(dot, ::testing::HasSubstr("color=red"));
#ifdef DEPENGINE_DOT
  const std::string svg = path + ".svg";
  const std::string cmd = std::string(DEPENGINE_DOT) + " -Tsvg " + path + " -o " + svg;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream rendered(svg);
  EXPECT_TRUE(rendered.good());
  std::remove(svg.c_str());
#else
  GTEST_SKIP() << "graphviz `dot` not found: install the graphviz package to render the graph";
#endif
  for (VarHandle v : {a, b, c}) e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  std::remove(path.c_str());
}

TEST(ProfilerEnv, ProfilePathFromEnvironmentWritesTraceAtDestruction) {
  const std::string path = TempPath("env.json");
  setenv("DEPENGINE_PROFILE", path.c_str(), 1);
  EngineOptions o = EngineOptions::FromEnv();
  unsetenv("DEPENGINE_PROFILE");
  EXPECT_EQ(o.profile_path, path);
  {
    auto e = CreateEngine(o);
    EXPECT_TRUE(IsProfiling(*e));
    RunSeedProgram(*e);
  }
  json trace = ReadJson(path);
  int functions = 0;
  for (const json& ev : trace["traceEvents"]) functions += ev["ph"] == "X";
  EXPECT_GE(functions, 4);
  std::remove(path.c_str());
}

// Bug: every engine made from FromEnv() with DEPENGINE_PROFILE set wrote its
// trace to that one path when destroyed, so the last engine destroyed
// replaced the traces of all the others ("every function of every engine"
// is recorded). Now each later engine is added to the file as a process of
// its own.
TEST(ProfilerEnv, EnginesSharingTheProfilePathShareTheTrace) {
  const std::string path = TempPath("shared_env.json");
  setenv("DEPENGINE_PROFILE", path.c_str(), 1);
  EngineOptions o = EngineOptions::FromEnv();
  unsetenv("DEPENGINE_PROFILE");
  o.cpu_worker_threads = 2;
  const char* const names[] = {"in engine 1", "in engine 2", "in engine 3"};
  {
    std::unique_ptr<Engine> engines[3];
    for (auto& e : engines) e = CreateEngine(o);
    for (int i = 0; i < 3; ++i) {
      Engine& e = *engines[i];
      VarHandle v = e.NewVariable();
      e.PushSync([](RunContext) {}, Context::CPU(), {}, {v}, FnProperty::kNormal, 0, names[i]);
      e.DeleteVariable({}, Context::CPU(), v);
      e.WaitForAll();
    }
  }  // destroyed in reverse: engine 3 writes the file, 2 and 1 are added
  const json trace = ReadJson(path);
  std::map<std::string, std::vector<int>> pids_of;  // function name -> pids
  std::map<int, std::string> process_name;          // pid -> name
  std::set<std::pair<int, int>> named_rows;
  for (const json& ev : trace["traceEvents"]) {
    if (ev["ph"] == "X") pids_of[ev["name"]].push_back(ev["pid"].get<int>());
    if (ev["ph"] == "M" && ev["name"] == "process_name") {
      process_name[ev["pid"].get<int>()] = ev["args"]["name"];
    }
    if (ev["ph"] == "M" && ev["name"] == "thread_name") {
      named_rows.emplace(ev["pid"].get<int>(), ev["tid"].get<int>());
    }
  }
  std::set<int> pids;
  for (const char* name : names) {
    ASSERT_EQ(pids_of[name].size(), 1u) << name;
    pids.insert(pids_of[name][0]);
  }
  EXPECT_EQ(pids, (std::set<int>{1, 2, 3}));
  EXPECT_EQ(process_name.size(), 3u);
  for (const json& ev : trace["traceEvents"]) {
    if (ev["ph"] == "X") {
      EXPECT_TRUE(named_rows.count({ev["pid"].get<int>(), ev["tid"].get<int>()})) << ev.dump();
    }
  }
#if defined(DEPENGINE_PYTHON) && defined(DEPENGINE_TRACE_TO_SVG)
  // tools/trace_to_svg.py draws one row per (process, thread), labelled
  // with the process's name: each engine numbers its threads from 0.
  std::set<std::pair<int, int>> used_rows;
  for (const json& ev : trace["traceEvents"]) {
    if (ev["ph"] == "X") used_rows.emplace(ev["pid"].get<int>(), ev["tid"].get<int>());
  }
  const std::string svg = path + ".svg", labels = path + ".labels";
  const std::string render =
      std::string(DEPENGINE_PYTHON) + " " + DEPENGINE_TRACE_TO_SVG + " " + path + " " + svg;
  ASSERT_EQ(std::system(render.c_str()), 0) << render;
  const std::string parse = std::string(DEPENGINE_PYTHON) +
                            " -c \"import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); "
                            "open(sys.argv[2], 'w', encoding='utf-8').write(chr(10).join("
                            "t.firstChild.data for t in d.getElementsByTagName('text') "
                            "if t.getAttribute('x') == '4'))\" " +
                            svg + " " + labels;
  ASSERT_EQ(std::system(parse.c_str()), 0) << parse;
  std::istringstream label_lines(ReadFile(labels));
  std::set<std::string> row_labels;
  std::size_t label_count = 0;
  for (std::string line; std::getline(label_lines, line);) {
    if (line.find(" functions") != std::string::npos) continue;  // the summary line
    row_labels.insert(line);
    ++label_count;
  }
  EXPECT_EQ(label_count, used_rows.size()) << ReadFile(labels);
  EXPECT_EQ(row_labels.size(), used_rows.size()) << ReadFile(labels);  // told apart
  std::remove(svg.c_str());
  std::remove(labels.c_str());
#endif
  // A file that is gone, or no longer this process's trace, is written anew.
  std::remove(path.c_str());
  {
    auto e = CreateEngine(o);
    RunSeedProgram(*e);
  }
  std::set<int> fresh_pids;
  const json fresh = ReadJson(path);
  for (const json& ev : fresh["traceEvents"]) fresh_pids.insert(ev["pid"].get<int>());
  EXPECT_EQ(fresh_pids, std::set<int>{1});
  std::remove(path.c_str());
}

// Completes an async function from a thread_local destructor, when its
// thread exits.
struct CompleteAtThreadExit {
  CallbackOnComplete cb;
  bool armed = false;
  ~CompleteAtThreadExit() {
    if (armed) cb();
  }
};

// Bug: the thread's profiler state (thread_locals) was destroyed before the
// callback called Profiler::Finish, which then used freed memory (ASan:
// heap-use-after-free). The callback may be called from any thread at any
// time, so the function is recorded anyway.
TEST_P(ProfilerTest, CallbackFromThreadLocalDestructorIsRecorded) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  VarHandle v = e->NewVariable();
  std::promise<CallbackOnComplete> first_cb, second_cb;
  e->PushAsync([&](RunContext, CallbackOnComplete cb) { first_cb.set_value(cb); }, Context::CPU(),
               {}, {v}, FnProperty::kNormal, 0, "first");
  e->PushAsync([&](RunContext, CallbackOnComplete cb) { second_cb.set_value(cb); }, Context::CPU(),
               {}, {v}, FnProperty::kNormal, 0, "second");
  std::thread t([&] {
    thread_local CompleteAtThreadExit
        guard;                      // made before the profiler's state: destroyed after it
    first_cb.get_future().get()();  // this thread records "first"
    guard.cb = second_cb.get_future().get();  // and "second" as it exits
    guard.armed = true;
  });
  t.join();
  e->WaitForAll();
  EXPECT_EQ(ProfiledFunctionCount(*e), 2u);
  const std::string path = TempPath("tls_exit.json");
  DumpProfile(*e, path);
  std::set<std::string> names;
  const json trace = ReadJson(path);
  for (const json& ev : trace["traceEvents"]) {
    if (IsFunctionEvent(ev)) names.insert(ev["name"].get<std::string>());
  }
  EXPECT_EQ(names, (std::set<std::string>{"first", "second"}));
  e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  std::remove(path.c_str());
}

// Holds a profiled engine in a static object whose destructor pushes work at
// exit: after the main thread's thread_locals were destroyed. kAsync runs
// inline on the pushing thread (every function does on the naive engine).
struct PushesAtExit {
  std::unique_ptr<Engine> engine;
  VarHandle v;
  PushesAtExit(EngineKind kind, const std::string& path) {
    EngineOptions o;
    o.kind = kind;
    o.cpu_worker_threads = 2;
    o.profile_path = path;
    engine = CreateEngine(o);
    v = engine->NewVariable();
    // The main thread records here, so that its profiler state exists.
    engine->PushSync([](RunContext) {}, Context::CPU(), {}, {v}, FnProperty::kAsync, 0, "in_main");
    engine->WaitForAll();
  }
  ~PushesAtExit() {
    engine->PushSync([](RunContext) {}, Context::CPU(), {}, {v}, FnProperty::kAsync, 0, "at_exit");
    engine->DeleteVariable({}, Context::CPU(), v);
    engine->WaitForAll();
    engine.reset();  // writes the trace
  }
};

// Bug: the push from the static destructor touched the main thread's
// destroyed thread_locals (ASan: heap-use-after-free; in Release, a double
// free on another engine). Run in a child process that exits.
TEST_P(ProfilerTest, PushFromStaticDestructorAtExitIsRecorded) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // The child re-runs this test from the start: it keeps the parent's path.
  const std::string var =
      std::string("DEPENGINE_PROFILER_TEST_EXIT_TRACE_") + EngineKindName(GetParam());
  setenv(var.c_str(), TempPath(std::string("exit_") + EngineKindName(GetParam()) + ".json").c_str(),
         /*overwrite=*/0);
  const std::string path = std::getenv(var.c_str());
  std::remove(path.c_str());
  EXPECT_EXIT(
      {
        static PushesAtExit holder(GetParam(), path);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
  std::set<std::string> names;
  const json trace = ReadJson(path);
  for (const json& ev : trace["traceEvents"]) {
    if (ev["ph"] == "X") names.insert(ev["name"].get<std::string>());
  }
  EXPECT_TRUE(names.count("in_main"));
  EXPECT_TRUE(names.count("at_exit"));
  std::remove(path.c_str());
}

// Bug: the outputs are small, so /dev/full's ENOSPC only shows when the file
// is flushed or closed, after the stream state was checked (DumpProfile),
// or never checked at all (DumpProfileStats' JSON, DumpDependencyGraph).
TEST_P(ProfilerTest, DumpsRaiseWhenTheFileCannotBeWritten) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  RunSeedProgram(*e);
  EXPECT_THROW(DumpProfile(*e, "/dev/full"), std::runtime_error);
  std::ostringstream table;
  EXPECT_THROW(DumpProfileStats(*e, table, "/dev/full"), std::runtime_error);
  EXPECT_THROW(DumpDependencyGraph(*e, "/dev/full"), std::runtime_error);
  try {
    DumpProfile(*e, "/dev/full");
  } catch (const std::runtime_error& error) {
    EXPECT_THAT(error.what(), ::testing::HasSubstr("/dev/full"));
  }
}

// A path whose directory does not exist: each dump raises, naming the path
// and the reason (before: only "cannot write <path>"), and the engine keeps
// working.
TEST_P(ProfilerTest, DumpsToAMissingDirectorySayWhy) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  RunSeedProgram(*e);
  const std::string path = TempPath("no_such_dir") + "/out";
  const std::string reason = std::strerror(ENOENT);
  std::ostringstream table;
  const std::function<void()> dumps[] = {[&] { DumpProfile(*e, path); },
                                         [&] { DumpProfileStats(*e, table, path); },
                                         [&] { DumpDependencyGraph(*e, path); }};
  for (const auto& dump : dumps) {
    try {
      dump();
      ADD_FAILURE() << "no error for " << path;
    } catch (const std::runtime_error& error) {
      EXPECT_THAT(error.what(), ::testing::HasSubstr(path));
      EXPECT_THAT(error.what(), ::testing::HasSubstr(reason));
    }
  }
  RunSeedProgram(*e);  // still working
  EXPECT_EQ(ProfiledFunctionCount(*e), 16u);
}

// The trace written at destruction (DEPENGINE_PROFILE) cannot throw: it
// reports the failure on stderr.
TEST(ProfilerEnv, ProfilePathThatCannotBeWrittenIsReportedAtDestruction) {
  EngineOptions o;
  o.profile_path = "/dev/full";
  auto e = CreateEngine(o);
  RunSeedProgram(*e);
  ::testing::internal::CaptureStderr();
  e.reset();
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, ::testing::HasSubstr("DEPENGINE_PROFILE"));
  EXPECT_THAT(err, ::testing::HasSubstr("/dev/full"));
}

// Each thread that records gets a buffer of its own, kept while the engine
// lives (its records are in it). A thread that records one function (a
// program whose threads each finish a callback) used to take a whole
// 1,024-entry chunk, 8 KB: a program that makes threads kept 8 KB per thread.
TEST(ProfilerMemory, ThreadThatRecordsOneFunctionKeepsLittle) {
  if (!AllocationCountingAvailable()) GTEST_SKIP() << "a sanitizer build owns operator new";
  EngineOptions o;
  o.cpu_worker_threads = 2;
  auto e = CreateEngine(o);
  SetProfiling(*e, true);
  constexpr int kThreads = 64;
  StartCountingAllocations();
  for (int i = 0; i < kThreads; ++i) {
    // A kAsync function with nothing to wait for runs on the pushing thread.
    std::thread([&] {
      e->PushSync([](RunContext) {}, Context::CPU(), {}, {}, FnProperty::kAsync, 0, "one");
    }).join();
  }
  StopCountingAllocations();
  EXPECT_LT(CountedAllocationBytes(), kThreads * 2048L)
      << "bytes allocated for " << kThreads << " threads that recorded one function each";
  e->WaitForAll();
  EXPECT_EQ(ProfiledFunctionCount(*e), static_cast<std::size_t>(kThreads));
}

// A trace path that cannot be written is refused when the engine is created,
// naming the path and the reason, instead of losing the run's trace at the
// engine's destruction (before: only a line on stderr then).
TEST(ProfilerEnv, ProfilePathThatCannotBeWrittenIsRefusedAtCreation) {
  const std::string dir = TempPath("refused_dir");
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/a_file";
  std::ofstream(file) << "x";
  const std::pair<std::string, std::string> cases[] = {
      {dir + "/no_such_dir/trace.json", std::strerror(ENOENT)},
      {dir, "is a directory"},
      {file + "/trace.json", std::strerror(ENOTDIR)},
  };
  for (EngineKind kind : {EngineKind::kNaive, EngineKind::kPooled, EngineKind::kPerDevice}) {
    for (const auto& [path, reason] : cases) {
      EngineOptions o;
      o.kind = kind;
      o.profile_path = path;
      try {
        auto e = CreateEngine(o);
        ADD_FAILURE() << EngineKindName(kind) << ": no error for profile_path " << path;
      } catch (const std::invalid_argument& error) {
        EXPECT_THAT(error.what(), ::testing::HasSubstr("'" + path + "'"));
        EXPECT_THAT(error.what(), ::testing::HasSubstr(reason));
      }
    }
  }
  // A file that does not exist yet in a writable directory is fine.
  EngineOptions o;
  o.profile_path = dir + "/trace.json";
  auto e = CreateEngine(o);
  RunSeedProgram(*e);
  e.reset();
  EXPECT_TRUE(std::filesystem::exists(o.profile_path));
  std::filesystem::remove_all(dir);
}

// Bug: the record's seq, which orders the graph, was taken before the push
// locked its vars, so with several pushers it could disagree with the order
// the engine queued the functions on a var (WAW edges pointing from a
// function to one that ran before it). Every function here writes one
// shared var, so the engine runs them one at a time in queue order, and the
// graph's WAW chain must be exactly the order they ran in.
TEST_P(ProfilerTest, GraphFollowsQueueOrderWithSeveralPushers) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  constexpr int kThreads = 4, kPerThread = 1000, kExtraReads = 200;
  VarHandle shared = e->NewVariable();
  std::vector<std::string> names(kThreads * kPerThread);
  for (std::size_t i = 0; i < names.size(); ++i) {
    char name[32];  // not "w" + to_string: GCC 12 warns (-Wrestrict) on it here, wrongly
    std::snprintf(name, sizeof name, "w%zu", i);
    names[i] = name;
  }
  std::vector<int> ran_at(names.size(), -1);  // written under `shared`'s write access
  int next_run = 0;
  // Half of the pushers also read private vars (the several-var path, and a
  // wider window between the record and the queueing); the others push
  // one-var functions.
  std::vector<std::vector<VarHandle>> reads(kThreads);
  for (int t = 0; t < kThreads; t += 2) {
    for (int i = 0; i < kExtraReads; ++i) reads[t].push_back(e->NewVariable());
  }
  std::vector<std::thread> pushers;
  for (int t = 0; t < kThreads; ++t) {
    pushers.emplace_back([&, t] {
      for (int k = 0; k < kPerThread; ++k) {
        const int id = t * kPerThread + k;
        e->PushSync([&, id](RunContext) { ran_at[id] = next_run++; }, Context::CPU(), reads[t],
                    {shared}, FnProperty::kNormal, 0, names[id].c_str());
      }
    });
  }
  for (std::thread& t : pushers) t.join();
  e->WaitForAll();
  const std::string path = TempPath("graph_mt.dot");
  DumpDependencyGraph(*e, path);
  const std::string dot = ReadFile(path);
  std::map<std::string, int> node_to_id;
  const std::regex node_re(R"re(\s(f\d+) \[label="w(\d+)\\n)re");
  for (std::sregex_iterator it(dot.begin(), dot.end(), node_re), end; it != end; ++it) {
    node_to_id[(*it)[1]] = std::stoi((*it)[2]);
  }
  ASSERT_EQ(node_to_id.size(), names.size());
  const std::regex edge_re(R"re((f\d+) -> (f\d+) \[label="v\d+ (\w+)")re");
  int edges = 0, out_of_order = 0;
  for (std::sregex_iterator it(dot.begin(), dot.end(), edge_re), end; it != end; ++it) {
    ++edges;
    EXPECT_EQ((*it)[3], "WAW");  // the private vars are only read
    const int from = node_to_id.at((*it)[1]), to = node_to_id.at((*it)[2]);
    if (ran_at[to] != ran_at[from] + 1) ++out_of_order;
  }
  EXPECT_EQ(edges, static_cast<int>(names.size()) - 1);
  EXPECT_EQ(out_of_order, 0) << "WAW edges that do not go from a function to the next one run";
  for (const auto& r : reads) {
    for (VarHandle v : r) e->DeleteVariable({}, Context::CPU(), v);
  }
  e->DeleteVariable({}, Context::CPU(), shared);
  e->WaitForAll();
  std::remove(path.c_str());
}

// Bug: a flow arrow was drawn from every function that granted a slot, not
// only from the one whose grant made the function ready. "first" writes a
// and finishes first, "last" writes b and finishes last; F reads both, so
// only "last" released F's last dependency.
TEST_P(ProfilerTest, FlowOnlyFromTheCompletionThatMadeTheFunctionReady) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  VarHandle a = e->NewVariable(), b = e->NewVariable();
  std::promise<CallbackOnComplete> first_cb, last_cb;
  e->PushAsync([&](RunContext, CallbackOnComplete cb) { first_cb.set_value(cb); }, Context::CPU(),
               {}, {a}, FnProperty::kNormal, 0, "first");
  e->PushAsync([&](RunContext, CallbackOnComplete cb) { last_cb.set_value(cb); }, Context::CPU(),
               {}, {b}, FnProperty::kNormal, 0, "last");
  e->PushSync([](RunContext) {}, Context::CPU(), {a, b}, {}, FnProperty::kNormal, 0, "F");
  CallbackOnComplete finish_first = first_cb.get_future().get();
  CallbackOnComplete finish_last = last_cb.get_future().get();
  finish_first();
  finish_last();
  e->WaitForAll();
  const std::string path = TempPath("flows.json");
  DumpProfile(*e, path);
  const json trace = ReadJson(path);
  std::map<std::string, json> fn;
  std::vector<std::string> flow_vars;
  int flow_ends = 0;
  for (const json& ev : trace["traceEvents"]) {
    if (ev["ph"] == "X") fn[ev["name"]] = ev;
    if (ev["ph"] == "s") flow_vars.push_back(ev["args"]["var"]);
    if (ev["ph"] == "f") ++flow_ends;
  }
  ASSERT_TRUE(fn.count("first") && fn.count("last") && fn.count("F"));
  EXPECT_EQ(flow_vars,
            std::vector<std::string>{fn["last"]["args"]["writes"][0].get<std::string>()});
  EXPECT_EQ(flow_ends, 1);
  for (VarHandle v : {a, b}) e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  std::remove(path.c_str());
}

// Strict UTF-8 (RFC 3629: no overlong forms, no surrogates, at most
// U+10FFFF).
bool ValidUtf8(const std::string& s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n = 0;
    std::uint32_t cp = 0, min = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (i + static_cast<std::size_t>(n) >= s.size()) return false;
    for (int k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += static_cast<std::size_t>(n) + 1;
  }
  return true;
}

// Bug: a name holding '|' or a line break was written into the Markdown
// table as it was, which split its row into extra cells or two lines.
TEST_P(ProfilerTest, StatsTableKeepsEachNameInItsOwnCell) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  VarHandle v = e->NewVariable();
  for (const char* name : {"a|b", "two\nlines", "cr\rname", "plain"}) {
    e->PushSync([](RunContext) {}, Context::CPU(), {}, {v}, FnProperty::kNormal, 0, name);
  }
  e->WaitForAll();
  std::ostringstream table;
  DumpProfileStats(*e, table);
  std::istringstream lines(table.str());
  std::vector<std::string> rows;
  for (std::string line; std::getline(lines, line);) rows.push_back(line);
  ASSERT_EQ(rows.size(), 2u + 4u) << table.str();  // header, rule, one row per name
  std::set<std::string> names;
  for (std::size_t i = 2; i < rows.size(); ++i) {
    // Cells end at a '|' that is not escaped; every row has the header's 12.
    std::vector<std::string> cells;
    std::string cell;
    for (std::size_t j = 1; j < rows[i].size(); ++j) {
      if (rows[i][j] == '\\' && j + 1 < rows[i].size() && rows[i][j + 1] == '|') {
        cell += '|';
        ++j;
      } else if (rows[i][j] == '|') {
        cells.push_back(cell);
        cell.clear();
      } else if (rows[i][j] == '\r') {
        cell += "<CR>";  // a raw carriage return would also end the line for a reader
      } else {
        cell += rows[i][j];
      }
    }
    ASSERT_EQ(cells.size(), 12u) << rows[i];
    names.insert(cells[0]);
  }
  EXPECT_EQ(names, (std::set<std::string>{" a|b ", " two lines ", " cr name ", " plain "}));
  e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
}

// Bug: names were copied into the JSON byte for byte, so a name that is not
// valid UTF-8 made the trace and the stats JSON invalid. Invalid bytes now
// become U+FFFD; valid multi-byte characters are kept.
TEST_P(ProfilerTest, NamesThatAreNotUtf8StillGiveValidJson) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  VarHandle v = e->NewVariable();
  const char* names[] = {"caf\xe9",      "na\xc3\xafve",    "cut\xe2\x82",
                         "over\xc0\xaf", "sur\xed\xa0\x80", "\xf0\x9f\x98\x80"};
  for (const char* name : names) {
    e->PushSync([](RunContext) {}, Context::CPU(), {}, {v}, FnProperty::kNormal, 0, name);
  }
  e->WaitForAll();
  const std::string trace_path = TempPath("utf8.json"), stats_path = TempPath("utf8_stats.json");
  DumpProfile(*e, trace_path);
  std::ostringstream table;
  DumpProfileStats(*e, table, stats_path);
  const std::string expected[] = {
      "caf\uFFFD", "na\u00efve", "cut\uFFFD", "over\uFFFD\uFFFD", "sur\uFFFD\uFFFD\uFFFD",
      "\U0001F600"};
  const std::set<std::string> want(std::begin(expected), std::end(expected));
  for (const std::string& path : {trace_path, stats_path}) {
    const std::string text = ReadFile(path);
    EXPECT_TRUE(ValidUtf8(text)) << path;
    json doc;
    ASSERT_NO_THROW(doc = json::parse(text)) << path;
    std::set<std::string> got;
    if (path == trace_path) {
      for (const json& ev : doc["traceEvents"]) {
        if (IsFunctionEvent(ev)) got.insert(ev["name"].get<std::string>());
      }
    } else {
      for (const json& f : doc["functions"]) got.insert(f["name"].get<std::string>());
    }
    EXPECT_EQ(got, want) << path;
  }
  e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  std::remove(trace_path.c_str());
  std::remove(stats_path.c_str());
}

// Bug: DumpProfileStats left std::fixed and setprecision(3) on the caller's
// stream.
TEST_P(ProfilerTest, StatsLeaveTheCallersStreamFormatAlone) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  RunSeedProgram(*e);
  std::ostringstream table;
  table << std::hex << std::showbase << std::setprecision(9);
  const std::ios_base::fmtflags flags = table.flags();
  DumpProfileStats(*e, table);
  EXPECT_EQ(table.flags(), flags);
  EXPECT_EQ(table.precision(), 9);
  std::ostringstream plain;
  DumpProfileStats(*e, plain);
  plain.str("");
  plain << 0.5;
  EXPECT_EQ(plain.str(), "0.5");
}

// The queue depth a function records: the profiled functions waiting in its
// pool's queue when it started (every waiting function while the whole
// engine is profiled). Bug: the priority heap's functions were counted
// whether profiled or not, the FIFO's only when profiled.
TEST_P(ProfilerTest, QueueDepthCountsTheProfiledFunctionsWaiting) {
  if (GetParam() == EngineKind::kNaive) GTEST_SKIP() << "the naive engine has no queue";
  for (const bool profile_all : {false, true}) {
    SCOPED_TRACE(profile_all ? "every push profiled" : "one push profiled");
    EngineOptions o;
    o.kind = GetParam();
    o.cpu_worker_threads = 1;
    auto e = CreateEngine(o);
    if (profile_all) SetProfiling(*e, true);
    // Holds the only worker while the others are queued.
    std::promise<void> started, open;
    std::shared_future<void> opened = open.get_future().share();
    e->PushSync(
        [&](RunContext) {
          started.set_value();
          opened.wait();
        },
        Context::CPU(), {}, {}, FnProperty::kNormal, 0, "blocker");
    started.get_future().wait();
    // Runs first (highest priority); behind it wait 5 functions in the heap
    // and 5 in the FIFO, profiled only when profile_all.
    OprHandle probe = e->NewOperator([](RunContext, CallbackOnComplete cb) { cb(); }, {}, {},
                                     FnProperty::kNormal, "probe");
    e->Push(probe, Context::CPU(), 10, /*profiling=*/true);
    for (int i = 0; i < 5; ++i) {
      e->PushSync([](RunContext) {}, Context::CPU(), {}, {}, FnProperty::kNormal, 5, "heap");
      e->PushSync([](RunContext) {}, Context::CPU(), {}, {}, FnProperty::kNormal, 0, "fifo");
    }
    open.set_value();
    e->WaitForAll();
    const std::string path = TempPath("depth.json");
    DumpProfile(*e, path);
    const json trace = ReadJson(path);
    double probe_start = -1;
    for (const json& ev : trace["traceEvents"]) {
      if (ev["ph"] == "X" && ev["name"] == "probe") probe_start = ev["ts"];
    }
    ASSERT_GE(probe_start, 0);
    int depth = -1;
    for (const json& ev : trace["traceEvents"]) {
      if (ev["ph"] == "C" && ev["name"].get<std::string>().starts_with("queue depth") &&
          ev["ts"] == probe_start) {
        depth = ev["args"]["depth"];
      }
    }
    EXPECT_EQ(depth, profile_all ? 10 : 0);
    e->DeleteOperator(probe);
    e->WaitForAll();
    std::remove(path.c_str());
  }
}

// Bug: a kAsync function made ready by a worker's completion runs inline on
// that worker, with no queue, yet its start was recorded with the worker's
// pool and a "queue depth <pool>" sample, as if it had come from that pool.
TEST_P(ProfilerTest, AsyncFunctionRunOnAWorkerHasNoQueueDepth) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  VarHandle v = e->NewVariable();
  // The writer finishes only after the kAsync reader was pushed, so the
  // reader is made ready by the writer's completion, on a worker (threaded
  // engines). The naive engine runs both inline.
  std::promise<void> reader_pushed;
  std::shared_future<void> pushed = reader_pushed.get_future().share();
  const bool naive = GetParam() == EngineKind::kNaive;
  e->PushSync(
      [pushed, naive](RunContext) {
        if (!naive) pushed.wait();
      },
      Context::CPU(), {}, {v}, FnProperty::kNormal, 0, "writer");
  e->PushAsync([](RunContext, CallbackOnComplete cb) { cb(); }, Context::CPU(), {v}, {},
               FnProperty::kAsync, 0, "async reader");
  reader_pushed.set_value();
  e->WaitForAll();
  const std::string path = TempPath("async_depth.json");
  DumpProfile(*e, path);
  const json trace = ReadJson(path);
  std::map<std::string, json> fn;
  std::map<int, std::string> row_names;
  int depth_samples = 0;
  for (const json& ev : trace["traceEvents"]) {
    if (ev["ph"] == "X") fn[ev["name"]] = ev;
    if (ev["ph"] == "M" && ev["name"] == "thread_name") row_names[ev["tid"]] = ev["args"]["name"];
    if (ev["ph"] == "C" && ev["name"].get<std::string>().starts_with("queue depth")) {
      ++depth_samples;
    }
  }
  ASSERT_TRUE(fn.count("writer") && fn.count("async reader"));
  if (!naive) {
    // It did run on the writer's worker: the case under test.
    EXPECT_EQ(fn["async reader"]["tid"], fn["writer"]["tid"]);
    EXPECT_THAT(row_names[fn["writer"]["tid"]], ::testing::Not(::testing::StartsWith("thread/")));
  }
  // One sample, the writer's, which came from a queue; none on the naive engine.
  EXPECT_EQ(depth_samples, naive ? 0 : 1);
  e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  std::remove(path.c_str());
}

// Bug: a thread was named by its pool in every engine's trace, so a worker
// of another engine that ran or finished one of this engine's functions (a
// kAsync function it pushed, a callback it called) showed as this engine's
// "cpu/normal/0" (two rows of that name), not as a thread outside the
// engine ("thread/N", profiler.md).
TEST_P(ProfilerTest, ThreadsOfAnotherEngineAreNotNamedByItsPools) {
  EngineOptions other_options;
  other_options.kind = EngineKind::kPerDevice;
  other_options.cpu_worker_threads = 1;
  auto other = CreateEngine(other_options);
  auto e = MakeEngine();
  SetProfiling(*e, true);
  VarHandle v = e->NewVariable();
  // Runs on this engine (a worker, or inline on the naive engine).
  e->PushSync([](RunContext) {}, Context::CPU(), {}, {v}, FnProperty::kNormal, 0, "own");
  e->WaitForAll();
  // Pushed from, and so run inline on, the other engine's worker.
  other->PushSync(
      [&](RunContext) {
        e->PushAsync([](RunContext, CallbackOnComplete cb) { cb(); }, Context::CPU(), {}, {},
                     FnProperty::kAsync, 0, "from the other engine");
      },
      Context::CPU(), {}, {}, FnProperty::kNormal, 0, "pusher");
  other->WaitForAll();
  e->WaitForAll();
  const std::string path = TempPath("other_engine.json");
  DumpProfile(*e, path);
  const json trace = ReadJson(path);
  std::map<int, std::string> row_names;
  std::map<std::string, int> tid_of;
  for (const json& ev : trace["traceEvents"]) {
    if (ev["ph"] == "M" && ev["name"] == "thread_name") row_names[ev["tid"]] = ev["args"]["name"];
    if (ev["ph"] == "X") tid_of[ev["name"]] = ev["tid"];
  }
  ASSERT_EQ(tid_of.count("from the other engine"), 1u);
  EXPECT_THAT(row_names[tid_of["from the other engine"]], ::testing::StartsWith("thread/"));
  std::multiset<std::string> names;
  for (const auto& [tid, name] : row_names) names.insert(name);
  for (const std::string& name : names) EXPECT_EQ(names.count(name), 1u) << name;
  e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  std::remove(path.c_str());
}

// Bug: tools/trace_to_svg.py wrote function and row names into the SVG as
// they were, so a name holding markup (`<`, `&`) or a control character made
// an SVG that no XML parser accepts; and a trace with no function made it
// crash (min() of nothing).
TEST_P(ProfilerTest, TraceToSvgGivesWellFormedSvg) {
#if defined(DEPENGINE_PYTHON) && defined(DEPENGINE_TRACE_TO_SVG)
  auto e = MakeEngine();
  SetProfiling(*e, true);
  const std::string empty_trace = TempPath("svg_empty.json");
  DumpProfile(*e, empty_trace);
  VarHandle v = e->NewVariable();
  for (const char* name : {"a < b", "x && y", "<tag attr=\"q\">", "ctl\x01", "new\nline"}) {
    e->PushSync([](RunContext) {}, Context::CPU(), {}, {v}, FnProperty::kNormal, 0, name);
  }
  e->WaitForAll();
  const std::string trace = TempPath("svg.json");
  DumpProfile(*e, trace);
  for (const std::string& in : {trace, empty_trace}) {
    const std::string svg = in + ".svg";
    const std::string render =
        std::string(DEPENGINE_PYTHON) + " " + DEPENGINE_TRACE_TO_SVG + " " + in + " " + svg;
    ASSERT_EQ(std::system(render.c_str()), 0) << render;
    // Parsed as XML; the names come back as they were (the control
    // character as U+FFFD).
    const std::string names = svg + ".names";
    const std::string parse = std::string(DEPENGINE_PYTHON) +
                              " -c \"import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); "
                              "open(sys.argv[2], 'w', encoding='utf-8').write('|'.join(sorted("
                              "t.firstChild.data.rsplit(' ', 2)[0] for t in "
                              "d.getElementsByTagName('title'))))\" " +
                              svg + " " + names;
    ASSERT_EQ(std::system(parse.c_str()), 0) << parse;
    // The trace's WaitForAll is drawn on the waiting thread's row too.
    EXPECT_EQ(ReadFile(names),
              in == trace ? "<tag attr=\"q\">|WaitForAll|a < b|ctl\uFFFD|new\nline|x && y" : "")
        << in;
    std::remove(svg.c_str());
    std::remove(names.c_str());
  }
  e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  std::remove(trace.c_str());
  std::remove(empty_trace.c_str());
#else
  GTEST_SKIP() << "python3 not found: tools/trace_to_svg.py is not tested";
#endif
}

// A locale whose numbers JSON and DOT do not accept: ',' as the decimal point
// and '.' between groups of three digits (as de_DE spells them).
struct CommaDecimals : std::numpunct<char> {
  char do_decimal_point() const override { return ','; }
  char do_thousands_sep() const override { return '.'; }
  std::string do_grouping() const override { return "\3"; }
};

// Sets the global locale for its scope.
class GlobalLocale {
 public:
  explicit GlobalLocale(const std::locale& l) : old_(std::locale::global(l)) {}
  ~GlobalLocale() { std::locale::global(old_); }
  GlobalLocale(const GlobalLocale&) = delete;
  GlobalLocale& operator=(const GlobalLocale&) = delete;

 private:
  const std::locale old_;
};

// Bug: the streams the dumps write with took the program's global locale, so
// a program that had set one wrote "seq":1.000 for 1000 in the trace (valid
// JSON, wrong number), "count":1.100 and "total":5,204 in the stats JSON
// (invalid) and node ids "f1.000" in the graph.
TEST_P(ProfilerTest, OutputsIgnoreTheGlobalLocale) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  VarHandle v = e->NewVariable();
  constexpr int kFunctions = 1100;  // seqs past 999, which the locale groups
  for (int i = 0; i < kFunctions; ++i) {
    e->PushSync([](RunContext) {}, Context::CPU(), {}, {v}, FnProperty::kNormal, 0, "f");
  }
  e->WaitForAll();
  const std::string trace_path = TempPath("locale.json"),
                    stats_path = TempPath("locale_stats.json"), graph_path = TempPath("locale.dot");
  {
    GlobalLocale comma(std::locale(std::locale::classic(), new CommaDecimals));
    DumpProfile(*e, trace_path);
    std::ostringstream table;
    DumpProfileStats(*e, table, stats_path);
    DumpDependencyGraph(*e, graph_path);
  }
  json trace;
  ASSERT_NO_THROW(trace = json::parse(ReadFile(trace_path)));
  std::set<std::uint64_t> seqs;
  for (const json& ev : trace["traceEvents"]) {
    if (!IsFunctionEvent(ev)) continue;
    ASSERT_TRUE(ev["args"]["seq"].is_number_unsigned()) << ev.dump();
    seqs.insert(ev["args"]["seq"].get<std::uint64_t>());
  }
  ASSERT_EQ(seqs.size(), static_cast<std::size_t>(kFunctions));
  EXPECT_EQ(*seqs.rbegin() - *seqs.begin(), static_cast<std::uint64_t>(kFunctions - 1));
  json stats;
  ASSERT_NO_THROW(stats = json::parse(ReadFile(stats_path)));
  ASSERT_EQ(stats["functions"].size(), 1u);
  EXPECT_EQ(stats["functions"][0]["count"], kFunctions);
  // Every node: f<seq> with the seq as digits only.
  const std::string dot = ReadFile(graph_path);
  const std::regex node("^  f([0-9]+) \\[label=\"f\\\\n#([0-9]+) [0-9]+\\.[0-9]{3} us\"");
  std::size_t nodes = 0;
  std::istringstream lines(dot);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("[label=") == std::string::npos || line.find("->") != std::string::npos) continue;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(line, m, node)) << line;
    EXPECT_EQ(m[1], m[2]) << line;
    ++nodes;
  }
  EXPECT_EQ(nodes, static_cast<std::size_t>(kFunctions));
  e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  for (const std::string& path : {trace_path, stats_path, graph_path}) std::remove(path.c_str());
}

// Bug: the table had no total of queue wait, which DumpProfileStats promises
// (count, total, mean, p50, p99 and max of run time and of queue wait) and
// the JSON has.
TEST_P(ProfilerTest, StatsTableHasEveryPromisedColumn) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  RunSeedProgram(*e);
  std::ostringstream table;
  DumpProfileStats(*e, table);
  std::string header = table.str().substr(0, table.str().find('\n'));
  std::vector<std::string> columns;
  std::istringstream cells(header.substr(1));
  for (std::string cell; std::getline(cells, cell, '|');)
    columns.push_back(cell.substr(1, cell.size() - 2));
  EXPECT_EQ(columns, (std::vector<std::string>{"function", "count", "run total us", "run mean",
                                               "run p50", "run p99", "run max", "wait total us",
                                               "wait mean", "wait p50", "wait p99", "wait max"}));
}

// Bug: the stats JSON wrote its numbers with the stream's default 6
// significant digits, so it did not hold the table's numbers ("the same as
// JSON"): a 10234.567 us total came out as 10234.6, 1.2 s as 1.20001e+06.
TEST_P(ProfilerTest, StatsJsonHoldsTheTablesNumbers) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  VarHandle v = e->NewVariable();
  // Run times of more than 10 ms: 8 digits or more at the table's 3 decimals.
  for (const char* name : {"slow a", "slow b", "slow c"}) {
    e->PushSync([](RunContext) { std::this_thread::sleep_for(std::chrono::milliseconds(10)); },
                Context::CPU(), {}, {v}, FnProperty::kNormal, 0, name);
  }
  e->WaitForAll();
  std::ostringstream table;
  const std::string path = TempPath("stats_digits.json");
  DumpProfileStats(*e, table, path);
  const json stats = ReadJson(path);
  std::map<std::string, const json*> by_name;
  for (const json& f : stats["functions"]) by_name[f["name"].get<std::string>()] = &f;
  std::istringstream lines(table.str());
  std::string line;
  std::getline(lines, line);  // header
  std::getline(lines, line);  // rule
  int rows = 0;
  while (std::getline(lines, line)) {
    std::vector<std::string> cells;
    std::istringstream row(line.substr(1));
    for (std::string cell; std::getline(row, cell, '|');)
      cells.push_back(cell.substr(1, cell.size() - 2));
    ASSERT_EQ(cells.size(), 12u) << line;
    ASSERT_EQ(by_name.count(cells[0]), 1u) << cells[0];
    const json& f = *by_name[cells[0]];
    EXPECT_EQ(std::to_string(f["count"].get<int>()), cells[1]);
    const json numbers[] = {f["run"]["total"],       f["run"]["mean"],
                            f["run"]["p50"],         f["run"]["p99"],
                            f["run"]["max"],         f["queue_wait"]["total"],
                            f["queue_wait"]["mean"], f["queue_wait"]["p50"],
                            f["queue_wait"]["p99"],  f["queue_wait"]["max"]};
    for (int k = 0; k < 10; ++k) {
      // The table's cell, read as JSON, is the JSON's number.
      EXPECT_EQ(json::parse(cells[static_cast<std::size_t>(k + 2)]), numbers[k])
          << cells[0] << " column " << k + 2 << ": table " << cells[static_cast<std::size_t>(k + 2)]
          << ", JSON " << numbers[k];
    }
    EXPECT_GE(f["run"]["total"].get<double>(), 10000.0);
    ++rows;
  }
  EXPECT_EQ(rows, 3);
  e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  std::remove(path.c_str());
}

// The text of a Graphviz quoted label, as Graphviz reads it: a backslash
// before '"' or before a backslash stands for that character, \n (and \l,
// \r) for a line break, and a backslash before anything else is dropped.
std::string DotLabelAsShown(const std::string& quoted) {
  std::string out;
  for (std::size_t i = 0; i < quoted.size(); ++i) {
    if (quoted[i] != '\\' || i + 1 == quoted.size()) {
      out += quoted[i];
      continue;
    }
    const char next = quoted[++i];
    out += next == 'n' || next == 'l' || next == 'r' ? '\n' : next;
  }
  return out;
}

// Bug: the graph's node labels were JSON string literals, which Graphviz
// does not read as JSON: a tab or another control character (JSON's
// "\u0009") showed as "u0009" in the rendered label.
TEST_P(ProfilerTest, GraphLabelsShowTheNames) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  VarHandle v = e->NewVariable();
  const std::pair<const char*, const char*> names[] = {
      {"tab\there", "tab here"}, {"ctl\x01\x1f\x7f", "ctl   "},
      {"cr\rx", "cr x"},         {"two\nlines", "two\nlines"},
      {"q\"uote", "q\"uote"},    {"back\\slash", "back\\slash"},
      {"ends\\", "ends\\"},      {"\\n", "\\n"},
      {"bad\xff", "bad\uFFFD"},  {"caf\xc3\xa9", "caf\xc3\xa9"}};
  for (const auto& [name, shown] : names) {
    e->PushSync([](RunContext) {}, Context::CPU(), {v}, {}, FnProperty::kNormal, 0, name);
  }
  e->WaitForAll();
  const std::string path = TempPath("labels.dot");
  DumpDependencyGraph(*e, path);
  const std::string dot = ReadFile(path);
  // A node's label: its name, then "\n#<seq> <time> us".
  const std::regex node("\\n  f[0-9]+ \\[label=\"((?:[^\"\\\\]|\\\\.)*)\\\\n#[0-9]+ [0-9.]+ us\"");
  std::multiset<std::string> got, want;
  for (auto it = std::sregex_iterator(dot.begin(), dot.end(), node); it != std::sregex_iterator();
       ++it) {
    got.insert(DotLabelAsShown((*it)[1]));
  }
  for (const auto& [name, shown] : names) want.insert(shown);
  EXPECT_EQ(got, want) << dot;
#ifdef DEPENGINE_DOT
  const std::string cmd = std::string(DEPENGINE_DOT) + " -Tsvg " + path + " -o /dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
#endif
  e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(AllEngines, ProfilerTest,
                         ::testing::Values(EngineKind::kNaive, EngineKind::kPooled,
                                           EngineKind::kPerDevice),
                         [](const ::testing::TestParamInfo<EngineKind>& info) {
                           return std::string(EngineKindName(info.param));
                         });

}  // namespace
}  // namespace depengine
