// NDArray: in-place arithmetic with a scalar, a scalar on the left of an
// operator, the checks that arrays combined or copied agree (type, context,
// engine, shape, element count) and leave the arrays usable when they
// raise, and arrays and sampling on the process-wide engine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "depengine/ndarray.h"
#include "depengine/resource.h"
#include "ops_fixture.h"

namespace depengine::test {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class NDArrayChecksTest : public EngineTest {
 protected:
  template <class T>
  NDArray Make(const std::vector<T>& values, TShape shape, Context ctx = Context::CPU()) {
    NDArray a(shape, ctx, engine(), DataType<T>::kFlag);
    a.SyncCopyFromCPU(values.data(), values.size());
    return a;
  }
};

// a -= s, a *= s and a /= s change the array itself (and every view of its
// storage), element by element, in both element types.
TEST_P(NDArrayChecksTest, InPlaceScalarArithmeticMatchesHost) {
  const std::vector<double> x{1.5, -2, 4, 0.25, 7, -0.5};
  NDArray a = Make(x, {2, 3});
  NDArray view = a.Reshape({6});
  a -= 0.75;
  a *= -3.0;
  a /= 8.0;
  std::vector<double> want(x);
  for (double& v : want) v = (v - 0.75) * -3.0 / 8.0;
  const std::vector<double> got = view.ToVector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(got[i], want[i]) << i;

  NDArray f = Make(std::vector<float>{3, 6, -9}, {3});
  f -= 1.0;
  EXPECT_THAT(f.ToVector(), ElementsAre(2, 5, -10));
  f *= 0.5;
  EXPECT_THAT(f.ToVector(), ElementsAre(1, 2.5, -5));
  f /= -2.0;
  EXPECT_THAT(f.ToVector(), ElementsAre(-0.5, -1.25, 2.5));
}

// s + a, s - a, s * a and s / a give new arrays with the scalar on the
// left (not a - s or a / s), and leave `a` as it was.
TEST_P(NDArrayChecksTest, ScalarOnTheLeftGivesANewArray) {
  const std::vector<double> x{1, -2, 4, 0.5};
  NDArray a = Make(x, {4});
  const NDArray sum = 3.0 + a, diff = 3.0 - a, prod = -2.0 * a, quot = 6.0 / a;
  for (const NDArray* r : {&sum, &diff, &prod, &quot}) {
    EXPECT_FALSE(r->SharesStorageWith(a));
    EXPECT_EQ(r->shape(), a.shape());
    EXPECT_EQ(r->dtype(), kFloat64);
  }
  EXPECT_THAT(sum.ToVector<double>(), ElementsAre(4, 1, 7, 3.5));
  EXPECT_THAT(diff.ToVector<double>(), ElementsAre(2, 5, -1, 2.5));
  EXPECT_THAT(prod.ToVector<double>(), ElementsAre(-2, 4, -8, -1));
  EXPECT_THAT(quot.ToVector<double>(), ElementsAre(6, -3, 1.5, 12));
  EXPECT_EQ(a.ToVector<double>(), x);
}

// Arrays of another type, context or engine cannot be combined: each
// operator, new or in place, raises std::invalid_argument naming the
// operation and what differs, pushes nothing, and the arrays stay usable.
TEST_P(NDArrayChecksTest, CombiningArraysThatDifferIsRejected) {
  NDArray a = Make(std::vector<float>{1, 2, 3}, {3});
  NDArray twin = Make(std::vector<float>{10, 20, 30}, {3});
  NDArray wide = Make(std::vector<double>{1, 2, 3}, {3});
  NDArray cpu1 = Make(std::vector<float>{1, 2, 3}, {3}, Context::CPU(1));
  EngineOptions o;
  o.kind = EngineKind::kNaive;
  auto other_engine = CreateEngine(o);
  {
    NDArray elsewhere(TShape{3}, Context::CPU(), other_engine.get());
    elsewhere = 1.0;

    EXPECT_THAT(Raised<std::invalid_argument>([&] { return a + wide; }),
                AllOf(HasSubstr("operator+"), HasSubstr("types float32 and float64 differ")));
    EXPECT_THAT(Raised<std::invalid_argument>([&] { a *= wide; }),
                AllOf(HasSubstr("NDArray::operator*="), HasSubstr("float32 and float64")));
    EXPECT_THAT(Raised<std::invalid_argument>([&] { return a - cpu1; }),
                AllOf(HasSubstr("operator-"), HasSubstr("different contexts")));
    EXPECT_THAT(Raised<std::invalid_argument>([&] { a += cpu1; }), HasSubstr("different contexts"));
    EXPECT_THAT(Raised<std::invalid_argument>([&] { return a / elsewhere; }),
                AllOf(HasSubstr("operator/"), HasSubstr("different engines")));
    EXPECT_THAT(Raised<std::invalid_argument>([&] { a -= elsewhere; }),
                HasSubstr("different engines"));
    EXPECT_THAT(elsewhere.ToVector(), ElementsAre(1, 1, 1));
  }
  other_engine->WaitForAll();
  // Nothing was written, and the arrays still work.
  EXPECT_THAT(a.ToVector(), ElementsAre(1, 2, 3));
  a += twin;
  EXPECT_THAT(a.ToVector(), ElementsAre(11, 22, 33));
  EXPECT_THAT((cpu1 * 2.0).ToVector(), ElementsAre(2, 4, 6));
  EXPECT_THAT(wide.ToVector<double>(), ElementsAre(1, 2, 3));
}

// SyncCopyFromCPU takes exactly Size() elements of the array's type; any
// other count or type raises, naming both, and copies nothing.
TEST_P(NDArrayChecksTest, CopyFromHostChecksCountAndType) {
  NDArray a = Make(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  const std::vector<float> five{9, 9, 9, 9, 9};
  const std::vector<double> six{9, 9, 9, 9, 9, 9};
  EXPECT_THAT(Raised<std::invalid_argument>([&] { a.SyncCopyFromCPU(five.data(), five.size()); }),
              AllOf(HasSubstr("NDArray::SyncCopyFromCPU"), HasSubstr("got 5 float32 elements"),
                    HasSubstr("float32 array of shape (2,3)")));
  EXPECT_THAT(Raised<std::invalid_argument>([&] { a.SyncCopyFromCPU(six.data(), six.size()); }),
              AllOf(HasSubstr("got 6 float64 elements"), HasSubstr("float32 array")));
  EXPECT_THAT(a.ToVector(), ElementsAre(1, 2, 3, 4, 5, 6));
}

// CopyFromTo needs the same shape and type, and one engine; otherwise it
// raises naming both arrays (or the engines) and the target keeps its
// contents.
TEST_P(NDArrayChecksTest, CopyFromToChecksShapeTypeAndEngine) {
  NDArray from = Make(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  NDArray transposed = Make(std::vector<float>{0, 0, 0, 0, 0, 0}, {3, 2});
  NDArray wide = Make(std::vector<double>{0, 0, 0, 0, 0, 0}, {2, 3});
  EXPECT_THAT(Raised<std::invalid_argument>([&] { CopyFromTo(from, &transposed); }),
              HasSubstr("CopyFromTo: cannot copy a float32 array of shape (2,3) into a float32 "
                        "array of shape (3,2)"));
  EXPECT_THAT(Raised<std::invalid_argument>([&] { CopyFromTo(from, &wide); }),
              HasSubstr("float32 array of shape (2,3) into a float64 array of shape (2,3)"));
  EngineOptions o;
  o.kind = EngineKind::kNaive;
  auto other_engine = CreateEngine(o);
  {
    NDArray elsewhere(TShape{2, 3}, Context::CPU(), other_engine.get());
    elsewhere = 7.0;
    EXPECT_THAT(Raised<std::invalid_argument>([&] { CopyFromTo(from, &elsewhere); }),
                AllOf(HasSubstr("CopyFromTo"), HasSubstr("different engines")));
    EXPECT_THAT(elsewhere.ToVector(), ::testing::Each(7.0f));
  }
  other_engine->WaitForAll();
  EXPECT_THAT(transposed.ToVector(), ::testing::Each(0.0f));
  EXPECT_THAT(wide.ToVector<double>(), ::testing::Each(0.0));
  // A matching target still copies.
  NDArray same(TShape{2, 3}, Context::CPU(), engine());
  CopyFromTo(from, &same);
  EXPECT_THAT(same.ToVector(), ElementsAre(1, 2, 3, 4, 5, 6));
}

// Sampling with a resource manager of another engine would list the
// generator's var on the wrong engine: refused before anything is pushed.
TEST_P(NDArrayChecksTest, SamplingWithAnotherEnginesResourcesIsRejected) {
  EngineOptions o;
  o.kind = EngineKind::kNaive;
  auto other_engine = CreateEngine(o);
  {
    ResourceManager other(other_engine.get());
    NDArray a(TShape{4}, Context::CPU(), engine());
    a = 5.0;
    EXPECT_THAT(Raised<std::invalid_argument>([&] { SampleUniform(0, 1, &a, &other); }),
                AllOf(HasSubstr("SampleUniform"),
                      HasSubstr("the resource manager and the array belong to different engines")));
    EXPECT_THAT(Raised<std::invalid_argument>([&] { SampleGaussian(0, 1, &a, &other); }),
                HasSubstr("SampleGaussian"));
    EXPECT_THAT(a.ToVector(), ::testing::Each(5.0f));
    SampleUniform(0, 1, &a, resources());
    EXPECT_THAT(a.ToVector(), ::testing::Each(AllOf(::testing::Ge(0.f), ::testing::Lt(1.f))));
  }
  other_engine->WaitForAll();
}

DEPENGINE_INSTANTIATE_ENGINE_TEST(NDArrayChecksTest);

// Without an engine, an array lives on Engine::Get(); sampling without a
// resource manager uses ResourceManager::Get(), which is on that engine.
TEST(NDArrayDefaultEngine, ArraysAndSamplingUseTheProcessWideEngine) {
  ASSERT_EQ(ResourceManager::Get(), ResourceManager::Get());
  EXPECT_EQ(ResourceManager::Get()->engine(), Engine::Get());
  NDArray a(TShape{3});
  EXPECT_EQ(a.engine(), Engine::Get());
  EXPECT_EQ(a.dtype(), kFloat32);
  a = 2.0;
  a *= 3.0;
  EXPECT_THAT(a.ToVector(), ::testing::Each(6.0f));
  NDArray r(TShape{64});
  SampleUniform(-1, 1, &r);
  EXPECT_THAT(r.ToVector(), ::testing::Each(AllOf(::testing::Ge(-1.f), ::testing::Lt(1.f))));
  // The generator of ResourceManager::Get() is reproducible from its seed.
  ResourceManager::Get()->SeedRandom(5);
  SampleGaussian(0, 1, &r);
  const std::vector<float> first = r.ToVector();
  ResourceManager::Get()->SeedRandom(5);
  SampleGaussian(0, 1, &r);
  EXPECT_EQ(r.ToVector(), first);
}

}  // namespace
}  // namespace depengine::test
