// Operators and their support: FullyConnected applied to the last axis
// (flatten=false), the shape checks of FullyConnected and SoftmaxOutput,
// registry names taken twice and descriptions, resources used as the wrong
// kind or asked for where they cannot be, typed temporary space, element
// type names and blob views, and SGD given an empty array.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "depengine/ndarray.h"
#include "depengine/operator.h"
#include "depengine/optimizer.h"
#include "depengine/resource.h"
#include "depengine/simple_op.h"
#include "op_harness.h"
#include "ops_fixture.h"

namespace depengine::test {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class OperatorChecksTest : public EngineTest {};

// With flatten=false FullyConnected maps the last axis and keeps the
// others: data (2, 2, 3) -> (2, 2, num_hidden). Values against a host
// computation, and gradients against finite differences.
TEST_P(OperatorChecksTest, FullyConnectedWithoutFlattenMapsTheLastAxis) {
  const KwArgs kw{{"num_hidden", "2"}, {"flatten", "false"}};
  OpHarness fc(engine(), resources(), "FullyConnected", kw, {TShape{2, 2, 3}}, kFloat64);
  ASSERT_EQ(fc.in[1].shape(), (TShape{2, 3}));
  ASSERT_EQ(fc.out[0].shape(), (TShape{2, 2, 2}));
  std::vector<double> x(12), w{1, 0, -1, 0.5, 2, 0}, b{10, -10};
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i) - 4;
  fc.in[0].SyncCopyFromCPU(x.data(), x.size());
  fc.in[1].SyncCopyFromCPU(w.data(), w.size());
  fc.in[2].SyncCopyFromCPU(b.data(), b.size());
  fc.Forward(false);
  std::vector<double> want;
  for (int r = 0; r < 4; ++r) {
    for (int h = 0; h < 2; ++h) {
      double s = b[h];
      for (int k = 0; k < 3; ++k) s += x[r * 3 + k] * w[h * 3 + k];
      want.push_back(s);
    }
  }
  EXPECT_EQ(fc.out[0].ToVector<double>(), want);
  CheckGradient(engine(), resources(),
                {.op = "FullyConnected", .kwargs = kw, .in_shapes = {TShape{2, 2, 3}}});
  CheckGradient(engine(), resources(),
                {.op = "FullyConnected",
                 .kwargs = {{"num_hidden", "3"}, {"flatten", "false"}, {"no_bias", "true"}},
                 .in_shapes = {TShape{4}}});
}

// Using a resource as the other kind (or one no manager made) is a
// std::logic_error naming the kind; the manager's resources keep working.
TEST_P(OperatorChecksTest, ResourcesUsedAsTheOtherKindRaise) {
  const Resource random = resources()->Request(Context::CPU(), ResourceRequest::kRandom);
  const Resource temp = resources()->Request(Context::CPU(), ResourceRequest::kTempSpace);
  EXPECT_THAT(Raised<std::logic_error>([&] { temp.get_random(); }),
              HasSubstr("Resource::get_random: this resource is not a random generator"));
  EXPECT_THAT(Raised<std::logic_error>([&] { random.get_space_bytes(16); }),
              HasSubstr("Resource::get_space: this resource is not temporary space"));
  EXPECT_THAT(Raised<std::logic_error>([&] { random.get_space(TShape{4}); }),
              HasSubstr("not temporary space"));
  const Resource none;  // made by no manager
  EXPECT_THAT(Raised<std::logic_error>([&] { none.get_space_bytes(16); }),
              HasSubstr("not temporary space"));
  EXPECT_THAT(Raised<std::logic_error>([&] {
                Resource r;
                r.req = ResourceRequest::kRandom;
                r.get_random();
              }),
              HasSubstr("not a random generator"));
  // The resources still work.
  NDArray a(TShape{4}, Context::CPU(), engine());
  SampleUniform(0, 1, &a, resources());
  EXPECT_THAT(a.ToVector(), ::testing::Each(AllOf(::testing::Ge(0.f), ::testing::Lt(1.f))));
}

// get_space(shape, type) gives a blob of that shape and type on 64-byte
// aligned memory, distinct from the other pieces taken by the same
// function, which holds what is written into it.
TEST_P(OperatorChecksTest, TypedTemporarySpaceHasTheShapeAndType) {
  const Resource temp = resources()->Request(Context::CPU(), ResourceRequest::kTempSpace);
  NDArray out(TShape{6}, Context::CPU(), engine(), kFloat64);
  TBlob first, second;
  const TBlob o = out.data();
  engine()->PushSync(
      [&first, &second, temp, o](RunContext) {
        first = temp.get_space(TShape{2, 3}, kFloat64);
        second = temp.get_space(TShape{5}, kFloat32);
        double* p = first.dptr<double>();
        float* q = second.dptr<float>();
        for (int i = 0; i < 6; ++i) p[i] = 1.5 * i;
        for (int i = 0; i < 5; ++i) q[i] = -1.0f;
        for (int i = 0; i < 6; ++i) o.dptr<double>()[i] = p[i];
      },
      Context::CPU(), {}, {temp.var, out.var()});
  EXPECT_THAT(out.ToVector<double>(), ElementsAre(0, 1.5, 3, 4.5, 6, 7.5));
  EXPECT_EQ(first.shape_, (TShape{2, 3}));
  EXPECT_EQ(first.type_flag_, kFloat64);
  EXPECT_EQ(first.ctx_, Context::CPU());
  EXPECT_EQ(second.shape_, (TShape{5}));
  EXPECT_EQ(second.type_flag_, kFloat32);
  const auto a = reinterpret_cast<std::uintptr_t>(first.dptr_);
  const auto b = reinterpret_cast<std::uintptr_t>(second.dptr_);
  EXPECT_EQ(a % 64, 0u);
  EXPECT_EQ(b % 64, 0u);
  EXPECT_TRUE(a + 6 * sizeof(double) <= b || b + 5 * sizeof(float) <= a)
      << "two pieces of one function overlap";
}

