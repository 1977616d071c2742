// depengine-peers: runs W1-W6 of ../shared/WORKLOADS.md on depengine and
// its peers in one run, and writes peers.json and peers.md.
//
// For each job (a workload at one size) it starts one peer process per
// engine, stops each with SIGSTOP while another is measured, runs one
// warm-up per engine, then the timed repetitions interleaved: A B C A B C
// ..., so that drift of the machine hits every engine alike. A failed check
// gives no figure. Ratios are depengine per-device's figure over each
// engine's, taken repetition by repetition, then the median.
//
//   depengine-peers --out DIR [--quick] [--only=W1,W6] [--groups=table,w6,memory,scale]
//
// Exit status: 0 when every run passed its check (or was skipped, or has no
// implementation on its runtime); 1 when a run failed its check or errored
// (timed out, died) or a runtime could not start, the tables being written
// all the same, or when --out
// cannot be made or written; 2 on a bad flag.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "driver/child.h"
#include "driver/plan.h"
#include "driver/report.h"
#include "driver/stats.h"

namespace depengine::bench::peers {
namespace {

struct Options {
  std::string out = "peers-results";
  std::string log;  // default: <out>/peers.log
  std::string bindir;
  int threads = 0;
  double budget_s = 3.0;    // scaling points: skip an engine whose run would take longer
  double timeout_s = 120.0; // any single run
  std::vector<std::string> engines;  // empty: every engine that was built
  PlanOptions plan;
  bool list = false;
};

std::vector<std::string> Split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

void Usage(const char* argv0) {
  std::fprintf(
      stderr,
      "usage: %s [options]\n"
      "  --out=DIR          where peers.json and peers.md go (default peers-results)\n"
      "  --log=FILE         the peers' own output (default DIR/peers.log)\n"
      "  --quick            every size x 0.01 (a smoke test; the figures mean little)\n"
      "  --scale=X          every size x X\n"
      "  --groups=LIST      table,w6,memory,scale (default: all)\n"
      "  --only=LIST        job ids or workloads: W1,W4.T10,W6,MEM,...\n"
      "  --engines=LIST     engine names (default: all built); --list shows them\n"
      "  --reps=N --warmup=N --mem-reps=N   repetitions (default 5, 1, 3)\n"
      "  --threads=P        worker threads per engine (default: the machine's cores)\n"
      "  --budget-s=S       scaling points: skip an engine whose run would take > S s (default 3)\n"
      "  --timeout-s=S      give up on a run after S s (default 120)\n"
      "  --bindir=DIR       where the peers-* executables are (default: beside this one)\n"
      "exit status: 0 when every check passed, 1 when a run failed its check or errored,\n"
      "2 on a bad flag\n",
      argv0);
}

// A bad flag: its message, for Parse to print (exit status 2).
struct BadFlag {
  std::string message;
};

// An int in [min, INT_MAX]; anything else (not a number, out of range, too
// large for an int) is a BadFlag naming the flag.
int IntFlag(const char* flag, const char* v, int min) {
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v, &end, 10);
  if (*v == '\0' || *end != '\0' || errno == ERANGE || n < min ||
      n > std::numeric_limits<int>::max()) {
    throw BadFlag{std::string(flag) + "=" + v + ": expected an integer from " +
                  std::to_string(min) + " to " + std::to_string(std::numeric_limits<int>::max())};
  }
  return static_cast<int>(n);
}

// A finite number > 0 and <= max.
double PositiveFlag(const char* flag, const char* v, double max) {
  char* end = nullptr;
  const double x = std::strtod(v, &end);
  if (*v == '\0' || *end != '\0' || !std::isfinite(x) || !(x > 0) || x > max) {
    char limit[32];
    std::snprintf(limit, sizeof limit, "%g", max);
    throw BadFlag{std::string(flag) + "=" + v + ": expected a number > 0 and at most " + limit};
  }
  return x;
}

// A comma-separated list that names at least one item.
std::vector<std::string> ListFlag(const char* flag, const char* v) {
  std::vector<std::string> items = Split(v);
  if (items.empty()) throw BadFlag{std::string(flag) + ": name at least one"};
  return items;
}

bool ParseFlags(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&](const char* name) -> const char* {
      const std::string prefix = std::string(name) + "=";
      return a.rfind(prefix, 0) == 0 ? argv[i] + prefix.size() : nullptr;
    };
    if (const char* v = value("--out")) {
      o->out = v;
    } else if (const char* v = value("--log")) {
      o->log = v;
    } else if (a == "--quick") {
      o->plan.scale = 0.01;
    } else if (const char* v = value("--scale")) {
      // Every size is llround(size * X): X must keep it finite and exact.
      o->plan.scale = PositiveFlag("--scale", v, 1e9);
    } else if (const char* v = value("--groups")) {
      o->plan.groups = ListFlag("--groups", v);
      for (const std::string& g : o->plan.groups) {
        if (g != "table" && g != "w6" && g != "memory" && g != "scale") {
          throw BadFlag{"--groups: unknown group '" + g + "': expected table, w6, memory or scale"};
        }
      }
    } else if (const char* v = value("--only")) {
      o->plan.only = ListFlag("--only", v);  // checked against the plan in Main
    } else if (const char* v = value("--engines")) {
      o->engines = ListFlag("--engines", v);
      for (const std::string& name : o->engines) {
        const std::vector<Engine> all = AllEngines();
        if (std::none_of(all.begin(), all.end(), [&](const Engine& e) { return e.name == name; })) {
          throw BadFlag{"--engines: unknown engine '" + name + "' (--list shows them)"};
        }
      }
    } else if (const char* v = value("--reps")) {
      o->plan.reps = IntFlag("--reps", v, 1);
    } else if (const char* v = value("--warmup")) {
      o->plan.warmup = IntFlag("--warmup", v, 0);
    } else if (const char* v = value("--mem-reps")) {
      o->plan.mem_reps = IntFlag("--mem-reps", v, 1);
    } else if (const char* v = value("--threads")) {
      o->threads = IntFlag("--threads", v, 1);
      // The peers take 1 to 4096 (peer_server.cc); more would fail every run.
      if (o->threads > 4096) throw BadFlag{std::string("--threads=") + v + ": at most 4096"};
    } else if (const char* v = value("--budget-s")) {
      o->budget_s = PositiveFlag("--budget-s", v, 1e9);
    } else if (const char* v = value("--timeout-s")) {
      o->timeout_s = PositiveFlag("--timeout-s", v, 1e9);
    } else if (const char* v = value("--bindir")) {
      o->bindir = v;
    } else if (a == "--list") {
      o->list = true;
    } else {
      Usage(argv[0]);
      return false;
    }
  }
  return true;
}

