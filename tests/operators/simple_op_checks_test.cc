// SimpleOp: binary shape functions, binary gradients that need the output
// value, in-place options a registration may not take, calls on NDArrays
// with arrays or arguments that do not fit, writes into an input through a
// temporary, and the operator adapter's checks and declarations.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "depengine/simple_op.h"
#include "op_harness.h"
#include "ops_fixture.h"

namespace depengine::test {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// test_outer: (n,) x (m,) -> (n, m), out[i][j] = lhs[i] * rhs[j]; a binary
// shape function and a gradient that reads both inputs.
TShape OuterShape(const TShape& lhs, const TShape& rhs, const EnvArguments&) {
  if (lhs.ndim() != 1 || rhs.ndim() != 1) {
    throw ShapeError("test_outer: lhs " + lhs.ToString() + " and rhs " + rhs.ToString() +
                     " must be 1-D");
  }
  return TShape{lhs[0], rhs[0]};
}
void Outer(const TBlob& lhs, const TBlob& rhs, const EnvArguments&, TBlob* ret, OpReqType req,
           RunContext) {
  SwitchType(ret->type_flag_, [&](auto tag) {
    using T = decltype(tag);
    const std::size_t n = lhs.Size(), m = rhs.Size();
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < m; ++j)
        Assign(ret->dptr<T>()[i * m + j], req, lhs.dptr<T>()[i] * rhs.dptr<T>()[j]);
    }
  });
}
void OuterGrad(const OutputGrad& g, const Input0& lhs, const Input1& rhs, const EnvArguments&,
               TBlob* gl, TBlob* gr, OpReqType req_l, OpReqType req_r, RunContext) {
  SwitchType(gl->type_flag_, [&](auto tag) {
    using T = decltype(tag);
    const std::size_t n = lhs.data.Size(), m = rhs.data.Size();
    const T* gp = g.data.dptr<T>();
    for (std::size_t i = 0; i < n; ++i) {
      T s = 0;
      for (std::size_t j = 0; j < m; ++j) s += gp[i * m + j] * rhs.data.dptr<T>()[j];
      Assign(gl->dptr<T>()[i], req_l, s);
    }
    for (std::size_t j = 0; j < m; ++j) {
      T s = 0;
      for (std::size_t i = 0; i < n; ++i) s += gp[i * m + j] * lhs.data.dptr<T>()[i];
      Assign(gr->dptr<T>()[j], req_r, s);
    }
  });
}
DEPENGINE_REGISTER_SIMPLE_OP(test_outer)
    .set_shape_function(OuterShape)
    .set_function(DeviceType::kCPU, Outer)
    .set_gradient(DeviceType::kCPU, OuterGrad)
    .describe("outer product");

// test_exp_sum: exp(lhs + rhs); both gradients are out_grad * output (a
// binary T1 gradient), in place over out_grad allowed.
void ExpSum(const TBlob& lhs, const TBlob& rhs, const EnvArguments&, TBlob* ret, OpReqType req,
            RunContext) {
  SwitchType(ret->type_flag_, [&](auto tag) {
    using T = decltype(tag);
    for (std::size_t i = 0; i < ret->Size(); ++i)
      Assign(ret->dptr<T>()[i], req, std::exp(lhs.dptr<T>()[i] + rhs.dptr<T>()[i]));
  });
}
void ExpSumGrad(const OutputGrad& g, const OutputValue& y, const EnvArguments&, TBlob* gl,
                TBlob* gr, OpReqType req_l, OpReqType req_r, RunContext) {
  SwitchType(gl->type_flag_, [&](auto tag) {
    using T = decltype(tag);
    for (std::size_t i = 0; i < gl->Size(); ++i) {
      const T d = g.data.dptr<T>()[i] * y.data.dptr<T>()[i];
      Assign(gr->dptr<T>()[i], req_r, d);  // rhs first: lhs_grad may be out_grad's memory
      Assign(gl->dptr<T>()[i], req_l, d);
    }
  });
}
DEPENGINE_REGISTER_SIMPLE_OP(test_exp_sum)
    .set_function(DeviceType::kCPU, ExpSum)
    .set_gradient(DeviceType::kCPU, ExpSumGrad, kInplaceOutLhs)
    .describe("exp(lhs + rhs)");

