// Every built-in operator's gradient against central finite differences
// (float64), with kAddTo accumulation; plus forward values on known inputs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "op_harness.h"
#include "ops_fixture.h"

namespace depengine::test {
namespace {

class OperatorGradTest : public EngineTest {};

TEST_P(OperatorGradTest, FullyConnected) {
  CheckGradient(
      engine(), resources(),
      {.op = "FullyConnected", .kwargs = {{"num_hidden", "3"}}, .in_shapes = {TShape{4, 5}}});
}

TEST_P(OperatorGradTest, FullyConnectedFlattensAndNoBias) {
  CheckGradient(engine(), resources(),
                {.op = "FullyConnected",
                 .kwargs = {{"num_hidden", "2"}, {"no_bias", "true"}},
                 .in_shapes = {TShape{3, 2, 2}}});
}

TEST_P(OperatorGradTest, ActivationKinds) {
  for (const char* act : {"relu", "sigmoid", "tanh"}) {
    SCOPED_TRACE(act);
    CheckGradient(engine(), resources(),
                  {.op = "Activation", .kwargs = {{"act_type", act}}, .in_shapes = {TShape{3, 4}}});
  }
}

TEST_P(OperatorGradTest, ElementwiseBinary) {
  for (const char* op : {"elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div"}) {
    SCOPED_TRACE(op);
    GradCheck c{.op = op, .in_shapes = {TShape{2, 3}, TShape{2, 3}}};
    // Keep divisors away from zero.
    c.init = [](int, std::vector<double>* v, std::mt19937* rng) {
      std::uniform_real_distribution<double> d(0.5, 2);
      for (double& x : *v) x = (*rng)() % 2 ? d(*rng) : -d(*rng);
    };
    CheckGradient(engine(), resources(), c);
  }
}

TEST_P(OperatorGradTest, ScalarAndUnarySimpleOps) {
  for (const char* op : {"_plus_scalar", "_minus_scalar", "_rminus_scalar", "_mul_scalar",
                         "_div_scalar", "_rdiv_scalar"}) {
    SCOPED_TRACE(op);
    GradCheck c{.op = op, .kwargs = {{"scalar", "1.5"}}, .in_shapes = {TShape{5}}};
    c.init = [](int, std::vector<double>* v, std::mt19937* rng) {
      std::uniform_real_distribution<double> d(0.5, 2);
      for (double& x : *v) x = d(*rng);
    };
    CheckGradient(engine(), resources(), c);
  }
  for (const char* op : {"negative", "exp", "square"}) {
    SCOPED_TRACE(op);
    CheckGradient(engine(), resources(), {.op = op, .in_shapes = {TShape{2, 3}}});
  }
}

TEST_P(OperatorGradTest, SmoothL1) {
  GradCheck c{.op = "smooth_l1", .kwargs = {{"scalar", "2"}}, .in_shapes = {TShape{4, 6}}};
  // Both branches: |x| below and above 1/sigma^2 = 0.25.
  c.init = [](int, std::vector<double>* v, std::mt19937* rng) {
    std::uniform_real_distribution<double> d(-1.5, 1.5);
    for (double& x : *v) {
      do {
        x = d(*rng);
      } while (std::abs(std::abs(x) - 0.25) < 1e-3);
    }
  };
  CheckGradient(engine(), resources(), c);
}

TEST_P(OperatorGradTest, SoftmaxCrossEntropy) {
  constexpr int kN = 4, kC = 3;
  GradCheck c{.op = "SoftmaxOutput",
              .kwargs = {{"normalization", "batch"}, {"grad_scale", "2"}},
              .in_shapes = {TShape{kN, kC}},
              .check = {true, false}};
  c.init = [](int i, std::vector<double>* v, std::mt19937* rng) {
    std::uniform_real_distribution<double> d(-2, 2);
    for (std::size_t j = 0; j < v->size(); ++j)
      (*v)[j] = i == 0 ? d(*rng) : static_cast<double>(j % kC);
  };
  // The loss this layer differentiates: 2 * mean over the batch of -log p[label].
  c.loss = [](const std::vector<std::vector<double>>& outs,
              const std::vector<std::vector<double>>& ins) {
    double l = 0;
    for (int i = 0; i < kN; ++i) l -= std::log(outs[0][i * kC + static_cast<int>(ins[1][i])]);
    return 2 * l / kN;
  };
  CheckGradient(engine(), resources(), c);
}

TEST_P(OperatorGradTest, PoolingMaxAndAvg) {
  for (const char* type : {"max", "avg"}) {
    SCOPED_TRACE(type);
    CheckGradient(engine(), resources(),
                  {.op = "Pooling",
                   .kwargs = {{"kernel", "(2,2)"},
                              {"pool_type", type},
                              {"stride", "(2,1)"},
                              {"pad", "(1,0)"}},
                   .in_shapes = {TShape{2, 2, 4, 5}}});
  }
}

TEST_P(OperatorGradTest, DropoutWithFixedSeed) {
  GradCheck c{.op = "Dropout", .kwargs = {{"p", "0.4"}}, .in_shapes = {TShape{3, 8}}};
  // The same mask for every forward: reseed the generator first.
  c.before_forward = [this] { resources()->SeedRandom(11); };
  CheckGradient(engine(), resources(), c);
}

TEST_P(OperatorGradTest, ForwardValues) {
  // FullyConnected: [1 2; 3 4] * [1 0; 0 1; 1 1]^T + [0, 1, 2].
  OpHarness fc(engine(), resources(), "FullyConnected", {{"num_hidden", "3"}}, {TShape{2, 2}},
               kFloat32);
  std::vector<float> x{1, 2, 3, 4}, w{1, 0, 0, 1, 1, 1}, b{0, 1, 2};
  fc.in[0].SyncCopyFromCPU(x.data(), 4);
  fc.in[1].SyncCopyFromCPU(w.data(), 6);
  fc.in[2].SyncCopyFromCPU(b.data(), 3);
  fc.Forward(false);
  EXPECT_THAT(fc.out[0].ToVector(), ::testing::ElementsAre(1, 3, 5, 3, 5, 9));

  OpHarness pool(engine(), resources(), "Pooling", {{"kernel", "(2,2)"}, {"stride", "(2,2)"}},
                 {TShape{1, 1, 2, 4}}, kFloat32);
  std::vector<float> p{1, 5, 2, 0, 3, 4, 8, 7};
  pool.in[0].SyncCopyFromCPU(p.data(), p.size());
  pool.Forward(false);
  EXPECT_THAT(pool.out[0].ToVector(), ::testing::ElementsAre(5, 8));

  OpHarness sm(engine(), resources(), "SoftmaxOutput", {}, {TShape{1, 2}}, kFloat32);
  std::vector<float> logits{0, std::log(3.0f)};
  sm.in[0].SyncCopyFromCPU(logits.data(), 2);
  sm.Forward(false);
  EXPECT_THAT(sm.out[0].ToVector(), ::testing::ElementsAre(::testing::FloatNear(0.25f, 1e-6f),
                                                           ::testing::FloatNear(0.75f, 1e-6f)));
}

TEST_P(OperatorGradTest, DropoutTrainAndInference) {
  OpHarness d(engine(), resources(), "Dropout", {{"p", "0.5"}}, {TShape{1000}}, kFloat32);
  EXPECT_EQ(d.out.size(), 2u);
  EXPECT_EQ(d.prop().NumVisibleOutputs(), 1);
  d.in[0] = 1.0;
  d.Forward(true);
  const auto y = d.out[0].ToVector();
  int zeros = 0;
  for (float v : y) {
    EXPECT_TRUE(v == 0.0f || v == 2.0f) << v;
    zeros += v == 0.0f;
  }
  EXPECT_GT(zeros, 400);
  EXPECT_LT(zeros, 600);
  d.Forward(false);
  EXPECT_THAT(d.out[0].ToVector(), ::testing::Each(1.0f));
}

// A bad label fails the backward function; the failure reaches the caller
// through the array it would have written.
TEST_P(OperatorGradTest, SoftmaxBadLabelFailsThroughTheEngine) {
  OpHarness sm(engine(), resources(), "SoftmaxOutput", {}, {TShape{2, 3}}, kFloat32);
  std::vector<float> label{0, 7};
  sm.in[1].SyncCopyFromCPU(label.data(), 2);
  sm.Forward(true);
  EXPECT_THROW(sm.Backward({kWriteTo, kNullOp}), std::out_of_range);
}

DEPENGINE_INSTANTIATE_ENGINE_TEST(OperatorGradTest);

}  // namespace
}  // namespace depengine::test