// Parses the flags into *o; on a bad one prints why and returns false.
bool Parse(int argc, char** argv, Options* o) {
  try {
    return ParseFlags(argc, argv, o);
  } catch (const BadFlag& bad) {
    std::fprintf(stderr, "depengine-peers: %s\n", bad.message.c_str());
    return false;
  }
}

// Whether a run's status is a failure: a failed check, a run that timed
// out, died or answered nonsense, or a runtime that could not start
// (peer_server.cc answers "unsupported" with "setup failed: ..."). Skipped
// runs, and workloads a runtime has no implementation of, are not.
bool Failed(const EngineRun& run) {
  return run.status.rfind("check failed", 0) == 0 || run.status.rfind("error", 0) == 0 ||
         run.status.rfind("unsupported: setup failed", 0) == 0;
}

std::string SelfDir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string path(buf, static_cast<std::size_t>(n));
  return path.substr(0, path.rfind('/'));
}

std::string ReadFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

std::string LoadAverage() {
  std::istringstream in(ReadFirstLine("/proc/loadavg"));
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " / " + five + " / " + fifteen;
}

double ToDouble(const Fields& f, const std::string& key) {
  const auto it = f.find(key);
  return it == f.end() ? std::numeric_limits<double>::quiet_NaN() : std::strtod(it->second.c_str(), nullptr);
}