// test_plus_one: x + 1, not in place, with a gradient not in place either.
void PlusOne(const TBlob& src, const EnvArguments&, TBlob* ret, OpReqType req, RunContext) {
  SwitchType(ret->type_flag_, [&](auto tag) {
    using T = decltype(tag);
    for (std::size_t i = 0; i < ret->Size(); ++i)
      Assign(ret->dptr<T>()[i], req, static_cast<T>(src.dptr<T>()[i] + 1));
  });
}
void PassGrad(const OutputGrad& g, const EnvArguments&, TBlob* gx, OpReqType req, RunContext) {
  SwitchType(gx->type_flag_, [&](auto tag) {
    using T = decltype(tag);
    for (std::size_t i = 0; i < gx->Size(); ++i) Assign(gx->dptr<T>()[i], req, g.data.dptr<T>()[i]);
  });
}
DEPENGINE_REGISTER_SIMPLE_OP(test_plus_one)
    .set_function(DeviceType::kCPU, PlusOne)
    .set_gradient(DeviceType::kCPU, PassGrad)
    .describe("x + 1");

// test_no_gradient: x + 1 without a gradient function.
DEPENGINE_REGISTER_SIMPLE_OP(test_no_gradient)
    .set_function(DeviceType::kCPU, PlusOne)
    .describe("x + 1, no gradient");

// test_uses_temp: x + 1, asking for temporary space.
DEPENGINE_REGISTER_SIMPLE_OP(test_uses_temp)
    .set_function(DeviceType::kCPU, PlusOne)
    .set_resource_request(ResourceRequest::kTempSpace)
    .describe("x + 1 with a kTempSpace request");

void NoUnaryGrad(const OutputGrad&, const EnvArguments&, TBlob*, OpReqType, RunContext) {}
void NoBinaryGrad(const OutputGrad&, const EnvArguments&, TBlob*, TBlob*, OpReqType, OpReqType,
                  RunContext) {}

class SimpleOpChecksTest : public EngineTest {
 protected:
  NDArray Make(std::vector<float> v, TShape s) {
    NDArray a(s, Context::CPU(), engine());
    a.SyncCopyFromCPU(v.data(), v.size());
    return a;
  }
};

// A binary shape function gives the output shape, on NDArrays and in the
// operator adapter (which then does not equate the input shapes), and its
// ShapeError reaches the caller.
TEST_P(SimpleOpChecksTest, BinaryShapeFunctionGivesTheOutputShape) {
  const auto& outer = SimpleOpRegistry::Get("test_outer");
  EXPECT_TRUE(outer.has_shape_function());
  EXPECT_EQ(outer.num_inputs(), 2);
  NDArray a = Make({1, 2}, {2}), b = Make({3, -1, 0.5f}, {3});
  NDArray y = outer.Invoke({a, b});
  EXPECT_EQ(y.shape(), (TShape{2, 3}));
  EXPECT_THAT(y.ToVector(), ElementsAre(3, -1, 0.5, 6, -2, 1));
  EXPECT_THAT(Raised<ShapeError>([&] {
                outer.Invoke({y, b});
              }),
              HasSubstr("test_outer: lhs (2,3) and rhs (3,) must be 1-D"));

  auto prop = OperatorProperty::Create("test_outer");
  std::vector<TShape> in{TShape{4}, TShape{5}}, out, aux;
  ASSERT_TRUE(prop->InferShape(&in, &out, &aux));
  EXPECT_EQ(out[0], (TShape{4, 5}));
  in = {TShape{4}, TShape{}};  // no default shape rule fills rhs
  EXPECT_FALSE(prop->InferShape(&in, &out, &aux));
  CheckGradient(engine(), resources(), {.op = "test_outer", .in_shapes = {TShape{3}, TShape{2}}});
}

