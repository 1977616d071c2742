#include "workloads/workload_spec.h"

#include <algorithm>
#include <random>

namespace depengine::bench {

FanValues SerialFan(const FanParams& params) {
  FanValues v;
  v.ys.assign(params.fan, 0);
  for (std::size_t r = 0; r < params.rounds; ++r) {
    FanBump(v.x);
    for (std::size_t j = 0; j < params.fan; ++j) FanSpread(v.x, j, v.ys[j]);
    v.x = FanGather(v.ys.data(), params.fan);
  }
  return v;
}

RandomDag MakeRandomDag(const RandomDagParams& params) {
  RandomDag dag;
  dag.vars = params.vars;
  dag.ops.reserve(params.ops);
  std::mt19937_64 rng(params.seed);
  std::uniform_int_distribution<std::uint32_t> pick(0, static_cast<std::uint32_t>(params.vars - 1));
  for (std::size_t i = 0; i < params.ops; ++i) {
    DagOp op;
    op.read1 = pick(rng);
    do op.read2 = pick(rng);
    while (op.read2 == op.read1);
    do op.write = pick(rng);
    while (op.write == op.read1 || op.write == op.read2);
    dag.ops.push_back(op);
  }
  return dag;
}

std::vector<std::uint64_t> SerialRandomDag(const RandomDag& dag) {
  std::vector<std::uint64_t> values(dag.vars);
  for (std::size_t v = 0; v < dag.vars; ++v) values[v] = DagInitialValue(v);
  for (const DagOp& op : dag.ops) {
    values[op.write] = DagMix(values[op.write], values[op.read1], values[op.read2]);
  }
  return values;
}

std::size_t DagCriticalPath(const RandomDag& dag) {
  // Per var: the depth of its last writer, and the deepest reader since.
  std::vector<std::size_t> last_write(dag.vars, 0);
  std::vector<std::size_t> deepest_read(dag.vars, 0);
  std::size_t longest = 0;
  for (const DagOp& op : dag.ops) {
    const std::size_t depth =
        1 + std::max({last_write[op.read1], last_write[op.read2], last_write[op.write],
                      deepest_read[op.write]});
    deepest_read[op.read1] = std::max(deepest_read[op.read1], depth);
    deepest_read[op.read2] = std::max(deepest_read[op.read2], depth);
    last_write[op.write] = depth;
    deepest_read[op.write] = 0;  // later writers already wait for this one
    longest = std::max(longest, depth);
  }
  return longest;
}

}  // namespace depengine::bench