// Records one repetition's answer (or, for a warm-up, only its failure).
void Record(const JobSpec& spec, EngineRun& run, const Fields& f, bool warmup) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const bool ok = f.count("ok") && f.at("ok") == "1" && !std::isnan(ToDouble(f, spec.figure));
  if (!ok && run.status == "ok") {
    const auto err = f.find("error");
    run.status = "check failed: " + (err != f.end() ? err->second : "no " + spec.figure + " in the answer");
  }
  if (warmup) return;
  run.values.push_back(ok ? ToDouble(f, spec.figure) : nan);
  run.seconds.push_back(ok ? ToDouble(f, "seconds") : nan);
  run.peak_rss.push_back(ok ? ToDouble(f, "peak_rss") : nan);
  for (const char* key : {"critical_path", "best_efficiency", "gflops_one_core", "residual", "bitwise", "rss_growth", "ns_per_op"}) {
    if (f.count(key)) run.extra[key].push_back(ok ? ToDouble(f, key) : nan);
  }
}

class Driver {
 public:
  Driver(const Options& o, std::vector<Engine> engines, int log_fd)
      : o_(o), engines_(std::move(engines)), log_fd_(log_fd) {}

  // Runs `spec` and returns its rows: its own, then its extra_rows.
  std::vector<JobRun> RunJob(const JobSpec& spec, Report& report) {
    const auto start = std::chrono::steady_clock::now();
    std::fprintf(stderr, "%-22s %-34s", spec.id.c_str(), spec.params.c_str());
    std::vector<EngineRun> runs;  // one per participant
    for (const Participant& p : spec.participants) {
      EngineRun run;
      run.engine = p.engine;
      // The reference engine always runs: its curve is the point.
      if (spec.group == "scale" && p.engine != kReferenceEngine) {
        const double est = EstimateSeconds(p, spec);
        if (est > o_.budget_s) {
          run.status = "skipped: about " + Fmt(est) + " s per run, over --budget-s=" + Fmt(o_.budget_s);
        }
      }
      runs.push_back(run);
    }

    if (spec.fresh_process_per_rep) {
      for (int rep = 0; rep < spec.reps; ++rep) {
        for (std::size_t i = 0; i < spec.participants.size(); ++i) {
          if (runs[i].status != "ok") continue;
          auto proc = Start(spec.participants[i], runs[i], report);
          if (proc) RunOnce(spec, *proc, runs[i], false);
        }
      }
    } else {
      std::vector<std::unique_ptr<PeerProcess>> procs(spec.participants.size());
      for (std::size_t i = 0; i < procs.size(); ++i) {
        if (runs[i].status != "ok") continue;
        procs[i] = Start(spec.participants[i], runs[i], report);
        if (procs[i]) procs[i]->Pause();
      }
      for (int round = 0; round < spec.warmup + spec.reps; ++round) {
        for (std::size_t i = 0; i < procs.size(); ++i) {
          if (!procs[i] || runs[i].status != "ok") continue;
          RunOnce(spec, *procs[i], runs[i], round < spec.warmup);
          procs[i]->Pause();
        }
      }
      procs.clear();
    }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    // Split into rows. An engine with no participant in an extra row reports
    // its run of the job's own program there.
    std::vector<JobRun> rows(1 + spec.extra_rows.size());
    rows[0].spec = spec;
    for (std::size_t r = 0; r < spec.extra_rows.size(); ++r) rows[r + 1].spec = spec.extra_rows[r];
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const std::string& row = spec.participants[i].row;
      for (JobRun& jr : rows) {
        if ((row.empty() && &jr == &rows[0]) || (!row.empty() && jr.spec.id == row)) jr.runs.push_back(runs[i]);
      }
      if (runs[i].status == "ok" && row.empty() && runs[i].extra.count("ns_per_op")) {
        last_ns_[runs[i].engine][spec.participants[i].workload] = Median(runs[i].extra.at("ns_per_op"));
      }
    }
    for (std::size_t r = 1; r < rows.size(); ++r) {
      for (const EngineRun& own : rows[0].runs) {
        if (rows[r].Find(own.engine) == nullptr) rows[r].runs.push_back(own);
      }
    }
    for (JobRun& jr : rows) {
      Summarize(jr);
      jr.wall_s = wall;
      const EngineRun* ref = jr.Find(kReferenceEngine);
      const EngineRun* best = jr.BestPeer(engines_);
      if (&jr != &rows[0]) std::fprintf(stderr, "%-22s %-34s", jr.spec.id.c_str(), jr.spec.params.c_str());
      std::fprintf(stderr, " %6.1f s  depengine %s  best peer %s %s  ratio %s\n", wall,
                   ref && ref->status == "ok" ? Fmt(ref->median).c_str() : "-", best ? best->engine.c_str() : "-",
                   best ? Fmt(best->median).c_str() : "-", best && best->has_ratio ? Fmt(best->ratio).c_str() : "-");
    }
    return rows;
  }

 private:
  static std::string Fmt(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, v < 10 ? "%.3g" : "%.0f", v);
    return buf;
  }

  const Engine* FindEngine(const std::string& name) const {
    for (const Engine& e : engines_) {
      if (e.name == name) return &e;
    }
    return nullptr;
  }

  // Seconds one run of `p` would take, from the engine's last ns/op on the
  // same workload; 0 when unknown.
  double EstimateSeconds(const Participant& p, const JobSpec& spec) const {
    const auto e = last_ns_.find(p.engine);
    if (e == last_ns_.end()) return 0;
    const auto w = e->second.find(p.workload);
    if (w == e->second.end()) return 0;
    return w->second * spec.ops * 1e-9;
  }

  std::unique_ptr<PeerProcess> Start(const Participant& p, EngineRun& run, Report& report) {
    const Engine* e = FindEngine(p.engine);
    std::vector<std::string> argv = {o_.bindir + "/" + e->exe, "--serve", "--threads=" + std::to_string(o_.threads)};
    argv.insert(argv.end(), e->args.begin(), e->args.end());
    argv.push_back(p.workload);
    argv.insert(argv.end(), p.params.begin(), p.params.end());
    std::string cmd;
    for (const std::string& a : argv) cmd += a + " ";
    const std::string banner = "\n=== " + cmd + "\n";
    if (write(log_fd_, banner.data(), banner.size()) < 0) {
      // The log is best effort.
    }
    std::string error;
    auto proc = PeerProcess::Start(argv, log_fd_, o_.timeout_s, &error);
    if (!proc) {
      run.status = "error: " + error;
      return nullptr;
    }
    if (!proc->ready()) {
      run.status = "unsupported: " + proc->reason();
      return nullptr;
    }
    if (!report.engine_info.count(p.engine)) report.engine_info[p.engine] = proc->info();
    return proc;
  }

  void RunOnce(const JobSpec& spec, PeerProcess& proc, EngineRun& run, bool warmup) {
    Fields f;
    std::string error;
    if (!proc.Run(o_.timeout_s, &f, &error)) {
      run.status = "error: " + error;
      return;
    }
    Record(spec, run, f, warmup);
  }

  const Options& o_;
  std::vector<Engine> engines_;
  int log_fd_;
  std::map<std::string, std::map<std::string, double>> last_ns_;  // engine -> workload -> ns/op
};

