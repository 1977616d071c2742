#include "peer_workloads.h"

#include <algorithm>

namespace depengine::bench::peers {
namespace {

std::size_t Size(const Job& job, const char* name, std::size_t fallback) {
  const long long v = job.Get(name, static_cast<long long>(fallback));
  return v < 0 ? 0 : static_cast<std::size_t>(v);
}

}  // namespace

ChainParams ChainFromJob(const Job& job) {
  ChainParams p;
  p.ops = Size(job, "ops", p.ops);
  return p;
}

ParallelParams ParallelFromJob(const Job& job) {
  ParallelParams p;
  p.vars = Size(job, "vars", p.vars);
  p.ops = Size(job, "ops", p.ops);
  return p;
}

FanParams FanFromJob(const Job& job) {
  FanParams p;
  p.rounds = Size(job, "rounds", p.rounds);
  p.fan = Size(job, "fan", p.fan);
  return p;
}

RandomDagParams DagFromJob(const Job& job) {
  RandomDagParams p;
  p.vars = Size(job, "vars", p.vars);
  p.ops = Size(job, "ops", p.ops);
  p.spin_us = static_cast<int>(job.Get("T", p.spin_us));
  p.seed = static_cast<std::uint64_t>(job.Get("seed", static_cast<long long>(p.seed)));
  return p;
}

OperatorReuseParams ReuseFromJob(const Job& job) {
  OperatorReuseParams p;
  p.operators = Size(job, "operators", p.operators);
  p.pushes = Size(job, "pushes", p.pushes);
  return p;
}

PendingMemoryParams PendingFromJob(const Job& job) {
  PendingMemoryParams p;
  p.ops = Size(job, "ops", p.ops);
  return p;
}

bool ValidJob(const Job& job, std::string* why) {
  const std::string& w = job.workload;
  if (w == "W2") {
    const ParallelParams p = ParallelFromJob(job);
    if (p.vars == 0 || p.ops % p.vars != 0) {
      *why = "W2: ops must be a multiple of vars";
      return false;
    }
  } else if (w == "W3") {
    if (FanFromJob(job).fan == 0) {
      *why = "W3: fan must be positive";
      return false;
    }
  } else if (w == "W4") {
    if (DagFromJob(job).vars < 3) {
      *why = "W4: needs at least 3 vars";
      return false;
    }
  } else if (w == "W5") {
    if (ReuseFromJob(job).operators == 0) {
      *why = "W5: needs at least one operator";
      return false;
    }
  }
  return true;
}

PreparedDag::PreparedDag(const RandomDagParams& p)
    : params(p), dag(MakeRandomDag(p)), expected(SerialRandomDag(dag)), critical_path(DagCriticalPath(dag)) {}

void AddDagFigures(RunResult& r, const PreparedDag& d, int threads) {
  const double ops = static_cast<double>(d.dag.ops.size());
  if (d.params.spin_us > 0 && r.seconds > 0) {
    r.Add("efficiency", ops * d.params.spin_us * 1e-6 / threads / r.seconds);
  }
  r.Add("critical_path", static_cast<double>(d.critical_path));
  if (d.critical_path > 0) {
    r.Add("best_efficiency", std::min(1.0, ops / (threads * static_cast<double>(d.critical_path))));
  }
}

std::string CheckCounter(const char* workload, std::uint64_t counter, std::uint64_t expected) {
  if (counter == expected) return "";
  return std::string(workload) + ": counter = " + std::to_string(counter) + ", expected " +
         std::to_string(expected);
}

std::string CheckRoundRobin(const char* workload, const CounterArray& count, std::size_t ops) {
  const std::size_t k = count.size();
  for (std::size_t v = 0; v < k; ++v) {
    const std::uint64_t expected = ops / k + (v < ops % k ? 1 : 0);
    if (count[v] != expected) {
      return std::string(workload) + ": count[" + std::to_string(v) + "] = " + std::to_string(count[v]) +
             ", expected " + std::to_string(expected);
    }
  }
  return "";
}

std::string CheckFan(std::uint64_t x, const std::vector<std::uint64_t>& ys, const FanValues& expected) {
  if (x != expected.x) return "W3: X = " + std::to_string(x) + ", expected " + std::to_string(expected.x);
  for (std::size_t j = 0; j < ys.size(); ++j) {
    if (ys[j] != expected.ys[j]) {
      return "W3: Y[" + std::to_string(j) + "] = " + std::to_string(ys[j]) + ", expected " +
             std::to_string(expected.ys[j]);
    }
  }
  return "";
}

std::string CheckDag(const std::vector<std::uint64_t>& values, const std::vector<std::uint64_t>& expected) {
  for (std::size_t v = 0; v < values.size(); ++v) {
    if (values[v] != expected[v]) {
      return "W4: var " + std::to_string(v) + " = " + std::to_string(values[v]) + ", expected " +
             std::to_string(expected[v]);
    }
  }
  return "";
}

RunResult Finish(const std::string& error, double seconds, double ops) {
  if (!error.empty()) return RunResult::Failed(error);
  RunResult r;
  r.ok = true;
  r.seconds = seconds;
  r.ops = ops;
  return r;
}

RunResult FinishPending(const std::string& error, std::size_t rss_before, std::size_t rss_after,
                        std::size_t ops) {
  if (!error.empty()) return RunResult::Failed(error);
  RunResult r;
  r.ok = true;
  r.ops = static_cast<double>(ops);
  const double growth = static_cast<double>(rss_after) - static_cast<double>(rss_before);
  r.Add("rss_growth", growth);
  r.Add("bytes_per_op", ops == 0 ? 0 : growth / static_cast<double>(ops));
  return r;
}

}  // namespace depengine::bench::peers
