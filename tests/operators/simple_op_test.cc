// SimpleOp: one registration usable on NDArrays and as an Operator; shape
// functions, kwargs, resources, in-place writes, registration errors.
#include "depengine/simple_op.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "op_harness.h"
#include "ops_fixture.h"

namespace depengine::test {
namespace {

// --- ops registered by this test ---------------------------------------

// test_row_sum: (n, m) -> (n,), a shape function and a T0 gradient.
TShape RowSumShape(const TShape& src, const EnvArguments&) {
  if (src.ndim() != 2)
    throw ShapeError("test_row_sum: data has shape " + src.ToString() + " but must be 2-D");
  return TShape{src[0]};
}
void RowSum(const TBlob& src, const EnvArguments&, TBlob* ret, OpReqType req, RunContext) {
  SwitchType(ret->type_flag_, [&](auto tag) {
    using T = decltype(tag);
    const auto m = src.shape_[1];
    const T* x = src.dptr<T>();
    T* y = ret->dptr<T>();
    for (TShape::index_t i = 0; i < src.shape_[0]; ++i) {
      T s = 0;
      for (TShape::index_t j = 0; j < m; ++j) s += x[i * m + j];
      Assign(y[i], req, s);
    }
  });
}
void RowSumGrad(const OutputGrad& g, const EnvArguments&, TBlob* gx, OpReqType req, RunContext) {
  SwitchType(gx->type_flag_, [&](auto tag) {
    using T = decltype(tag);
    const auto m = gx->shape_[1];
    for (TShape::index_t i = 0; i < gx->shape_[0]; ++i) {
      for (TShape::index_t j = 0; j < m; ++j)
        Assign(gx->dptr<T>()[i * m + j], req, g.data.dptr<T>()[i]);
    }
  });
}

// test_affine: y = a * x + b with kwargs a=..., b=...
void Affine(const TBlob& src, const EnvArguments& env, TBlob* ret, OpReqType req, RunContext) {
  double a = 1, b = 0;
  for (const auto& [k, v] : env.kwargs) (k == "a" ? a : b) = std::stod(v);
  SwitchType(ret->type_flag_, [&](auto tag) {
    using T = decltype(tag);
    for (std::size_t i = 0; i < ret->Size(); ++i) {
      Assign(ret->dptr<T>()[i], req, static_cast<T>(a * src.dptr<T>()[i] + b));
    }
  });
}

// test_noise: x + uniform noise in [0, 1), from the kRandom resource, and
// a scratch copy in kTempSpace.
void Noise(const TBlob& src, const EnvArguments& env, TBlob* ret, OpReqType req, RunContext) {
  const std::size_t n = ret->Size();
  float* scratch = static_cast<float*>(env.resource[1].get_space_bytes(n * sizeof(float)));
  env.resource[0].get_random()->SampleUniform(scratch, n, 0.0f, 1.0f);
  for (std::size_t i = 0; i < n; ++i)
    Assign(ret->dptr<float>()[i], req, src.dptr<float>()[i] + scratch[i]);
}

DEPENGINE_REGISTER_SIMPLE_OP(test_row_sum)
    .set_shape_function(RowSumShape)
    .set_function(DeviceType::kCPU, RowSum)
    .set_gradient(DeviceType::kCPU, RowSumGrad)
    .describe("row sums");
DEPENGINE_REGISTER_SIMPLE_OP(test_affine)
    .set_function(DeviceType::kCPU, Affine, kInplaceInOut)
    .set_enable_kwargs(true)
    .describe("a * x + b");
DEPENGINE_REGISTER_SIMPLE_OP(test_noise)
    .set_function(DeviceType::kCPU, Noise)
    .set_resource_request({ResourceRequest::kRandom, ResourceRequest::kTempSpace})
    .describe("x + U[0,1)");

class SimpleOpTest : public EngineTest {
 protected:
  NDArray Make(std::vector<float> v, TShape s) {
    NDArray a(s, Context::CPU(), engine());
    a.SyncCopyFromCPU(v.data(), v.size());
    return a;
  }
};

TEST_P(SimpleOpTest, SmoothL1OnNDArrays) {
  const auto& op = SimpleOpRegistry::Get("smooth_l1");
  EXPECT_EQ(op.grad_kind(), SimpleOpGradKind::kInputs);
  EXPECT_EQ(op.forward_inplace(), kNoInplace);
  EXPECT_EQ(op.backward_inplace(), kInplaceOutIn);
  NDArray x = Make({-2, -0.1f, 0, 0.2f, 3}, {5});
  NDArray y = op.Invoke({x}, {.scalar = 2});  // sigma^2 = 4: the bend is at |x| = 0.25
  const std::vector<float> got = y.ToVector();
  const std::vector<float> want{2 - 0.125f, 0.5f * 0.01f * 4, 0, 0.5f * 0.04f * 4, 3 - 0.125f};
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << i;
  // The same key=value form as the operator.
  NDArray z = op.Invoke({x}, {.kwargs = {{"scalar", "2"}}});
  EXPECT_EQ(z.ToVector(), got);
}

TEST_P(SimpleOpTest, BinaryAndInPlace) {
  const auto& add = SimpleOpRegistry::Get("elemwise_add");
  const auto& div = SimpleOpRegistry::Get("elemwise_div");
  NDArray a = Make({1, 2, 3}, {3}), b = Make({10, 20, 30}, {3});
  EXPECT_THAT(add.Invoke({a, b}).ToVector(), ::testing::ElementsAre(11, 22, 33));
  // Into lhs: allowed in place (kInplaceLhsOut), same storage afterwards.
  NDArray out = a;
  add.Invoke({a, b}, {}, &out);
  EXPECT_TRUE(out.SharesStorageWith(a));
  EXPECT_THAT(a.ToVector(), ::testing::ElementsAre(11, 22, 33));
  // Into rhs: not an allowed in-place pair, done through a temporary.
  NDArray into_b = b;
  div.Invoke({b, a}, {}, &into_b);  // b = b / a
  EXPECT_THAT(b.ToVector(), ::testing::ElementsAre(10.0f / 11, 20.0f / 22, 30.0f / 33));
  NDArray c = Make({1, 2}, {2});
  EXPECT_THROW(add.Invoke({a, c}), ShapeError);
  EXPECT_THROW(add.Invoke({a}), std::invalid_argument);
}

TEST_P(SimpleOpTest, ShapeFunctionKwargsAndResources) {
  NDArray m = Make({1, 2, 3, 4, 5, 6}, {2, 3});
  NDArray s = SimpleOpRegistry::Get("test_row_sum").Invoke({m});
  EXPECT_EQ(s.shape(), TShape{2});
  EXPECT_THAT(s.ToVector(), ::testing::ElementsAre(6, 15));
  EXPECT_THROW(SimpleOpRegistry::Get("test_row_sum").Invoke({s}), ShapeError);

  NDArray y =
      SimpleOpRegistry::Get("test_affine").Invoke({m}, {.kwargs = {{"a", "2"}, {"b", "1"}}});
  EXPECT_THAT(y.ToVector(), ::testing::ElementsAre(3, 5, 7, 9, 11, 13));
  EXPECT_THROW(SimpleOpRegistry::Get("smooth_l1").Invoke({m}, {.kwargs = {{"a", "2"}}}),
               ParamError);

  const auto& noise = SimpleOpRegistry::Get("test_noise");
  auto run = [&](std::uint32_t seed) {
    resources()->SeedRandom(seed);
    NDArray r = noise.Invoke({m}, {.resources = resources()});
    return r.ToVector();
  };
  const auto a = run(3), b = run(3), c = run(4);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (int i = 0; i < 6; ++i) {
    EXPECT_GE(a[i], static_cast<float>(i + 1));
    EXPECT_LT(a[i], static_cast<float>(i + 2));
  }
}

TEST_P(SimpleOpTest, RegisteredOpIsAlsoAnOperator) {
  auto prop = OperatorProperty::Create("test_row_sum");
  std::vector<TShape> in{TShape{3, 4}}, out, aux;
  ASSERT_TRUE(prop->InferShape(&in, &out, &aux));
  EXPECT_EQ(out[0], TShape{3});
  CheckGradient(engine(), resources(), {.op = "test_row_sum", .in_shapes = {TShape{3, 4}}});
  auto affine = OperatorProperty::Create("test_affine", {{"a", "3"}});
  EXPECT_EQ(affine->GetParams().at("a"), "3");
}

DEPENGINE_INSTANTIATE_ENGINE_TEST(SimpleOpTest);

TEST(SimpleOpRegistration, ContradictionsAreErrors) {
  SimpleOpRegEntry e("test_bad");
  e.set_function(DeviceType::kCPU, RowSum);
  EXPECT_THROW(e.set_gradient(DeviceType::kCPU, BinaryGradFunctionT0{}), std::logic_error);
  EXPECT_THROW(e.set_function(DeviceType::kCPU, RowSum, kInplaceLhsOut), std::logic_error);
  EXPECT_THROW(e.set_function(DeviceType::kGPU, RowSum), std::logic_error);
  e.set_enable_scalar(true);
  EXPECT_THROW(e.set_enable_kwargs(true), std::logic_error);
  EXPECT_THROW(SimpleOpRegistry::Get("no_such_op"), std::invalid_argument);
}

}  // namespace
}  // namespace depengine::test
