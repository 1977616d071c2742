// The spirals MLP of examples/mlp_spirals.cc, smaller: the loss falls,
// the accuracy is high, and every engine kind computes the same numbers
// (one seed, one data flow).
#include <gtest/gtest.h>

#include "spirals.h"

namespace depengine::test {
namespace {

spirals::Options SmallRun(EngineKind kind) {
  spirals::Options o;
  o.kind = kind;
  o.points_per_class = 200;
  o.hidden = 64;
  o.batch = 20;
  o.epochs = 100;
  o.verbose = false;
  return o;
}

TEST(MlpSpirals, LearnsOnEveryEngineKindWithIdenticalResults) {
  const spirals::Result naive = spirals::Train(SmallRun(EngineKind::kNaive));
  ASSERT_EQ(naive.accuracy.size(), 100u);
  EXPECT_LT(naive.loss.back(), 0.5 * naive.loss.front());
  EXPECT_GE(naive.accuracy.back(), 0.95) << "final loss " << naive.loss.back();
  EXPECT_LT(naive.train_plan.planned_bytes, naive.train_plan.naive_bytes);
  for (EngineKind kind : {EngineKind::kPooled, EngineKind::kPerDevice}) {
    SCOPED_TRACE(EngineKindName(kind));
    const spirals::Result r = spirals::Train(SmallRun(kind));
    EXPECT_EQ(r.loss, naive.loss);
    EXPECT_EQ(r.accuracy, naive.accuracy);
  }
}

}  // namespace
}  // namespace depengine::test
