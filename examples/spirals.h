// Trains a multilayer perceptron on two interleaved spirals with minibatch
// SGD, every operation scheduled by a depengine engine. Shared by the
// example (mlp_spirals.cc) and its test (tests/operators/mlp_test.cc).
//
// The training loop never waits inside an epoch: it pushes the batch copy,
// the forward and backward passes and the weight updates, and the engine
// orders them by the arrays they read and write. So a threaded engine can
// run the update of a layer's weights while the next batch's forward pass
// is already in the layers below, and the copy of the next batch while the
// current one is still in the upper layers.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "depengine/engine.h"
#include "depengine/executor.h"
#include "depengine/ndarray.h"
#include "depengine/optimizer.h"
#include "depengine/resource.h"

namespace spirals {

struct Options {
  depengine::EngineKind kind = depengine::EngineKind::kPerDevice;
  int cpu_threads = 2;
  int points_per_class = 500;
  int hidden = 64;
  int batch = 50;
  int epochs = 100;
  double lr = 0.03;
  double momentum = 0.9;
  std::uint32_t seed = 1;
  bool verbose = true;  // print loss and accuracy per epoch
};

struct Result {
  std::vector<double> loss;      // per epoch, on the whole data set
  std::vector<double> accuracy;  // per epoch
  double seconds = 0;            // wall time of the training loop
  depengine::MemoryPlanStats train_plan;
};

// Two spirals of `n` points each, labels 0 and 1, coordinates in [-1, 1].
inline void MakeData(int n, std::uint32_t seed, std::vector<float>* xy, std::vector<float>* label) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.02f);
  xy->clear();
  label->clear();
  for (int c = 0; c < 2; ++c) {
    for (int i = 0; i < n; ++i) {
      const float r = static_cast<float>(i) / static_cast<float>(n);
      const float t = 1.75f * r * 2 * 3.14159265f + static_cast<float>(c) * 3.14159265f;
      xy->push_back(r * std::cos(t) + noise(rng));
      xy->push_back(r * std::sin(t) + noise(rng));
      label->push_back(static_cast<float>(c));
    }
  }
}

// data (B, 2) -> fc1 -> relu -> fc2 -> relu -> fc3 (2) -> softmax
inline depengine::Graph Net(int hidden, depengine::NodeEntry* head) {
  using depengine::Graph;
  Graph g;
  const std::string h = std::to_string(hidden);
  auto x = g.Variable("data");
  x = g.Op("FullyConnected", "fc1", {{"num_hidden", h}}, {x});
  x = g.Op("Activation", "relu1", {{"act_type", "relu"}}, {x});
  x = g.Op("FullyConnected", "fc2", {{"num_hidden", h}}, {x});
  x = g.Op("Activation", "relu2", {{"act_type", "relu"}}, {x});
  x = g.Op("FullyConnected", "fc3", {{"num_hidden", "2"}}, {x});
  *head = g.Op("SoftmaxOutput", "softmax", {{"normalization", "batch"}}, {x});
  return g;
}

inline Result Train(const Options& opt) {
  using namespace depengine;
  EngineOptions eo;
  eo.kind = opt.kind;
  eo.cpu_worker_threads = opt.cpu_threads;
  std::unique_ptr<Engine> engine = CreateEngine(eo);
  Result result;
  {
    ResourceManager rm(engine.get(), {.seed = opt.seed});
    std::vector<float> xy, label;
    MakeData(opt.points_per_class, opt.seed, &xy, &label);
    const int n = 2 * opt.points_per_class;
    const int batches = n / opt.batch;

    NodeEntry head;
    Graph g = Net(opt.hidden, &head);
    ExecutorOptions to;
    to.engine = engine.get();
    to.resources = &rm;
    to.arg_shapes = {{"data", {opt.batch, 2}}};
    to.grad_req = {{"data", kNullOp}, {"softmax_label", kNullOp}};
    Executor train(g, {head}, to);
    result.train_plan = train.memory_stats();

    // Parameters: Xavier-uniform weights (drawn from the seeded generator
    // through the engine), zero biases, zero momentum.
    std::map<std::string, NDArray> mom;
    ExecutorOptions eval_o;
    eval_o.engine = engine.get();
    eval_o.resources = &rm;
    eval_o.arg_shapes = {{"data", {n, 2}}};
    eval_o.for_training = false;
    for (const auto& [name, arr] : train.arg_dict()) {
      if (name == "data" || name == "softmax_label") continue;
      NDArray w = arr;
      if (w.shape().ndim() == 2) {
        const double a = std::sqrt(6.0 / static_cast<double>(w.shape()[0] + w.shape()[1]));
        SampleUniform(-a, a, &w, &rm);
      }
      mom[name] = NDArray(w.shape(), Context::CPU(), engine.get());
      mom[name] = 0.0;
      eval_o.shared_args[name] = w;
    }
    Executor eval(g, {head}, eval_o);

    NDArray all_x(TShape{n, 2}, Context::CPU(), engine.get());
    NDArray all_y(TShape{n}, Context::CPU(), engine.get());
    NDArray data = train.arg("data"), lab = train.arg("softmax_label");
    NDArray eval_x = eval.arg("data");
    eval_x.SyncCopyFromCPU(xy.data(), xy.size());

    SGDParam sgd;
    sgd.lr = opt.lr;
    sgd.momentum = opt.momentum;
    std::mt19937 shuffle_rng(opt.seed);
    std::vector<int> order(static_cast<std::size_t>(n));
    std::vector<float> sx(xy.size()), sy(label.size());
    const auto start = std::chrono::steady_clock::now();
    for (int epoch = 0; epoch < opt.epochs; ++epoch) {
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), shuffle_rng);
      for (int i = 0; i < n; ++i) {
        sx[2 * i] = xy[2 * order[i]];
        sx[2 * i + 1] = xy[2 * order[i] + 1];
        sy[i] = label[order[i]];
      }
      // Waits for the previous epoch's batch copies to have read them.
      all_x.SyncCopyFromCPU(sx.data(), sx.size());
      all_y.SyncCopyFromCPU(sy.data(), sy.size());
      for (int b = 0; b < batches; ++b) {
        CopyFromTo(all_x.Slice(b * opt.batch, (b + 1) * opt.batch), &data);
        CopyFromTo(all_y.Slice(b * opt.batch, (b + 1) * opt.batch), &lab);
        train.Forward(true);
        train.Backward();
        for (auto& [name, m] : mom) {
          NDArray w = train.arg(name);
          SGDMomUpdate(&w, train.grad(name), &m, sgd);
        }
      }
      // Evaluate on the whole set (waits for this epoch's updates).
      eval.Forward(false);
      const std::vector<float> p = eval.outputs()[0].ToVector();
      double loss = 0;
      int correct = 0;
      for (int i = 0; i < n; ++i) {
        const int y = static_cast<int>(label[i]);
        loss -= std::log(std::max(p[2 * i + y], 1e-12f));
        correct += (p[2 * i + 1] > p[2 * i]) == (y == 1);
      }
      result.loss.push_back(loss / n);
      result.accuracy.push_back(static_cast<double>(correct) / n);
      if (opt.verbose && (epoch % 10 == 9 || epoch == opt.epochs - 1)) {
        std::printf("  %-24s epoch %3d  loss %.4f  accuracy %.3f\n", EngineKindName(opt.kind),
                    epoch + 1, result.loss.back(), result.accuracy.back());
      }
    }
    engine->WaitForAll();
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  engine->WaitForAll();
  return result;
}

}  // namespace spirals
