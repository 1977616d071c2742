// The trace written when an engine is destroyed (EngineOptions::profile_path,
// DEPENGINE_PROFILE): engines sharing the path, paths that cannot be written;
// and the memory a recording thread keeps (ProfilerMemory).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "alloc_counter.h"
#include "depengine/engine.h"
#include "depengine/profiler.h"
#include "profiler_test_support.h"

namespace depengine::profiler_test {
namespace {

using test::AllocationCountingAvailable;
using test::CountedAllocationBytes;
using test::StartCountingAllocations;
using test::StopCountingAllocations;

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

}  // namespace
}  // namespace depengine::profiler_test
