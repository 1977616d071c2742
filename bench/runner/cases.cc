#include "runner/cases.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>

namespace depengine::bench {
namespace {

std::size_t Scaled(std::size_t n, double scale) {
  return std::max<std::size_t>(1, static_cast<std::size_t>(std::llround(static_cast<double>(n) * scale)));
}

BenchCase SimpleCase(std::string id, std::string title, std::size_t ops,
                     std::function<WorkloadResult(Engine&)> run) {
  BenchCase c;
  c.workload = id.substr(0, 2);
  c.id = std::move(id);
  c.title = std::move(title);
  c.ops = ops;
  c.run = std::move(run);
  return c;
}

BenchCase RandomDagCase(const RandomDagParams& params) {
  // Drawn once and shared by every run of the case: drawing 200k ops and
  // the serial run are not part of any measurement.
  auto dag = std::make_shared<const RandomDag>(MakeRandomDag(params));
  auto expected = std::make_shared<const std::vector<std::uint64_t>>(SerialRandomDag(*dag));
  BenchCase c;
  c.id = "W4.T" + std::to_string(params.spin_us);
  c.workload = "W4";
  c.title = "W4 random DAG, T=" + std::to_string(params.spin_us) + " us";
  c.ops = params.ops;
  c.spin_us = params.spin_us;
  c.critical_path = DagCriticalPath(*dag);
  const int spin_us = params.spin_us;
  c.run = [dag, expected, spin_us, cp = c.critical_path](Engine& e) {
    WorkloadResult r = RunRandomDag(e, *dag, spin_us, *expected);
    r.critical_path = cp;
    return r;
  };
  if (spin_us > 0) {
    c.bodies_only = [dag, spin_us](int threads) {
      return RunRandomDagBodiesOnly(*dag, spin_us, threads);
    };
    c.pushed_ahead = [dag, expected, spin_us, cp = c.critical_path](Engine& e) {
      WorkloadResult r = RunRandomDagPushedAhead(e, *dag, spin_us, *expected);
      r.critical_path = cp;
      return r;
    };
  }
  return c;
}

}  // namespace

std::vector<BenchCase> MakeBenchCases(double n_scale, const CaseFilter& wanted) {
  std::vector<BenchCase> cases;

  ChainParams chain;
  chain.ops = Scaled(chain.ops, n_scale);
  if (wanted("W1", "W1")) {
    cases.push_back(SimpleCase("W1", "W1 chain", chain.ops,
                               [chain](Engine& e) { return RunChain(e, chain); }));
  }

  ParallelParams parallel;
  parallel.ops = std::max<std::size_t>(1, Scaled(parallel.ops, n_scale) / parallel.vars) * parallel.vars;
  if (wanted("W2", "W2")) {
    cases.push_back(SimpleCase("W2", "W2 parallel", parallel.ops,
                               [parallel](Engine& e) { return RunParallel(e, parallel); }));
  }

  FanParams fan;
  fan.rounds = Scaled(fan.rounds, n_scale);
  if (wanted("W3", "W3")) {
    cases.push_back(
        SimpleCase("W3", "W3 fan", fan.ops(), [fan](Engine& e) { return RunFan(e, fan); }));
  }

  for (int spin_us : {0, 1, 10}) {
    RandomDagParams dag;
    dag.ops = Scaled(dag.ops, n_scale);
    dag.spin_us = spin_us;
    if (wanted("W4.T" + std::to_string(spin_us), "W4")) cases.push_back(RandomDagCase(dag));
  }

  for (std::size_t operators : {std::size_t{1}, std::size_t{4096}}) {
    OperatorReuseParams reuse;
    reuse.operators = operators;
    reuse.pushes = Scaled(reuse.pushes, n_scale);
    const std::string id = "W5.x" + std::to_string(operators);
    if (!wanted(id, "W5")) continue;
    cases.push_back(SimpleCase(id,
                               "W5 operator reuse, " + std::to_string(operators) + " operator" +
                                   (operators > 1 ? "s" : ""),
                               reuse.pushes, [reuse](Engine& e) { return RunOperatorReuse(e, reuse); }));
  }
  // Backpressure: the pusher of W1 and W2 runs far ahead of the workers
  // unless max_in_flight stops it.
  auto add_bounded = [&](BenchCase c) {
    c.workload = "BP";
    c.max_in_flight = kBoundedInFlight;
    cases.push_back(std::move(c));
  };
  if (wanted("BP.W1", "BP")) {
    add_bounded(SimpleCase("BP.W1", "W1 chain, max_in_flight 1,024", chain.ops,
                           [chain](Engine& e) { return RunChain(e, chain); }));
  }
  if (wanted("BP.W2", "BP")) {
    add_bounded(SimpleCase("BP.W2", "W2 parallel, max_in_flight 1,024", parallel.ops,
                           [parallel](Engine& e) { return RunParallel(e, parallel); }));
  }
  return cases;
}

const std::vector<std::string>& BenchCaseNames() {
  static const std::vector<std::string> names = {
      "W1", "W2",    "W3",       "W4", "W4.T0", "W4.T1", "W4.T10",
      "W5", "W5.x1", "W5.x4096", "BP", "BP.W1", "BP.W2", kPendingMemoryId};
  return names;
}

PendingMemoryParams PendingMemorySize(double n_scale) {
  PendingMemoryParams p;
  p.ops = Scaled(p.ops, n_scale);
  return p;
}

}  // namespace depengine::bench