// A binary gradient that needs the output value (T1): declared as out_grad
// and out_data, and right against finite differences.
TEST_P(SimpleOpChecksTest, BinaryGradientFromTheOutputValue) {
  const auto& e = SimpleOpRegistry::Get("test_exp_sum");
  EXPECT_EQ(e.grad_kind(), SimpleOpGradKind::kOutValue);
  EXPECT_EQ(e.backward_inplace(), kInplaceOutLhs);
  auto prop = OperatorProperty::Create("test_exp_sum");
  EXPECT_THAT(prop->DeclareBackwardDependency({0}, {1, 2}, {3}), ElementsAre(0, 3));
  CheckGradient(engine(), resources(), {.op = "test_exp_sum", .in_shapes = {TShape{2, 3}}});
}

// Writing into an input whose storage the op may not overwrite in place
// (no in-place option, or the output is also the other input) goes
// through a temporary, and gives the serial result.
TEST_P(SimpleOpChecksTest, WritingIntoAnInputWithoutInPlaceUsesATemporary) {
  NDArray a = Make({1, 2, 3}, {3});
  NDArray out = a;
  SimpleOpRegistry::Get("test_plus_one").Invoke({a}, {}, &out);
  EXPECT_TRUE(out.SharesStorageWith(a));
  EXPECT_THAT(a.ToVector(), ElementsAre(2, 3, 4));
  // elemwise_mul may write over lhs in place, but here rhs is lhs too.
  SimpleOpRegistry::Get("elemwise_mul").Invoke({a, a}, {}, &out);
  EXPECT_THAT(a.ToVector(), ElementsAre(4, 9, 16));
  // Into a view of the input that is not the input itself.
  NDArray b = Make({1, 2, 3, 4}, {4});
  NDArray lo = b.Slice(0, 2), hi = b.Slice(2, 4);
  SimpleOpRegistry::Get("test_plus_one").Invoke({lo}, {}, &hi);
  EXPECT_THAT(b.ToVector(), ElementsAre(1, 2, 2, 3));
}

// Inputs of different types, contexts or engines, an output array of
// another shape or type, a scalar that is not a number: each raises naming
// the op and the problem, and writes nothing.
TEST_P(SimpleOpChecksTest, InvokeRejectsArraysAndArgumentsThatDoNotFit) {
  const auto& add = SimpleOpRegistry::Get("elemwise_add");
  NDArray a = Make({1, 2, 3}, {3});
  NDArray wide(TShape{3}, Context::CPU(), engine(), kFloat64);
  wide = 1.0;
  NDArray cpu1(TShape{3}, Context::CPU(1), engine());
  cpu1 = 1.0;
  for (const NDArray* other : {&wide, &cpu1}) {
    EXPECT_THAT(Raised<std::invalid_argument>([&] {
                  add.Invoke({a, *other});
                }),
                HasSubstr("elemwise_add: inputs must share engine, context and type"));
  }
  NDArray short_out = Make({7, 7}, {2});
  EXPECT_THAT(Raised<ShapeError>([&] {
                add.Invoke({a, a}, {}, &short_out);
              }),
              HasSubstr("elemwise_add: the output array has shape (2,) (float32) but the result "
                        "has shape (3,) (float32)"));
  NDArray wide_out(TShape{3}, Context::CPU(), engine(), kFloat64);
  wide_out = 7.0;
  EXPECT_THAT(Raised<ShapeError>([&] {
                add.Invoke({a, a}, {}, &wide_out);
              }),
              HasSubstr("has shape (3,) (float64) but the result has shape (3,) (float32)"));
  EXPECT_THAT(short_out.ToVector(), ElementsAre(7, 7));
  EXPECT_THAT(wide_out.ToVector<double>(), ::testing::Each(7.0));

  const auto& mul = SimpleOpRegistry::Get("_mul_scalar");
  EXPECT_THAT(Raised<ParamError>([&] {
                mul.Invoke({a}, {.kwargs = {{"scalar", "two"}}});
              }),
              HasSubstr("_mul_scalar: parameter 'scalar' expects a number, got 'two'"));
  EXPECT_THAT(mul.Invoke({a}, {.kwargs = {{"scalar", "2"}}}).ToVector(), ElementsAre(2, 4, 6));
  EXPECT_THAT(a.ToVector(), ElementsAre(1, 2, 3));
}

