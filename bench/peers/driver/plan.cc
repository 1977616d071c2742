#include "driver/plan.h"

#include <algorithm>
#include <cmath>

namespace depengine::bench::peers {
namespace {

// 1000000 -> "1,000,000".
std::string Grouped(long long v) {
  const std::string digits = std::to_string(v);
  std::string s;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) s += ',';
    s += digits[i];
  }
  return s;
}

std::string P(const char* name, long long v) { return std::string(name) + "=" + std::to_string(v); }

long long Scaled(double v, double scale, long long minimum = 1) {
  return std::max(minimum, static_cast<long long>(std::llround(v * scale)));
}

bool Wanted(const PlanOptions& o, const JobSpec& job, const std::string& workload) {
  if (std::find(o.groups.begin(), o.groups.end(), job.group) == o.groups.end()) return false;
  if (o.only.empty()) return true;
  const auto named = [&](const std::string& s) { return std::find(o.only.begin(), o.only.end(), s) != o.only.end(); };
  // W5's rows ride on the W1 and W2 jobs.
  const bool w5 = (workload == "W1" || workload == "W2") && job.group == "table" &&
                  (named("W5") || named(workload == "W1" ? "W5.1" : "W5.4096"));
  return named(job.id) || named(workload) || w5;
}

// W5 (prebuilt operators, `operators` of them, `pushes` pushes) as an extra
// row of the job `host` just added (W1 for one operator, W2 for 4,096):
// depengine's engines run W5 in the same interleaving, the peers' figure is
// their run of the host's program, which is W5's program for them.
void AddOperatorRow(const PlanOptions& o, std::vector<JobSpec>& jobs, const std::string& host, long long operators,
                    long long pushes) {
  if (jobs.empty() || jobs.back().id != host) return;
  JobSpec& job = jobs.back();
  JobSpec row;
  row.id = "W5." + std::to_string(operators);
  row.group = job.group;
  row.title = operators == 1 ? "W5 one prebuilt operator" : "W5 " + Grouped(operators) + " prebuilt operators";
  row.params = "N = " + Grouped(pushes) + " pushes";
  row.figure = "ns_per_op";
  row.ops = static_cast<double>(pushes);
  row.reps = job.reps;
  row.warmup = job.warmup;
  row.target = job.target;
  if (!o.only.empty() && std::find(o.only.begin(), o.only.end(), "W5") == o.only.end() &&
      std::find(o.only.begin(), o.only.end(), row.id) == o.only.end()) {
    return;
  }
  std::vector<Participant> depengine_runs;
  for (const Participant& p : job.participants) {
    if (p.engine.rfind("depengine-", 0) == 0) {
      depengine_runs.push_back({p.engine, "W5", {P("operators", operators), P("pushes", pushes)}, row.id});
    }
  }
  job.participants.insert(job.participants.end(), depengine_runs.begin(), depengine_runs.end());
  job.extra_rows.push_back(row);
}

}  // namespace

std::vector<Engine> AllEngines() {
  return {
      {"depengine-perdevice", "depengine per-device", "peers-depengine", {"--kind=perdevice"}, true, false},
      {"depengine-pooled", "depengine pooled", "peers-depengine", {"--kind=pooled"}, true, false},
      {"depengine-naive", "depengine naive", "peers-depengine", {"--kind=naive"}, true, false},
      {"omp-gcc", "OpenMP libgomp (GCC)", "peers-omp-gcc", {}, false, false},
      {"omp-clang", "OpenMP libomp (Clang)", "peers-omp-clang", {}, false, false},
      {"starpu", "StarPU", "peers-starpu", {}, false, false},
      {"tbb", "oneTBB", "peers-tbb", {}, false, false},
      {"lapacke-dpotrf", "LAPACKE_dpotrf, all cores", "peers-blas", {}, false, true},
      {"dgemm-peak", "cores x 1-core DGEMM", "peers-blas", {}, false, true},
  };
}

