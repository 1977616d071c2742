// depengine-peers (bench/peers/driver), black-box: each test writes fake
// peer executables into a directory of its own and runs the driver on them
// with --bindir. A fake peer is a shell script that speaks the protocol of
// bench/peers/peer_server.h and answers its runs from a script: a number is
// a passed run with that figure (and seconds, ns/op, efficiency), "fail" a
// failed check.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#ifndef DEPENGINE_PEERS_DRIVER
#error "DEPENGINE_PEERS_DRIVER must name the depengine-peers executable"
#endif
#ifndef DEPENGINE_PEER_PROGRAM
#error "DEPENGINE_PEER_PROGRAM must name the peers-depengine executable"
#endif

namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class PeersDriverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ = ::testing::TempDir() + "peers_driver_XXXXXX";
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
    bindir_ = dir_ + "/bin";
    out_ = dir_ + "/out";
    ASSERT_EQ(mkdir(bindir_.c_str(), 0755), 0);
  }
  void TearDown() override {
    const std::string rm = "rm -rf '" + dir_ + "'";
    if (std::system(rm.c_str()) != 0) ADD_FAILURE() << "could not remove " << dir_;
  }

  // Writes the fake peer `exe` (peers-depengine, peers-tbb, ...): it answers
  // its n-th "run" (the warm-up is the first) with the n-th word of
  // `answers`.
  void FakePeer(const std::string& exe, const std::string& answers) {
    const std::string path = bindir_ + "/" + exe;
    std::ofstream f(path);
    f << "#!/bin/sh\n"
         "printf '@peer ready\\tengine=fake\\truntime=fake\\tdetail=scripted answers\\n'\n"
         "n=0\n"
         "while read -r line; do\n"
         "  case \"$line\" in\n"
         "    run)\n"
         "      n=$((n + 1))\n"
         "      v=$(echo '"
      << answers
      << "' | cut -d' ' -f$n)\n"
         "      if [ \"$v\" = fail ]; then\n"
         "        printf '@peer result\\tok=0\\terror=scripted failure\\n'\n"
         "      else\n"
         "        printf '@peer "
         "result\\tok=1\\tseconds=%s\\tops=1\\tns_per_op=%s\\tpeak_rss=1000000"
         "\\tefficiency=%s\\tcritical_path=7\\tbest_efficiency=0.5\\n' \"$v\" \"$v\" \"$v\"\n"
         "      fi ;;\n"
         "    quit) exit 0 ;;\n"
         "  esac\n"
         "done\n";
    f.close();
    ASSERT_EQ(chmod(path.c_str(), 0755), 0);
  }

  // A peer executable `exe` that answers "unsupported" with `reason` and
  // exits at once, as peer_server.cc does.
  void UnsupportedPeer(const std::string& exe, const std::string& reason) {
    const std::string path = bindir_ + "/" + exe;
    std::ofstream(path) << "#!/bin/sh\nprintf '@peer unsupported\\treason=" << reason << "\\n'\n";
    ASSERT_EQ(chmod(path.c_str(), 0755), 0);
  }

  // Runs depengine-peers with `flags` on the fake peers; returns its exit
  // status, its output (stdout and stderr) in *output.
  int RunDriver(const std::string& flags, std::string* output) {
    const std::string log = dir_ + "/driver.out";
    const std::string cmd = std::string("'") + DEPENGINE_PEERS_DRIVER + "' --bindir='" + bindir_ +
                            "' --out='" + out_ + "' --timeout-s=20 " + flags + " > '" + log +
                            "' 2>&1";
    const int status = std::system(cmd.c_str());
    *output = ReadFile(log);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // The line of peers.json for `job` on `engine`.
  std::string JsonLine(const std::string& job, const std::string& engine) {
    std::istringstream in(ReadFile(out_ + "/peers.json"));
    std::string line;
    const std::string key = "{\"job\": \"" + job + "\"";
    const std::string eng = "\"engine\": \"" + engine + "\"";
    while (std::getline(in, line)) {
      if (line.rfind(key, 0) == 0 && line.find(eng) != std::string::npos) return line;
    }
    return "";
  }

  std::string dir_, bindir_, out_;
};

