// In-place SGD: values, the weight's storage is updated in place, and reads
// pushed before the update see the old weights (the update is a write of
// the weight's var, ordered after them).
#include "depengine/optimizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ops_fixture.h"

namespace depengine::test {
namespace {

class OptimizerTest : public EngineTest {
 protected:
  NDArray Make(std::vector<float> v) {
    NDArray a(TShape{static_cast<TShape::index_t>(v.size())}, Context::CPU(), engine());
    a.SyncCopyFromCPU(v.data(), v.size());
    return a;
  }
};

TEST_P(OptimizerTest, SGDUpdatesInPlaceAfterEarlierReads) {
  NDArray w = Make({1, 2, 3, 4}), g = Make({10, -10, 100, -100});
  const void* storage = w.data().dptr_;
  NDArray before = w * 1.0;  // pushed before the update: must see the old weights
  SGDParam p;
  p.lr = 0.1;
  p.wd = 0.5;
  p.clip_gradient = 50;  // 100 -> 50, -100 -> -50
  SGDUpdate(&w, g, p);
  NDArray after = w * 1.0;
  EXPECT_THAT(before.ToVector(), ::testing::ElementsAre(1, 2, 3, 4));
  // w - 0.1 * (clip(g) + 0.5 w)
  EXPECT_THAT(
      after.ToVector(),
      ::testing::Pointwise(::testing::FloatNear(1e-5f),
                           std::vector<float>{1 - 0.1f * (10 + 0.5f), 2 - 0.1f * (-10 + 1),
                                              3 - 0.1f * (50 + 1.5f), 4 - 0.1f * (-50 + 2)}));
  EXPECT_EQ(w.data().dptr_, storage);
}

TEST_P(OptimizerTest, MomentumAccumulates) {
  NDArray w = Make({0, 0}), g = Make({1, -2}), m = Make({0, 0});
  SGDParam p;
  p.lr = 1;
  p.momentum = 0.5;
  for (int i = 0; i < 3; ++i) SGDMomUpdate(&w, g, &m, p);
  // m: -g, -1.5g, -1.75g; w: -4.25g
  EXPECT_THAT(m.ToVector(), ::testing::ElementsAre(-1.75f, 3.5f));
  EXPECT_THAT(w.ToVector(), ::testing::ElementsAre(-4.25f, 8.5f));
  NDArray wrong(TShape{3}, Context::CPU(), engine());
  EXPECT_THROW(SGDUpdate(&wrong, g, p), std::invalid_argument);
}

// A gradient that is a view partly overlapping the weight (or the
// momentum) is used as it was before the update. Before, the loop wrote
// weight[i] before reading grad[i + 1], so a = {1, 2, 3, 4} became
// {1, 1, 2, 2} instead of {1, 1, 1, 1}.
TEST_P(OptimizerTest, GradientOverlappingTheWeightIsReadWhole) {
  SGDParam p;
  p.lr = 1;
  NDArray a = Make({1, 2, 3, 4});
  NDArray w = a.Slice(1, 4);
  SGDUpdate(&w, a.Slice(0, 3), p);  // w = {2, 3, 4} - {1, 2, 3}
  EXPECT_THAT(a.ToVector(), ::testing::ElementsAre(1, 1, 1, 1));

  p.momentum = 1;
  NDArray b = Make({1, 2, 3, 4}), w2 = Make({0, 0, 0});
  NDArray m = b.Slice(1, 4);
  SGDMomUpdate(&w2, b.Slice(0, 3), &m, p);  // m = {2, 3, 4} - {1, 2, 3}; w2 += m
  EXPECT_THAT(b.ToVector(), ::testing::ElementsAre(1, 1, 1, 1));
  EXPECT_THAT(w2.ToVector(), ::testing::ElementsAre(1, 1, 1));
  NDArray c = Make({1, 2, 3, 4});
  NDArray w3 = c.Slice(1, 4), m3 = c.Slice(0, 3);
  EXPECT_THROW(SGDMomUpdate(&w3, w2, &m3, p), std::invalid_argument);
}

// Fields set directly, bypassing SGDParam::Schema(), are held to the same
// rules: an error naming the field, and nothing pushed. Before, a NaN or
// negative learning rate or a momentum of 5 silently made the weights NaN
// or diverge.
TEST_P(OptimizerTest, ParametersTheSchemaRefusesAreRejected) {
  NDArray w = Make({1, 2}), g = Make({1, 1}), m = Make({0, 0});
  const double nan = std::nan(""), inf = std::numeric_limits<double>::infinity();
  const std::vector<std::pair<std::string, std::function<void(SGDParam*)>>> cases = {
      {"lr", [&](SGDParam* p) { p->lr = nan; }},
      {"lr", [](SGDParam* p) { p->lr = -0.1; }},
      {"lr", [&](SGDParam* p) { p->lr = inf; }},
      {"wd", [](SGDParam* p) { p->wd = -1; }},
      {"momentum", [](SGDParam* p) { p->momentum = 5; }},
      {"rescale_grad", [&](SGDParam* p) { p->rescale_grad = nan; }},
      {"rescale_grad", [&](SGDParam* p) { p->rescale_grad = -inf; }},
      {"clip_gradient", [&](SGDParam* p) { p->clip_gradient = nan; }},
  };
  for (const auto& [field, set] : cases) {
    SCOPED_TRACE(field);
    SGDParam p;
    set(&p);
    for (int mom = 0; mom < 2; ++mom) {
      try {
        if (mom) {
          SGDMomUpdate(&w, g, &m, p);
        } else {
          SGDUpdate(&w, g, p);
        }
        ADD_FAILURE() << "expected std::invalid_argument";
      } catch (const std::invalid_argument& e) {
        EXPECT_THAT(e.what(), ::testing::HasSubstr("parameter '" + field + "'"));
      }
    }
  }
  EXPECT_THAT(w.ToVector(), ::testing::ElementsAre(1, 2));
  EXPECT_THAT(m.ToVector(), ::testing::ElementsAre(0, 0));
}

TEST(SGDParamTest, ParsesKeyValues) {
  SGDParam p;
  SGDParam::Schema().Init(&p, {{"lr", "0.5"}, {"momentum", "0.9"}}, "sgd");
  EXPECT_DOUBLE_EQ(p.lr, 0.5);
  EXPECT_DOUBLE_EQ(p.momentum, 0.9);
  EXPECT_DOUBLE_EQ(p.wd, 0.0);
  EXPECT_THROW(SGDParam::Schema().Init(&p, {{"momentum", "2"}}, "sgd"), ParamError);
}

DEPENGINE_INSTANTIATE_ENGINE_TEST(OptimizerTest);

}  // namespace
}  // namespace depengine::test
