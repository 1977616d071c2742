// depengine-bench's runner (bench/runner): its command line, its cases and
// its report.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runner/bench_options.h"
#include "runner/cases.h"
#include "runner/interleaved_run.h"
#include "runner/report.h"

namespace depengine::bench {
namespace {

using ::testing::HasSubstr;

BenchOptions Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "depengine-bench");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseBenchOptions(static_cast<int>(argv.size()), argv.data());
}

// The message of the std::invalid_argument that parsing `arg` raises, or
// "no exception".
std::string Rejection(const std::string& arg) {
  try {
    Parse({arg});
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no exception";
}

TEST(BenchOptionsTest, ParsesGoodFlags) {
  const BenchOptions o =
      Parse({"--workers=3", "--reps=7", "--n-scale=0.01", "--only=W1,W4.T10,MEM",
             "--engines=pooled,per-device", "--json=out.json", "--run-timeout=60", "--no-memory"});
  EXPECT_EQ(o.workers, 3);
  EXPECT_EQ(o.reps, 7);
  EXPECT_DOUBLE_EQ(o.n_scale, 0.01);
  EXPECT_EQ(o.only, (std::vector<std::string>{"W1", "W4.T10", "MEM"}));
  EXPECT_EQ(o.engines, (std::vector<EngineKind>{EngineKind::kPooled, EngineKind::kPerDevice}));
  EXPECT_EQ(o.json_path, "out.json");
  EXPECT_EQ(o.run_timeout_s, 60);
  EXPECT_FALSE(o.memory);
  EXPECT_FALSE(o.pushed_ahead);
  EXPECT_TRUE(Parse({"--pushed-ahead"}).pushed_ahead);
}

// An integer that does not fit an int used to be wrapped: --reps=3000000000
// became a negative count (no repetition ran, no figure, exit status 0) and
// --reps=4294967297 became 1.
TEST(BenchOptionsTest, RejectsIntegersThatDoNotFitAnInt) {
  for (const char* arg : {"--reps=3000000000", "--reps=4294967297", "--workers=99999999999",
                          "--run-timeout=4294967295", "--run-timeout=99999999999999999999"}) {
    SCOPED_TRACE(arg);
    const std::string flag = std::string(arg).substr(0, std::string(arg).find('='));
    EXPECT_THAT(Rejection(arg), HasSubstr(flag + "="));
    EXPECT_THAT(Rejection(arg), HasSubstr("expected an integer"));
  }
  EXPECT_EQ(Parse({"--reps=2147483647"}).reps, 2147483647);
}

// --n-scale=inf and 1e300 used to be accepted; every size is then
// llround(size * X), which is undefined (the run hung in W1).
TEST(BenchOptionsTest, RejectsAnNScaleThatMakesSizesUnrepresentable) {
  for (const char* arg : {"--n-scale=inf", "--n-scale=nan", "--n-scale=1e300", "--n-scale=2e9",
                          "--n-scale=0", "--n-scale=-1", "--n-scale=x"}) {
    SCOPED_TRACE(arg);
    EXPECT_THAT(Rejection(arg), HasSubstr("--n-scale="));
  }
  EXPECT_DOUBLE_EQ(Parse({"--n-scale=1e9"}).n_scale, 1e9);
}

// --only=W9 used to select nothing, so the program printed an empty table
// and exited with status 0; --only= ran everything.
TEST(BenchOptionsTest, RejectsOnlyEntriesThatNameNoCase) {
  EXPECT_THAT(Rejection("--only=W9"), HasSubstr("unknown workload or case 'W9'"));
  EXPECT_THAT(Rejection("--only=W1,W4.T5"), HasSubstr("'W4.T5'"));
  EXPECT_THAT(Rejection("--only="), HasSubstr("--only: name at least one"));
  EXPECT_THAT(Rejection("--only=,"), HasSubstr("--only: name at least one"));
}

// MEM is measured only with the memory figures: --only=MEM --no-memory
// printed an empty table and exited 0.
TEST(BenchOptionsTest, RejectsOnlyMemWithoutMemory) {
  EXPECT_THROW(Parse({"--only=MEM", "--no-memory"}), std::invalid_argument);
  EXPECT_THROW(Parse({"--no-memory", "--only=MEM"}), std::invalid_argument);
  EXPECT_NO_THROW(Parse({"--only=MEM,W1", "--no-memory"}));
  EXPECT_NO_THROW(Parse({"--only=MEM"}));
  // --profile profiles the timed cases; MEM is none.
  EXPECT_THROW(Parse({"--only=MEM", "--profile=/tmp/p"}), std::invalid_argument);
  EXPECT_NO_THROW(Parse({"--only=MEM,W3", "--profile=/tmp/p"}));
}

TEST(BenchOptionsTest, RejectsAnEngineNamedTwice) {
  EXPECT_THAT(Rejection("--engines=naive,naive"), HasSubstr("'naive'"));
  EXPECT_THAT(Rejection("--engines=pooled,ThreadedEnginePooled"),
              HasSubstr("'ThreadedEnginePooled'"));
}

TEST(BenchOptionsTest, RejectsAValueOnAFlagThatTakesNone) {
  EXPECT_THAT(Rejection("--no-memory=0"), HasSubstr("--no-memory takes no value"));
  EXPECT_THAT(Rejection("--help=x"), HasSubstr("--help takes no value"));
  EXPECT_THAT(Rejection("--pushed-ahead=1"), HasSubstr("--pushed-ahead takes no value"));
}

// Every name --only accepts selects something, and every case is named.
TEST(BenchCasesTest, CaseNamesMatchTheCases) {
  const std::vector<std::string>& names = BenchCaseNames();
  const auto named = [&](const std::string& s) {
    return std::find(names.begin(), names.end(), s) != names.end();
  };
  const std::vector<BenchCase> all =
      MakeBenchCases(1e-6, [](const std::string&, const std::string&) { return true; });
  ASSERT_FALSE(all.empty());
  for (const BenchCase& c : all) {
    EXPECT_TRUE(named(c.id)) << c.id;
    EXPECT_TRUE(named(c.workload)) << c.workload;
  }
  for (const std::string& name : names) {
    if (name == kPendingMemoryId) continue;
    const std::vector<BenchCase> selected =
        MakeBenchCases(1e-6, [&](const std::string& id, const std::string& workload) {
          return id == name || workload == name;
        });
    EXPECT_FALSE(selected.empty()) << name;
  }
}

// W4 with work carries its bodies-alone run (the machine's ceiling), and it
// runs every function's body once: at least ops * T / threads of wall. The
// other cases have none.
TEST(BenchCasesTest, W4WithWorkRunsItsBodiesAloneOnTheGivenThreads) {
  const std::vector<BenchCase> all = MakeBenchCases(
      0.01, [](const std::string&, const std::string& workload) { return workload == "W4"; });
  ASSERT_EQ(all.size(), 3u);
  for (const BenchCase& c : all) {
    SCOPED_TRACE(c.id);
    ASSERT_EQ(static_cast<bool>(c.bodies_only), c.spin_us > 0);
    if (c.spin_us == 0) continue;
    for (int threads : {1, 2}) {
      const double floor = static_cast<double>(c.ops) * c.spin_us * 1e-6 / threads;
      EXPECT_GE(c.bodies_only(threads), floor) << threads << " thread(s)";
    }
  }
}

// W4 with work also runs with every function pushed before the clock
// starts, on every engine kind, with the same check: the right values pass,
// and a run whose values differ from the serial run's fails naming the var.
// The other cases have no such run.
TEST(BenchCasesTest, W4WithWorkPushedAheadIsCheckedOnEveryEngine) {
  const std::vector<BenchCase> all = MakeBenchCases(
      0.01, [](const std::string&, const std::string& workload) { return workload == "W4"; });
  ASSERT_EQ(all.size(), 3u);
  for (const BenchCase& c : all) {
    ASSERT_EQ(static_cast<bool>(c.pushed_ahead), c.spin_us > 0) << c.id;
  }
  RandomDagParams params;
  params.ops = 2'000;
  params.spin_us = 1;
  const RandomDag dag = MakeRandomDag(params);
  const std::vector<std::uint64_t> expected = SerialRandomDag(dag);
  std::vector<std::uint64_t> wrong = expected;
  wrong[7] ^= 1;
  for (EngineKind kind : {EngineKind::kNaive, EngineKind::kPooled, EngineKind::kPerDevice}) {
    SCOPED_TRACE(EngineKindName(kind));
    EngineOptions o;
    o.kind = kind;
    o.cpu_worker_threads = 2;
    auto engine = CreateEngine(o);
    const WorkloadResult r = RunRandomDagPushedAhead(*engine, dag, params.spin_us, expected);
    ASSERT_TRUE(r.ok) << r.check_error;
    EXPECT_EQ(r.ops, params.ops);
    // Every body spins T after the clock starts, on at most two threads.
    EXPECT_GE(r.seconds, static_cast<double>(params.ops) * params.spin_us * 1e-6 / 2);
    const WorkloadResult bad = RunRandomDagPushedAhead(*engine, dag, params.spin_us, wrong);
    EXPECT_FALSE(bad.ok);
    EXPECT_THAT(bad.check_error, HasSubstr("var 7 ="));
  }
}

// --pushed-ahead adds one row per engine to W4 with work, named after the
// engine, timed in every repetition; without it there is none.
TEST(BenchRunTest, PushedAheadAddsARowPerEngine) {
  for (bool pushed_ahead : {false, true}) {
    SCOPED_TRACE(pushed_ahead);
    BenchOptions o = Parse({"--only=W4.T1", "--n-scale=0.01", "--reps=2", "--no-memory",
                            "--engines=pooled,per-device", "--workers=2"});
    o.pushed_ahead = pushed_ahead;
    std::ostringstream progress;
    const std::vector<ReportRow> rows = RunInterleaved(o, progress);
    std::vector<std::string> engines;
    for (const ReportRow& r : rows) {
      engines.push_back(r.engine);
      EXPECT_TRUE(r.ok) << r.engine << ": " << r.error;
      EXPECT_EQ(r.seconds.size(), 2u) << r.engine;
    }
    std::vector<std::string> want = {"ThreadedEnginePooled", "ThreadedEnginePerDevice"};
    if (pushed_ahead) {
      want.push_back("ThreadedEnginePooled, pushed ahead");
      want.push_back("ThreadedEnginePerDevice, pushed ahead");
    }
    want.push_back(kBodiesOnlyEngine);
    EXPECT_EQ(engines, want);
  }
}

// A case's run measures the process's CPU time over its timed region too:
// more than nothing, and no more than every hardware thread busy for the
// whole wall time (a unit slip, seconds for microseconds, would break
// either bound). The kernel brings a thread's CPU time up to date at its
// next tick or switch, so each end of a region can be about a millisecond
// stale per thread running elsewhere (measured here: 2 ms regions read
// 1.0x to 2.9x of two spinning threads, 20 ms regions 1.99x): the region is
// tens of milliseconds, and the bound has 5 ms of slack.
TEST(BenchCasesTest, ARunMeasuresItsCpuTimeWithinWhatTheMachineHas) {
  const std::vector<BenchCase> w4 =
      MakeBenchCases(0.2, [](const std::string& id, const std::string&) { return id == "W4.T1"; });
  ASSERT_EQ(w4.size(), 1u);
  for (EngineKind kind : {EngineKind::kNaive, EngineKind::kPerDevice}) {
    EngineOptions o;
    o.kind = kind;
    o.cpu_worker_threads = 2;
    auto engine = CreateEngine(o);
    const WorkloadResult r = w4[0].run(*engine);
    ASSERT_TRUE(r.ok) << r.check_error;
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    EXPECT_GT(r.cpu_seconds, 0) << EngineKindName(kind);
    EXPECT_LE(r.cpu_seconds, r.seconds * threads + 0.005) << EngineKindName(kind);
  }
}

// The report shows the median CPU time per op beside the wall figures, in
// the table and in the JSON, and leaves it blank for a row that has none.
TEST(BenchReportTest, ShowsTheMedianCpuTimePerOp) {
  ReportRow measured;
  measured.case_id = "W1";
  measured.title = "W1 chain";
  measured.engine = "ThreadedEnginePerDevice";
  measured.ops = 1000;
  measured.seconds = {0.001, 0.003, 0.002};
  measured.cpu_seconds = {0.004, 0.002, 0.0025};  // median 2.5 us per op
  ReportRow bodies = measured;
  bodies.engine = "bodies alone, no engine";
  bodies.cpu_seconds.clear();
  const ReportSettings settings{2, 3, 1, 2};
  std::ostringstream table;
  PrintMarkdown(table, settings, {measured, bodies});
  EXPECT_THAT(table.str(), HasSubstr("| ns/op max | CPU ns/op |"));
  EXPECT_THAT(table.str(), HasSubstr("| 1,000 | 2000 | 1000 | 3000 | 2500 |"));
  EXPECT_THAT(table.str(), HasSubstr("| 1,000 | 2000 | 1000 | 3000 |  |"));

  const std::string path = ::testing::TempDir() + "bench_report_test.json";
  std::string error;
  ASSERT_TRUE(WriteJson(path, settings, {measured, bodies}, &error)) << error;
  std::ifstream in(path);
  const std::string json((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(path.c_str());
  EXPECT_THAT(json,
              HasSubstr("\"cpu_ns_per_op_median\": 2500, \"cpu_seconds\": [0.004, 0.002, 0.0025]"));
  EXPECT_EQ(json.find("cpu_ns_per_op_median"), json.rfind("cpu_ns_per_op_median"))
      << "only the measured row has one";
}

}  // namespace
}  // namespace depengine::bench