DEPENGINE_INSTANTIATE_ENGINE_TEST(OperatorChecksTest);

// FullyConnected and SoftmaxOutput check the number of input shapes and
// the data's dimensions, naming the operator and the shape.
TEST(OperatorChecks, ShapeChecksOfFullyConnectedAndSoftmaxOutput) {
  std::vector<TShape> out, aux;
  auto fc = OperatorProperty::Create("FullyConnected", {{"num_hidden", "4"}});
  std::vector<TShape> one{TShape{2, 3}};
  EXPECT_THAT(Raised<ShapeError>([&] { fc->InferShape(&one, &out, &aux); }),
              HasSubstr("FullyConnected: expected 3 inputs, got 1"));
  auto fc_nb =
      OperatorProperty::Create("FullyConnected", {{"num_hidden", "4"}, {"no_bias", "true"}});
  std::vector<TShape> three{TShape{2, 3}, TShape(), TShape()};
  EXPECT_THAT(Raised<ShapeError>([&] { fc_nb->InferShape(&three, &out, &aux); }),
              HasSubstr("FullyConnected: expected 2 inputs, got 3"));
  std::vector<TShape> vec{TShape{5}, TShape(), TShape()};
  EXPECT_THAT(Raised<ShapeError>([&] { fc->InferShape(&vec, &out, &aux); }),
              HasSubstr("FullyConnected: data has shape (5,) but needs at least 2 dimensions "
                        "(batch, features)"));
  // Without flatten, one dimension is enough: (5,) -> (4,).
  auto fc_last =
      OperatorProperty::Create("FullyConnected", {{"num_hidden", "4"}, {"flatten", "false"}});
  vec = {TShape{5}, TShape(), TShape()};
  ASSERT_TRUE(fc_last->InferShape(&vec, &out, &aux));
  EXPECT_EQ(vec[1], (TShape{4, 5}));
  EXPECT_EQ(out[0], (TShape{4}));

  auto sm = OperatorProperty::Create("SoftmaxOutput", {});
  std::vector<TShape> data_only{TShape{2, 3}};
  EXPECT_THAT(Raised<ShapeError>([&] { sm->InferShape(&data_only, &out, &aux); }),
              HasSubstr("SoftmaxOutput: expected 2 inputs (data, label)"));
  std::vector<TShape> flat{TShape{6}, TShape()};
  EXPECT_THAT(Raised<ShapeError>([&] { sm->InferShape(&flat, &out, &aux); }),
              HasSubstr("SoftmaxOutput: data has shape (6,) but needs (batch, classes)"));
}

// An operator and a simple op registered with descriptions (at static
// initialization, so that a repeated test does not register them twice).
std::unique_ptr<OperatorProperty> MakeActivation() {
  return OperatorProperty::Create("Activation");
}
[[maybe_unused]] const bool described_registered = OperatorRegistry::Register(
    "test_checks_described", MakeActivation, "an activation under another name");
DEPENGINE_REGISTER_SIMPLE_OP(test_checks_simple_described).describe("a simple description");

// A name is registered once across operators and simple ops; the second
// registration raises naming it and changes nothing. Describe returns what
// was registered, for both kinds, and "" for an unknown name.
TEST(OperatorChecks, RegistryNamesAreTakenOnceAndDescribed) {
  EXPECT_THAT(Raised<std::invalid_argument>(
                  [&] { OperatorRegistry::Register("FullyConnected", MakeActivation); }),
              HasSubstr("OperatorRegistry::Register: the name 'FullyConnected' is already "
                        "registered"));
  EXPECT_THAT(Raised<std::invalid_argument>(
                  [&] { OperatorRegistry::Register("negative", MakeActivation); }),
              HasSubstr("the name 'negative' is already registered"));
  EXPECT_EQ(OperatorProperty::Create("FullyConnected")->TypeString(), "FullyConnected");

  EXPECT_EQ(OperatorRegistry::Describe("test_checks_described"),
            "an activation under another name");
  EXPECT_EQ(OperatorProperty::Create("test_checks_described")->TypeString(), "Activation");
  EXPECT_EQ(OperatorRegistry::Describe("test_checks_simple_described"), "a simple description");
  EXPECT_EQ(OperatorRegistry::Describe("elemwise_add"), "lhs + rhs");
  EXPECT_EQ(OperatorRegistry::Describe("no_such_operator"), "");
}

