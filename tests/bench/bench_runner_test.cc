// depengine-bench's runner (bench/runner): its command line and its cases.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "runner/bench_options.h"
#include "runner/cases.h"

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

}  // namespace
}  // namespace depengine::bench