std::vector<JobSpec> MakePlan(const PlanOptions& o, const std::vector<Engine>& engines) {
  std::vector<JobSpec> jobs;
  const double s = o.scale;

  // Adds a job run by `who` (engine names; those not built are dropped).
  auto add = [&](JobSpec job, const std::string& workload, const std::vector<std::string>& params,
                 const std::vector<std::string>& who) {
    if (!Wanted(o, job, workload)) return;
    for (const Engine& e : engines) {
      if (e.limit || std::find(who.begin(), who.end(), e.name) == who.end()) continue;
      job.participants.push_back({e.name, workload, params, ""});
    }
    if (job.participants.empty()) return;
    if (job.reps == 5) job.reps = o.reps;
    if (!job.fresh_process_per_rep) job.warmup = o.warmup;
    jobs.push_back(std::move(job));
  };

  std::vector<std::string> all;
  // Where work, not overhead, is measured (W4 with T > 0, W6), the naive
  // engine's figure is that of one thread: it is left out to save time.
  std::vector<std::string> threaded;
  std::vector<std::string> w6;  // W6 compares depengine (per-device) with the peers
  std::vector<std::string> scaling;  // the reference engine and the peers
  for (const Engine& e : engines) {
    if (e.limit) continue;
    all.push_back(e.name);
    if (e.name != "depengine-naive") threaded.push_back(e.name);
    if (!e.depengine || e.name == kReferenceEngine) w6.push_back(e.name);
    if (!e.depengine || e.name == kReferenceEngine) scaling.push_back(e.name);
  }

  const char* kTwice = "<= 0.5 (2x faster than the best peer)";
  // ---------------------------------------------------------------- table
  {
    const long long n = Scaled(1e6, s);
    JobSpec j;
    j.id = "W1";
    j.group = "table";
    j.title = "W1 chain";
    j.params = "N = " + Grouped(n);
    j.figure = "ns_per_op";
    j.series = "W1";
    j.x = static_cast<double>(n);
    j.ops = static_cast<double>(n);
    j.target = kTwice;
    add(j, "W1", {P("ops", n)}, all);
    AddOperatorRow(o, jobs, "W1", 1, n);
  }
  {
    const long long k = 4096;
    const long long n = std::max<long long>(1, Scaled(256, s)) * k;
    JobSpec j;
    j.id = "W2";
    j.group = "table";
    j.title = "W2 parallel";
    j.params = "K = 4,096, N = " + Grouped(n);
    j.figure = "ns_per_op";
    j.ops = static_cast<double>(n);
    j.target = kTwice;
    add(j, "W2", {P("vars", k), P("ops", n)}, all);
    AddOperatorRow(o, jobs, "W2", k, Scaled(1e6, s));
  }
  {
    const long long r = Scaled(10000, s);
    JobSpec j;
    j.id = "W3";
    j.group = "table";
    j.title = "W3 fan";
    j.params = "R = " + Grouped(r) + ", F = 64";
    j.figure = "ns_per_op";
    j.ops = static_cast<double>(r * 66);
    j.target = kTwice;
    add(j, "W3", {P("rounds", r), P("fan", 64)}, all);
  }
  for (int t : {0, 1, 10}) {
    const long long n = Scaled(200000, s);
    JobSpec j;
    j.id = "W4.T" + std::to_string(t);
    j.group = "table";
    j.title = "W4 random DAG, T = " + std::to_string(t) + (t == 0 ? "" : " us");
    j.params = "V = 1,000, N = " + Grouped(n);
    j.figure = t == 0 ? "ns_per_op" : "efficiency";
    j.higher_is_better = t != 0;
    j.ops = static_cast<double>(n);
    j.target = t == 0 ? "" : ">= 1 (the best peer's efficiency)";
    add(j, "W4", {P("vars", 1000), P("ops", n), P("T", t)}, t == 0 ? all : threaded);
  }
  // ---------------------------------------------------------------- W6
  for (long long b : {128LL, 256LL}) {
    // n = 4,096; smaller (still a multiple of b) when scaled down.
    const long long n = std::max(2 * b, Scaled(4096 * std::sqrt(s), 1.0) / b * b);
    JobSpec j;
    j.id = "W6.b" + std::to_string(b);
    j.group = "w6";
    j.title = "W6 tiled Cholesky, b = " + std::to_string(b);
    j.params = "n = " + Grouped(n);
    j.figure = "gflops";
    j.higher_is_better = true;
    j.target = ">= 1 (the best peer), and >= 0.9 x LAPACKE_dpotrf";
    const std::vector<std::string> params = {P("n", n), P("b", b)};
    if (!Wanted(o, j, "W6")) continue;
    for (const std::string& e : w6) j.participants.push_back({e, "W6", params, ""});
    for (const Engine& e : engines) {
      if (e.name == "lapacke-dpotrf") j.participants.push_back({e.name, "LIM_POTRF", params, ""});
      if (e.name == "dgemm-peak") j.participants.push_back({e.name, "LIM_DGEMM", {P("b", b)}, ""});
    }
    j.reps = o.reps;
    j.warmup = o.warmup;
    if (!j.participants.empty()) jobs.push_back(std::move(j));
  }

  // ---------------------------------------------------------------- memory
  {
    const long long n = Scaled(1e6, s);
    JobSpec j;
    j.id = "MEM";
    j.group = "memory";
    j.title = "memory per pending op";
    j.params = Grouped(n) + " ops behind one held var";
    j.figure = "bytes_per_op";
    j.ops = static_cast<double>(n);
    j.warmup = 0;
    j.reps = o.mem_reps;
    j.fresh_process_per_rep = true;
    j.target = "<= 128 bytes (issue 2)";
    add(j, "MEM", {P("ops", n)}, all);
  }

  // ---------------------------------------------------------------- scaling
  for (double n : {1e3, 1e4, 1e5, 1e7}) {
    const long long ops = Scaled(n, s);
    JobSpec j;
    j.id = "scale.W1.N" + std::to_string(ops);
    j.group = "scale";
    j.title = "W1 chain";
    j.params = "N = " + Grouped(ops);
    j.figure = "ns_per_op";
    j.series = "W1";
    j.x = static_cast<double>(ops);
    j.ops = static_cast<double>(ops);
    add(j, "W1", {P("ops", ops)}, scaling);
  }
  {
    // depengine at every power of 10, the peers at every other one (time).
    const long long ops = Scaled(1e6, s);
    std::vector<std::string> reference_only = {kReferenceEngine};
    for (long long k = 1, i = 0; k <= ops; k *= 10, ++i) {
      if (ops % k != 0) continue;
      JobSpec j;
      j.id = "scale.W2.K" + std::to_string(k);
      j.group = "scale";
      j.title = "W2 parallel";
      j.params = "K = " + Grouped(k) + ", N = " + Grouped(ops);
      j.figure = "ns_per_op";
      j.series = "W2";
      j.x = static_cast<double>(k);
      j.ops = static_cast<double>(ops);
      add(j, "W2", {P("vars", k), P("ops", ops)}, i % 2 == 0 || k == ops ? scaling : reference_only);
    }
  }
  return jobs;
}

}  // namespace depengine::bench::peers