// A ResourceManager needs at least one temporary buffer per device, and has
// no GPU resources; without an engine it is on Engine::Get().
TEST(OperatorChecks, ResourceManagerOptionsAndContexts) {
  EngineOptions o;
  o.kind = EngineKind::kNaive;
  auto engine = CreateEngine(o);
  for (int copies : {0, -2}) {
    EXPECT_THAT(Raised<std::invalid_argument>(
                    [&] { ResourceManager rm(engine.get(), {.temp_space_copies = copies}); }),
                HasSubstr("ResourceManager: temp_space_copies must be >= 1, got " +
                          std::to_string(copies)));
  }
  {
    ResourceManager rm(engine.get(), {.temp_space_copies = 2});
    EXPECT_THAT(Raised<std::invalid_argument>(
                    [&] { rm.Request(Context::GPU(0), ResourceRequest::kTempSpace); }),
                HasSubstr("ResourceManager::Request: GPU resources are not supported"));
    // Two buffers, handed out in turn.
    const Resource t0 = rm.Request(Context::CPU(), ResourceRequest::kTempSpace);
    const Resource t1 = rm.Request(Context::CPU(), ResourceRequest::kTempSpace);
    const Resource t2 = rm.Request(Context::CPU(), ResourceRequest::kTempSpace);
    EXPECT_EQ(t0.id, 0);
    EXPECT_EQ(t1.id, 1);
    EXPECT_NE(t0.var, t1.var);
    EXPECT_EQ(t2.var, t0.var);
  }
  engine->WaitForAll();
  ResourceManager on_default;
  EXPECT_EQ(on_default.engine(), Engine::Get());
  NDArray a(TShape{8});
  SampleGaussian(0, 1, &a, &on_default);
  EXPECT_THAT(a.ToVector(), ::testing::Each(::testing::Ne(0.f)));
}

// An element type flag that is not known reads as "unknown", and a typed
// pointer to such a blob raises naming both types; Reshape views the same
// memory and refuses another element count, naming both shapes.
TEST(OperatorChecks, TypeNamesAndBlobViews) {
  EXPECT_STREQ(TypeName(kFloat32), "float32");
  EXPECT_STREQ(TypeName(kFloat64), "float64");
  EXPECT_STREQ(TypeName(7), "unknown");
  std::vector<float> v{1, 2, 3, 4, 5, 6};
  const TBlob odd(v.data(), TShape{6}, 7);
  EXPECT_THAT(Raised<std::logic_error>([&] { odd.dptr<float>(); }),
              HasSubstr("TBlob: requested float32 from a unknown blob"));
  const TBlob b(v.data(), TShape{2, 3}, kFloat32);
  const TBlob r = b.Reshape(TShape{3, 2});
  EXPECT_EQ(r.dptr_, b.dptr_);
  EXPECT_EQ(r.shape_, (TShape{3, 2}));
  EXPECT_EQ(r.dptr<float>()[5], 6.0f);
  EXPECT_THAT(Raised<std::invalid_argument>([&] { b.Reshape(TShape{4}); }),
              HasSubstr("TBlob::Reshape: cannot view (2,3) as (4,)"));
  EXPECT_THAT(Raised<std::invalid_argument>([&] { b.Reshape(TShape{7}); }), HasSubstr("(7,)"));
}

// SGD on an empty weight or gradient raises before pushing anything.
TEST(OperatorChecks, SgdRejectsEmptyArrays) {
  EngineOptions o;
  o.kind = EngineKind::kNaive;
  auto engine = CreateEngine(o);
  {
    NDArray w(TShape{3}, Context::CPU(), engine.get()), g(TShape{3}, Context::CPU(), engine.get());
    w = 1.0;
    g = 1.0;
    NDArray empty, mom(TShape{3}, Context::CPU(), engine.get());
    mom = 0.0;
    SGDParam p;
    p.lr = 0.5;
    EXPECT_THAT(Raised<std::invalid_argument>([&] { SGDUpdate(&w, empty, p); }),
                HasSubstr("SGDUpdate: empty array"));
    EXPECT_THAT(Raised<std::invalid_argument>([&] { SGDUpdate(&empty, g, p); }),
                HasSubstr("SGDUpdate: empty array"));
    EXPECT_THAT(Raised<std::invalid_argument>([&] { SGDMomUpdate(&w, g, &empty, p); }),
                HasSubstr("SGDMomUpdate: empty array"));
    EXPECT_THAT(w.ToVector(), ::testing::Each(1.0f));
    SGDUpdate(&w, g, p);
    EXPECT_THAT(w.ToVector(), ::testing::Each(0.5f));
  }
  engine->WaitForAll();
}

}  // namespace
}  // namespace depengine::test