// An op that asks for resources takes them from the caller's manager (or
// ResourceManager::Get()), which must be on the arrays' engine.
TEST_P(SimpleOpChecksTest, ResourcesMustComeFromTheArraysEngine) {
  const auto& op = SimpleOpRegistry::Get("test_uses_temp");
  NDArray a = Make({1, 2}, {2});
  EngineOptions o;
  o.kind = EngineKind::kNaive;
  auto other_engine = CreateEngine(o);
  {
    ResourceManager other(other_engine.get());
    EXPECT_THAT(Raised<std::invalid_argument>([&] { op.Invoke({a}, {.resources = &other}); }),
                HasSubstr("test_uses_temp: the resource manager and the arrays belong to "
                          "different engines"));
  }
  other_engine->WaitForAll();
  // No manager: ResourceManager::Get(), on Engine::Get(), not this engine.
  EXPECT_THAT(Raised<std::invalid_argument>([&] { op.Invoke({a}); }),
              HasSubstr("different engines"));
  EXPECT_THAT(op.Invoke({a}, {.resources = resources()}).ToVector(), ElementsAre(2, 3));
}

DEPENGINE_INSTANTIATE_ENGINE_TEST(SimpleOpChecksTest);

// In-place options are per arity: a binary forward takes kInplaceLhsOut, a
// unary gradient kInplaceOutIn, a binary gradient kInplaceOutLhs.
TEST(SimpleOpChecks, InPlaceOptionsMustFitTheArity) {
  SimpleOpRegEntry unary("test_unary_inplace");
  unary.set_function(DeviceType::kCPU, PlusOne);
  EXPECT_THAT(Raised<std::logic_error>(
                  [&] { unary.set_gradient(DeviceType::kCPU, NoUnaryGrad, kInplaceOutLhs); }),
              HasSubstr("SimpleOp test_unary_inplace: a unary gradient accepts kNoInplace or "
                        "kInplaceOutIn"));
  SimpleOpRegEntry binary("test_binary_inplace");
  EXPECT_THAT(Raised<std::logic_error>(
                  [&] { binary.set_function(DeviceType::kCPU, ExpSum, kInplaceInOut); }),
              HasSubstr("SimpleOp test_binary_inplace: a binary function accepts kNoInplace or "
                        "kInplaceLhsOut"));
  binary.set_function(DeviceType::kCPU, ExpSum, kInplaceLhsOut);
  EXPECT_THAT(Raised<std::logic_error>(
                  [&] { binary.set_gradient(DeviceType::kCPU, NoBinaryGrad, kInplaceOutIn); }),
              HasSubstr("a binary gradient accepts kNoInplace or kInplaceOutLhs"));
  EXPECT_EQ(binary.grad_kind(), SimpleOpGradKind::kNone);  // the refused call set nothing
  binary.set_gradient(DeviceType::kCPU, ExpSumGrad, kInplaceOutLhs);
  EXPECT_EQ(binary.grad_kind(), SimpleOpGradKind::kOutValue);
  EXPECT_EQ(binary.backward_inplace(), kInplaceOutLhs);
}