// A run whose check fails gives no figure and the exit status 1 (it used to
// be 0, so tools/run_peers.sh and CI could not tell).
TEST_F(PeersDriverTest, FailedCheckGivesNoFigureAndExitStatus1) {
  FakePeer("peers-depengine", "100 10 10 10");
  FakePeer("peers-tbb", "100 20 fail 20");
  std::string output;
  EXPECT_EQ(
      RunDriver("--engines=depengine-perdevice,tbb --groups=table --only=W1 --reps=3", &output), 1)
      << output;
  EXPECT_THAT(output, HasSubstr("FAILED"));
  const std::string tbb = JsonLine("W1", "tbb");
  EXPECT_THAT(tbb, HasSubstr("\"status\": \"check failed: scripted failure\""));
  EXPECT_THAT(tbb, HasSubstr("\"median\": null"));
  EXPECT_THAT(tbb, HasSubstr("\"ratio_vs_depengine\": null"));
  const std::string md = ReadFile(out_ + "/peers.md");
  EXPECT_THAT(md, HasSubstr("| W1 chain | N = 1,000,000 | ns/op | 10.0 | n/a |"));
  EXPECT_THAT(md, HasSubstr("oneTBB: check failed: scripted failure"));
}

TEST_F(PeersDriverTest, AllChecksPassedGivesExitStatus0) {
  FakePeer("peers-depengine", "100 10 10 10");
  FakePeer("peers-tbb", "100 20 20 20");
  std::string output;
  EXPECT_EQ(
      RunDriver("--engines=depengine-perdevice,tbb --groups=table --only=W1 --reps=3", &output), 0)
      << output;
}

// The ratio is the median of the repetition-by-repetition ratios, not the
// ratio of the medians (30 / 20 = 1.5 here).
TEST_F(PeersDriverTest, RatioIsTheMedianOfThePairwiseRatios) {
  FakePeer("peers-depengine", "1000 10 20 30 40 50");
  FakePeer("peers-tbb", "1000 20 10 60 20 100");
  std::string output;
  ASSERT_EQ(RunDriver("--engines=depengine-perdevice,tbb --groups=table --only=W1", &output), 0)
      << output;
  EXPECT_THAT(JsonLine("W1", "depengine-perdevice"), HasSubstr("\"median\": 30,"));
  const std::string tbb = JsonLine("W1", "tbb");
  EXPECT_THAT(tbb, HasSubstr("\"median\": 20,"));
  EXPECT_THAT(tbb, HasSubstr("\"ratio_vs_depengine\": 0.5,"));
  EXPECT_THAT(tbb, HasSubstr("\"reps\": [20, 10, 60, 20, 100]"));  // the warm-up is left out
  // Its spread: 10/20 ... 40/20.
  EXPECT_THAT(tbb, HasSubstr("\"ratio_min\": 0.5, \"ratio_max\": 2,"));
  EXPECT_THAT(ReadFile(out_ + "/peers.md"), HasSubstr("| oneTBB | 0.50 | 0.50 - 2.00 |"));
}

// WORKLOADS.md: beside W4's efficiency (T = 1 and 10), print the DAG's
// critical path. It used to be printed only when W4.T10 was run.
TEST_F(PeersDriverTest, CriticalPathIsPrintedBesideAnyW4Efficiency) {
  FakePeer("peers-depengine", "0.5 0.5 0.5 0.5 0.5 0.5");
  FakePeer("peers-tbb", "0.4 0.4 0.4 0.4 0.4 0.4");
  std::string output;
  ASSERT_EQ(RunDriver("--engines=depengine-perdevice,tbb --groups=table --only=W4.T1", &output), 0)
      << output;
  EXPECT_THAT(ReadFile(out_ + "/peers.md"),
              HasSubstr("W4's DAG has a critical path of 7 functions"));
}

// A bad flag is rejected with a message naming it and exit status 2; these
// used to run (with the value read as 0, or selecting nothing) and exit 0.
TEST_F(PeersDriverTest, BadFlagsExitWithStatus2) {
  FakePeer("peers-depengine", "10 10 10 10 10 10");
  for (const char* flag :
       {"--threads=abc", "--threads=-3", "--threads=0", "--threads=5000", "--budget-s=abc",
        "--timeout-s=abc", "--timeout-s=0", "--scale=inf", "--scale=abc", "--reps=abc",
        "--reps=3000000000", "--warmup=-1", "--mem-reps=0", "--engines=bogus",
        "--engines=", "--only=W9", "--only=", "--groups=foo", "--groups="}) {
    SCOPED_TRACE(flag);
    std::string output;
    EXPECT_EQ(
        RunDriver(std::string("--engines=depengine-perdevice --only=W1 --groups=table ") + flag,
                  &output),
        2)
        << output;
    const std::string name = std::string(flag).substr(0, std::string(flag).find('='));
    EXPECT_THAT(output, HasSubstr(name)) << output;
  }
  // --only names a job that --groups leaves out: it would select nothing.
  std::string output;
  EXPECT_EQ(RunDriver("--engines=depengine-perdevice --groups=table --only=W6", &output), 2)
      << output;
  EXPECT_THAT(output, HasSubstr("'W6' selects no job"));
  EXPECT_THAT(output, Not(HasSubstr("wrote")));
}