int Main(int argc, char** argv) {
  Options o;
  if (!Parse(argc, argv, &o)) return 2;
  // A peer may exit while the driver writes to it ("quit" to one that
  // answered "unsupported" and left, "run" to one that died while stopped):
  // the write must fail with EPIPE, not kill the driver and the whole run
  // with SIGPIPE. The peers get the default back (child.cc).
  std::signal(SIGPIPE, SIG_IGN);
  if (o.bindir.empty()) o.bindir = SelfDir();
  if (o.threads <= 0) o.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  // OpenMP ignores a task's priority clause above this limit, which is 0
  // unless set; W6 gives every runtime the same priorities
  // (TileTask::Priority), so the OpenMP peers inherit a limit that covers them.
  setenv("OMP_MAX_TASK_PRIORITY", "1000000", /*overwrite=*/0);

  std::vector<Engine> engines;
  for (const Engine& e : AllEngines()) {
    const bool built = access((o.bindir + "/" + e.exe).c_str(), X_OK) == 0;
    const bool chosen = o.engines.empty() ||
                        std::find(o.engines.begin(), o.engines.end(), e.name) != o.engines.end();
    if (o.list)
      std::printf("%-22s %-32s %s\n", e.name.c_str(), e.label.c_str(),
                  built ? "built" : "not built");
    if (chosen && !built && !o.engines.empty()) {
      std::fprintf(stderr, "depengine-peers: %s is not built (no %s/%s): left out\n",
                   e.name.c_str(), o.bindir.c_str(), e.exe.c_str());
    }
    if (built && chosen) engines.push_back(e);
  }
  if (o.list) return 0;
  if (engines.empty()) {
    std::fprintf(stderr, "depengine-peers: none of the engines asked for is built in %s\n",
                 o.bindir.c_str());
    return 1;
  }
  // Every --only entry must select something: a typo would otherwise run
  // nothing, or less than asked, and still exit 0.
  for (const std::string& id : o.plan.only) {
    PlanOptions one = o.plan;
    one.only = {id};
    if (MakePlan(one, engines).empty()) {
      std::fprintf(stderr,
                   "depengine-peers: --only: '%s' selects no job of --groups on these engines "
                   "(job ids and workloads: W1 W2 W3 W4 W4.T0 W4.T1 W4.T10 W5 W5.1 W5.4096 W6 "
                   "W6.b128 W6.b256 MEM, and the scale.* ids in peers.json)\n",
                   id.c_str());
      return 2;
    }
  }

  const std::vector<JobSpec> plan = MakePlan(o.plan, engines);
  if (plan.empty()) {
    std::fprintf(stderr,
                 "depengine-peers: nothing to run: no job of --groups has a participant among the "
                 "engines\n");
    return 2;
  }

  // --out may name a directory several levels down; one that cannot be made
  // would leave the results nowhere (they used to be lost, and "wrote"
  // printed all the same).
  std::error_code dir_error;
  std::filesystem::create_directories(o.out, dir_error);
  if (dir_error) {
    std::fprintf(stderr, "depengine-peers: cannot create --out=%s: %s\n", o.out.c_str(),
                 dir_error.message().c_str());
    return 1;
  }
  const std::string log_path = o.log.empty() ? o.out + "/peers.log" : o.log;
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    std::fprintf(
        stderr, "depengine-peers: cannot write the log %s (%s): the peers' output goes to stderr\n",
        log_path.c_str(), std::strerror(errno));
  }

  Report report;
  report.engines = engines;
  char date[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  report.meta = {{"date", date},
                 {"host", host},
                 {"cpu", CpuModel()},
                 {"cores", std::to_string(std::thread::hardware_concurrency())},
                 {"threads", std::to_string(o.threads)},
                 {"reps", std::to_string(o.plan.reps)},
                 {"warmup", std::to_string(o.plan.warmup)},
                 {"mem_reps", std::to_string(o.plan.mem_reps)},
                 {"scale", std::to_string(o.plan.scale)},
                 {"loadavg_start", LoadAverage()}};

  std::fprintf(stderr, "depengine-peers: %zu jobs on %zu engines, %d threads each; log in %s\n",
               plan.size(), engines.size(), o.threads, log_path.c_str());
  const auto start = std::chrono::steady_clock::now();
  Driver driver(o, engines, log_fd);
  bool written = false;  // whether the last write of peers.json and peers.md succeeded
  for (const JobSpec& spec : plan) {
    for (JobRun& row : driver.RunJob(spec, report)) report.jobs.push_back(std::move(row));
    // Written after every job, so that an interrupted run keeps what it has.
    report.meta["loadavg_end"] = LoadAverage();
    char wall[32];
    std::snprintf(wall, sizeof wall, "%.0f",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    report.meta["wall_s"] = wall;
    std::ofstream md(o.out + "/peers.md");
    md << Markdown(report);
    md.flush();
    written = WriteJson(report, o.out + "/peers.json") && static_cast<bool>(md);
  }
  std::printf("%s", Markdown(report).c_str());
  if (log_fd >= 0) close(log_fd);
  if (!written) {
    std::fprintf(stderr, "depengine-peers: FAILED: cannot write %s/peers.json or %s/peers.md\n",
                 o.out.c_str(), o.out.c_str());
    return 1;
  }
  std::fprintf(stderr, "wrote %s/peers.json and %s/peers.md\n", o.out.c_str(), o.out.c_str());
  // A failed check (or a run that errored) has no figure in the tables;
  // the exit status says so too.
  int failures = 0;
  for (const JobRun& job : report.jobs) {
    for (const EngineRun& run : job.runs) failures += Failed(run) ? 1 : 0;
  }
  if (failures > 0) {
    std::fprintf(stderr,
                 "depengine-peers: FAILED: %d run(s) failed their check or errored; see \"No "
                 "figure\" in %s/peers.md\n",
                 failures, o.out.c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace depengine::bench::peers

int main(int argc, char** argv) { return depengine::bench::peers::Main(argc, argv); }
