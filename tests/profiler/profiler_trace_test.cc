// What the profiler's trace records (named rows, function events, flows,
// waits, queue depth), checked against the dependencies of the program that
// produced it, and what it records as a thread or the process exits.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "depengine/engine.h"
#include "depengine/profiler.h"
#include "profiler_test_support.h"

namespace depengine::profiler_test {
namespace {

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
// Each function event names its property and its device, for every
// property and device kind (with a simulated GPU for the GPU's pools).
TEST_P(ProfilerTest, EventsNameEveryPropertyAndDeviceKind) {
  EngineOptions o;
  o.kind = GetParam();
  o.cpu_worker_threads = 2;
  o.simulated_gpus = 1;
  auto e = CreateEngine(o);
  SetProfiling(*e, true);
  VarHandle v = e->NewVariable();
  const auto nothing = [](RunContext) {};
  e->PushSync(nothing, Context::CPU(), {}, {v}, FnProperty::kNormal, 0, "normal");
  e->PushSync(nothing, Context::CPU(), {}, {v}, FnProperty::kCPUPrioritized, 0, "prioritized");
  e->PushAsync([](RunContext, CallbackOnComplete done) { done(); }, Context::CPU(), {}, {v},
               FnProperty::kAsync, 0, "async");
  e->PushSync(nothing, Context::GPU(0), {}, {v}, FnProperty::kCopyToGPU, 0, "to_gpu");
  e->PushSync(nothing, Context::GPU(0), {}, {v}, FnProperty::kCopyFromGPU, 0, "from_gpu");
  e->PushSync(nothing, Context::GPU(0), {}, {v}, FnProperty::kNormal, 0, "on_gpu");
  e->PushSync(nothing, Context::CPUPinned(0), {}, {v}, FnProperty::kNormal, 0, "pinned");
  e->WaitForAll();
  const std::string path = TempPath("properties.json");
  DumpProfile(*e, path);
  std::map<std::string, std::pair<std::string, std::string>> got;  // name -> (property, device)
  const json trace = ReadJson(path);
  for (const json& ev : trace["traceEvents"]) {
    if (!IsFunctionEvent(ev)) continue;
    got[ev["name"].get<std::string>()] = {ev["args"]["property"].get<std::string>(),
                                          ev["args"]["device"].get<std::string>()};
  }
  const std::map<std::string, std::pair<std::string, std::string>> want = {
      {"normal", {"kNormal", "cpu(0)"}},        {"prioritized", {"kCPUPrioritized", "cpu(0)"}},
      {"async", {"kAsync", "cpu(0)"}},          {"to_gpu", {"kCopyToGPU", "gpu(0)"}},
      {"from_gpu", {"kCopyFromGPU", "gpu(0)"}}, {"on_gpu", {"kNormal", "gpu(0)"}},
      {"pinned", {"kNormal", "cpu_pinned(0)"}}};
  EXPECT_EQ(got, want);
  e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  std::remove(path.c_str());
}

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

// A function's time before it starts is split in two: waiting for the
// functions it depends on (the trace's dependency_wait_us, push to ready)
// and waiting for a worker (queue_wait_us, ready to start; the statistics'
// queue wait). "waiter" spends 200 ms on the first: it reads a var that an
// async function holds until the test calls its callback, so even the naive
// engine pushes it while the var is held. On the threaded engines "queued"
// spends 100 ms or more on the second: it has no dependency, but both
// workers run "busy" functions that end only 100 ms after it was pushed.
TEST_P(ProfilerTest, DependencyWaitAndQueueWaitAreToldApart) {
  using std::chrono::milliseconds;
  auto e = MakeEngine();
  SetProfiling(*e, true);
  VarHandle held = e->NewVariable();
  std::promise<CallbackOnComplete> handed;
  std::future<CallbackOnComplete> callback = handed.get_future();
  e->PushAsync([&handed](RunContext, CallbackOnComplete done) { handed.set_value(done); },
               Context::CPU(), {}, {held}, FnProperty::kNormal, 0, "holder");
  e->PushSync([](RunContext) {}, Context::CPU(), {held}, {}, FnProperty::kNormal, 0, "waiter");
  const CallbackOnComplete done = callback.get();
  std::this_thread::sleep_for(milliseconds(200));
  done();
  e->WaitForAll();

  const bool threaded = GetParam() != EngineKind::kNaive;
  std::vector<VarHandle> own;
  if (threaded) {
    std::promise<void> pushed;
    std::shared_future<void> released = pushed.get_future().share();
    for (const char* name : {"busy 1", "busy 2", "queued"}) {
      own.push_back(e->NewVariable());
      const bool busy = name[0] == 'b';
      e->PushSync(
          [released, busy](RunContext) {
            if (!busy) return;
            released.wait();
            std::this_thread::sleep_for(milliseconds(100));
          },
          Context::CPU(), {}, {own.back()}, FnProperty::kNormal, 0, name);
    }
    pushed.set_value();
    e->WaitForAll();
  }
  SetProfiling(*e, false);

  const std::string path = TempPath("two_waits.json");
  DumpProfile(*e, path);
  std::map<std::string, json> fn;
  const json trace = ReadJson(path);  // kept: the loop reads into it
  for (const json& ev : trace["traceEvents"]) {
    if (IsFunctionEvent(ev)) fn[ev["name"]] = ev;
  }
  ASSERT_TRUE(fn.count("waiter"));
  const double waiter_dependency = fn["waiter"]["args"]["dependency_wait_us"].get<double>();
  const double waiter_queue = fn["waiter"]["args"]["queue_wait_us"].get<double>();
  EXPECT_GE(waiter_dependency, 199000.0);
  EXPECT_LT(waiter_queue, waiter_dependency / 2) << "the dependency wait counted as queue wait";
  if (threaded) {
    ASSERT_TRUE(fn.count("queued"));
    const double queued_dependency = fn["queued"]["args"]["dependency_wait_us"].get<double>();
    const double queued_queue = fn["queued"]["args"]["queue_wait_us"].get<double>();
    EXPECT_GE(queued_queue, 99000.0);
    EXPECT_LT(queued_dependency, queued_queue / 2) << "the queue wait counted as dependency wait";
  }

  std::ostringstream table;
  const std::string stats_path = TempPath("two_waits_stats.json");
  DumpProfileStats(*e, table, stats_path);
  std::map<std::string, json> stats;
  const json stats_json = ReadJson(stats_path);  // kept: the loop reads into it
  for (const json& f : stats_json["functions"]) stats[f["name"]] = f;
  ASSERT_TRUE(stats.count("waiter"));
  EXPECT_LT(stats["waiter"]["queue_wait"]["max"].get<double>(), waiter_dependency / 2)
      << "the statistics count the dependency wait as queue wait";
  if (threaded) {
    ASSERT_TRUE(stats.count("queued"));
    EXPECT_GE(stats["queued"]["queue_wait"]["max"].get<double>(), 99000.0);
  }
  own.push_back(held);
  for (VarHandle v : own) e->DeleteVariable({}, Context::CPU(), v);
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

// The TEST_Ps of every profiler_*_test.cc in this executable run on each engine kind.
INSTANTIATE_TEST_SUITE_P(AllEngines, ProfilerTest,
                         ::testing::Values(EngineKind::kNaive, EngineKind::kPooled,
                                           EngineKind::kPerDevice),
                         [](const ::testing::TestParamInfo<EngineKind>& info) {
                           return std::string(EngineKindName(info.param));
                         });

}  // namespace
}  // namespace depengine::profiler_test