// A runtime that cannot start (its setup threw: peer_server.cc answers
// "unsupported" with "setup failed") leaves its column empty: a failure,
// while a workload a runtime has no implementation of is not.
TEST_F(PeersDriverTest, RuntimeThatCannotStartIsAFailure) {
  FakePeer("peers-depengine", "10 10 10 10 10 10");
  UnsupportedPeer("peers-tbb", "no implementation of W1");
  std::string output;
  EXPECT_EQ(RunDriver("--engines=depengine-perdevice,tbb --groups=table --only=W1", &output), 0)
      << output;
  UnsupportedPeer("peers-tbb", "setup failed: tbb could not start");
  EXPECT_EQ(RunDriver("--engines=depengine-perdevice,tbb --groups=table --only=W1", &output), 1)
      << output;
  EXPECT_THAT(ReadFile(out_ + "/peers.md"),
              HasSubstr("unsupported: setup failed: tbb could not start"));
}

// A peer that answers "unsupported" exits at once (peer_server.cc); the
// driver's "quit" to it then met a closed pipe and SIGPIPE killed the
// driver (exit status 141) with the run half done. Five tries: the race
// was lost about every other time.
TEST_F(PeersDriverTest, PeerThatExitsAtOnceDoesNotKillTheDriver) {
  FakePeer("peers-depengine", "10 10 10 10 10 10");
  UnsupportedPeer("peers-tbb", "no implementation");
  for (int i = 0; i < 5; ++i) {
    std::string output;
    ASSERT_EQ(RunDriver("--engines=depengine-perdevice,tbb --groups=table --only=W1", &output), 0)
        << output;
    EXPECT_THAT(output, HasSubstr("wrote"));
  }
}

// --out may name a directory several levels down; one that cannot be made
// is an error. The results used to be lost without a word ("wrote ..."
// was printed) and the exit status was 0.
TEST_F(PeersDriverTest, OutputDirectoryIsMadeOrTheRunFails) {
  FakePeer("peers-depengine", "10 10 10 10 10 10");
  out_ = dir_ + "/a/b/c";
  std::string output;
  ASSERT_EQ(RunDriver("--engines=depengine-perdevice --groups=table --only=W1", &output), 0)
      << output;
  EXPECT_THAT(ReadFile(out_ + "/peers.json"), HasSubstr("\"job\": \"W1\""));
  EXPECT_THAT(ReadFile(out_ + "/peers.md"), HasSubstr("| W1 chain |"));

  // A directory under a regular file cannot be made.
  std::ofstream(dir_ + "/file") << "x";
  out_ = dir_ + "/file/out";
  EXPECT_EQ(RunDriver("--engines=depengine-perdevice --groups=table --only=W1", &output), 1)
      << output;
  EXPECT_THAT(output, HasSubstr("cannot create --out="));
  EXPECT_THAT(output, Not(HasSubstr("wrote")));
}

// A peer program on its own (bench/peers/peer_server.cc's command line):
// "ops=abc" used to be read as 0, so W1 ran no function and its check
// passed; a misspelt parameter was ignored and the default size run.
TEST_F(PeersDriverTest, PeerProgramRejectsBadArguments) {
  const std::string log = dir_ + "/peer.out";
  const auto run = [&](const std::string& args, std::string* output) {
    const std::string cmd =
        std::string("'") + DEPENGINE_PEER_PROGRAM + "' " + args + " > '" + log + "' 2>&1";
    const int status = std::system(cmd.c_str());
    *output = ReadFile(log);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  std::string output;
  for (const char* args :
       {"W1 ops=abc", "W1 ops=-5", "W1 ops=0", "W1 ops=1.5", "W1 op=1000", "W4 T=x",
        "--threads=abc W1 ops=10", "--threads=0 W1 ops=10", "--reps=abc W1 ops=10"}) {
    SCOPED_TRACE(args);
    EXPECT_EQ(run(args, &output), 2) << output;
    EXPECT_THAT(output, Not(HasSubstr("@peer result"))) << output;
  }
  EXPECT_EQ(run("--reps=1 --threads=1 W1 ops=1e3", &output), 0) << output;
  EXPECT_THAT(output, HasSubstr("@peer result\tok=1\t"));
  EXPECT_THAT(output, HasSubstr("\tops=1000\t"));
}

}  // namespace