// The entry's own calls check what they are given: the number of input
// shapes, a forward function to call, a gradient function to call.
TEST(SimpleOpChecks, EntryCallsWithoutTheFunctionsRaise) {
  EXPECT_THAT(
      Raised<ShapeError>([] { SimpleOpRegistry::Get("elemwise_add").InferShape({TShape{2}}, {}); }),
      HasSubstr("elemwise_add: expected 2 inputs, got 1"));
  SimpleOpRegEntry shape_only("test_shape_only");
  shape_only.set_shape_function(OuterShape);
  EXPECT_EQ(shape_only.num_inputs(), 2);
  EXPECT_EQ(shape_only.InferShape({TShape{2}, TShape{3}}, {}), (TShape{2, 3}));
  std::vector<float> x{1, 2}, y{0, 0, 0, 0};
  TBlob bx(x.data(), TShape{2}, kFloat32), by(y.data(), TShape{2, 2}, kFloat32);
  EXPECT_THAT(Raised<std::logic_error>([&] {
                shape_only.CallForward({bx, bx}, {}, &by, kWriteTo, RunContext{});
              }),
              HasSubstr("SimpleOp test_shape_only: no forward function"));
  TBlob gx = bx;
  OutputGrad og;
  og.data = bx;
  EXPECT_THAT(Raised<std::logic_error>([&] {
                SimpleOpRegistry::Get("test_no_gradient")
                    .CallBackward(og, {}, {bx}, {}, {&gx}, {kWriteTo}, RunContext{});
              }),
              HasSubstr("SimpleOp test_no_gradient: no gradient function"));
  EXPECT_THAT(x, ElementsAre(1, 2));
  EXPECT_THAT(y, ElementsAre(0, 0, 0, 0));
}

// The operator adapter: a scalar that is not a number, the wrong number of
// input shapes and a GPU context are errors naming the op; Copy gives an
// independent property with the same parameters; the declarations of an
// op without a gradient, or without a backward in-place option, are empty.
TEST(SimpleOpChecks, OperatorAdapterChecksAndDeclarations) {
  EXPECT_THAT(Raised<ParamError>([] {
                OperatorProperty::Create("_mul_scalar", {{"scalar", "1.5x"}});
              }),
              HasSubstr("_mul_scalar: parameter 'scalar' expects a number, got '1.5x'"));
  auto neg = OperatorProperty::Create("negative", {});
  std::vector<TShape> in{TShape{2}, TShape{2}}, out, aux;
  EXPECT_THAT(Raised<ShapeError>([&] { neg->InferShape(&in, &out, &aux); }),
              HasSubstr("negative: expected 1 inputs"));
  EXPECT_THAT(Raised<std::invalid_argument>([&] { neg->CreateOperator(Context::GPU(0)); }),
              HasSubstr("negative: no GPU function in this build"));

  auto mul = OperatorProperty::Create("_mul_scalar", {{"scalar", "2.5"}});
  auto copy = mul->Copy();
  EXPECT_EQ(copy->TypeString(), "_mul_scalar");
  EXPECT_EQ(copy->GetParams(), mul->GetParams());
  copy->Init({{"scalar", "4"}});
  EXPECT_EQ(copy->GetParams().at("scalar"), "4");
  EXPECT_EQ(mul->GetParams().at("scalar"), "2.5");

  auto no_grad = OperatorProperty::Create("test_no_gradient");
  EXPECT_TRUE(no_grad->DeclareBackwardDependency({0}, {1}, {2}).empty());
  int slot = 0;
  auto plus = OperatorProperty::Create("test_plus_one");
  EXPECT_TRUE(plus->BackwardInplaceOption({0}, {1}, {2}, {&slot}).empty());
  // negative's gradient may overwrite out_grad in place: (out_grad, in_grad).
  const auto pairs = neg->BackwardInplaceOption({0}, {1}, {2}, {&slot});
  ASSERT_EQ(pairs.size(), 1u);
  EXPECT_EQ(pairs[0].first, 0);
  EXPECT_EQ(pairs[0].second, &slot);
}

}  // namespace
}  // namespace depengine::test
