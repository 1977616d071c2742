// SimpleOp: one registration usable on NDArrays and as an Operator; shape
// functions, kwargs, resources, in-place writes, registration errors.
#include "depengine/simple_op.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <new>
#include <stdexcept>
#include <thread>
#include <vector>

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

// test_temp_spaces: three kTempSpace requests in one function, the last
// larger than the buffer; fills each with its own value and returns their
// sum (6 everywhere) after all three are written. Records where the three
// pieces were (functions using the resource are serialized by its var; a
// test reads this after waiting for the output).
struct TempSpaceUse {
  std::uintptr_t begin[3];
  std::uintptr_t end[3];
};
std::vector<TempSpaceUse> temp_space_uses;
void TempSpaces(const TBlob& src, const EnvArguments& env, TBlob* ret, OpReqType req, RunContext) {
  const std::size_t n = ret->Size();
  const std::size_t counts[3] = {n, n, 64 * n};
  float* p[3];
  TempSpaceUse use;
  for (int k = 0; k < 3; ++k) {
    p[k] = static_cast<float*>(env.resource[0].get_space_bytes(counts[k] * sizeof(float)));
    for (std::size_t i = 0; i < counts[k]; ++i) p[k][i] = static_cast<float>(k + 1);
    use.begin[k] = reinterpret_cast<std::uintptr_t>(p[k]);
    use.end[k] = use.begin[k] + counts[k] * sizeof(float);
  }
  temp_space_uses.push_back(use);
  for (std::size_t i = 0; i < n; ++i)
    Assign(ret->dptr<float>()[i], req, src.dptr<float>()[i] * 0 + p[0][i] + p[1][i] + p[2][i]);
}

// test_fail_negative: throws on a negative input, else draws noise; uses
// both kinds of resource.
void FailNegative(const TBlob& src, const EnvArguments& env, TBlob* ret, OpReqType, RunContext) {
  for (std::size_t i = 0; i < src.Size(); ++i) {
    if (src.dptr<float>()[i] < 0) throw std::domain_error("test_fail_negative: negative input");
  }
  env.resource[1].get_space_bytes(ret->Size() * sizeof(float));
  env.resource[0].get_random()->SampleUniform(ret->dptr<float>(), ret->Size(), 0.f, 1.f);
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
DEPENGINE_REGISTER_SIMPLE_OP(test_fail_negative)
    .set_function(DeviceType::kCPU, FailNegative)
    .set_resource_request({ResourceRequest::kRandom, ResourceRequest::kTempSpace})
    .describe("fails on negative input");
DEPENGINE_REGISTER_SIMPLE_OP(test_temp_spaces)
    .set_function(DeviceType::kCPU, TempSpaces)
    .set_resource_request(ResourceRequest::kTempSpace)
    .describe("three temporary spaces in one function");

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

// Resource::get_space: every call in one function gets its own memory,
// valid until the function finishes, even when a later call outgrows the
// buffer; later functions reuse the memory (one buffer in steady state).
TEST_P(SimpleOpTest, TempSpaceCallsOfOneFunctionDoNotOverlap) {
  temp_space_uses.clear();
  NDArray x = Make(std::vector<float>(16, 0.f), {16});
  const auto& op = SimpleOpRegistry::Get("test_temp_spaces");
  for (int run = 0; run < 3; ++run) {
    NDArray y = op.Invoke({x}, {.resources = resources()});
    EXPECT_EQ(y.ToVector(), std::vector<float>(16, 6.f)) << "run " << run;
  }
  ASSERT_EQ(temp_space_uses.size(), 3u);
  for (const TempSpaceUse& u : temp_space_uses) {
    for (int a = 0; a < 3; ++a) {
      EXPECT_EQ(u.begin[a] % 64, 0u) << "piece " << a << " is not 64-byte aligned";
      for (int b = a + 1; b < 3; ++b) {
        EXPECT_TRUE(u.end[a] <= u.begin[b] || u.end[b] <= u.begin[a])
            << "pieces " << a << " and " << b << " of one function overlap";
      }
    }
  }
  // The second function found one buffer large enough for all three
  // pieces; the third reuses exactly the same memory.
  for (int k = 0; k < 3; ++k) EXPECT_EQ(temp_space_uses[2].begin[k], temp_space_uses[1].begin[k]);
}

// A failing operator that uses resources fails its output, not the
// resources: later, unrelated users of the generator and the temporary
// space run normally (without a WaitForAll in between).
TEST_P(SimpleOpTest, FailureDoesNotPoisonResources) {
  NDArray bad = Make({-1, -1, -1, -1}, {4});
  NDArray out =
      SimpleOpRegistry::Get("test_fail_negative").Invoke({bad}, {.resources = resources()});
  EXPECT_THROW(out.WaitToRead(), std::domain_error);
  for (int i = 0; i < 2; ++i) {
    NDArray r(TShape{4}, Context::CPU(), engine());
    SampleUniform(0, 1, &r, resources());
    EXPECT_NO_THROW(r.WaitToRead()) << "SampleUniform #" << i;
    NDArray y = SimpleOpRegistry::Get("test_temp_spaces").Invoke({r}, {.resources = resources()});
    std::vector<float> v;
    EXPECT_NO_THROW(v = y.ToVector()) << "temporary space user #" << i;
    EXPECT_EQ(v, std::vector<float>(4, 6.f));
  }
  // Again while the failure is still undelivered on the output.
  NDArray out2 =
      SimpleOpRegistry::Get("test_fail_negative").Invoke({bad}, {.resources = resources()});
  NDArray r(TShape{4}, Context::CPU(), engine());
  SampleUniform(0, 1, &r, resources());
  EXPECT_NO_THROW(r.WaitToRead());
  EXPECT_THROW(out2.WaitToRead(), std::domain_error);
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

void NoBinaryGrad(const OutputGrad&, const EnvArguments&, TBlob*, TBlob*, OpReqType, OpReqType,
                  RunContext) {}

TEST(SimpleOpRegistration, ContradictionsAreErrors) {
  SimpleOpRegEntry e("test_bad");
  e.set_function(DeviceType::kCPU, RowSum);
  EXPECT_THROW(e.set_gradient(DeviceType::kCPU, NoBinaryGrad), std::logic_error);
  EXPECT_THROW(e.set_function(DeviceType::kCPU, RowSum, kInplaceLhsOut), std::logic_error);
  EXPECT_THROW(e.set_function(DeviceType::kGPU, RowSum), std::logic_error);
  e.set_enable_scalar(true);
  EXPECT_THROW(e.set_enable_kwargs(true), std::logic_error);
  EXPECT_THROW(SimpleOpRegistry::Get("no_such_op"), std::invalid_argument);
}

// The function Invoke pushes does not point at the entry, so a local entry
// may go away first. Before, it called the entry's members when it ran
// (AddressSanitizer: stack-use-after-scope), and the engine kept a pointer
// to the entry's name.
std::atomic<bool> slow_copy_go{false};
void SlowCopy(const TBlob& src, const EnvArguments&, TBlob* ret, OpReqType req, RunContext) {
  while (!slow_copy_go.load(std::memory_order_acquire)) std::this_thread::yield();
  for (std::size_t i = 0; i < src.Size(); ++i)
    Assign(ret->dptr<float>()[i], req, src.dptr<float>()[i] + 1);
}
TEST(SimpleOpRegistration, LocalEntryMayGoAwayBeforeItsFunctionRuns) {
  EngineOptions options;
  options.kind = EngineKind::kPooled;
  options.cpu_worker_threads = 2;
  auto engine = CreateEngine(options);
  NDArray a(TShape{4}, Context::CPU(), engine.get());
  a = 1.0;
  NDArray out;
  alignas(SimpleOpRegEntry) unsigned char storage[sizeof(SimpleOpRegEntry)];
  auto* entry = new (storage) SimpleOpRegEntry("test_local_entry");
  entry->set_function(DeviceType::kCPU, SlowCopy);
  out = entry->Invoke({a});
  entry->~SimpleOpRegEntry();
  // Scribble over the dead entry, so that a late use of it reads garbage
  // even without a sanitizer.
  std::memset(storage, 0xff, sizeof storage);
  slow_copy_go.store(true, std::memory_order_release);
  EXPECT_THAT(out.ToVector(), ::testing::Each(2.0f));
}

// A null function pointer is refused when it is registered (it would be
// called on an engine worker), and an op without a forward function can be
// neither invoked (with no inputs it used to read inputs[0]) nor created
// as an operator: each a std::logic_error naming the op.
TEST(SimpleOpRegistration, NullFunctionsAndMissingForwardAreErrors) {
  auto message = [](auto f) {
    try {
      f();
    } catch (const std::logic_error& e) {
      return std::string(e.what());
    }
    return std::string("no std::logic_error");
  };
  using ::testing::HasSubstr;
  SimpleOpRegEntry e("test_null_functions");
  EXPECT_THAT(message([&] { e.set_function(DeviceType::kCPU, UnaryFunction{}); }),
              HasSubstr("test_null_functions"));
  EXPECT_THAT(message([&] { e.set_function(DeviceType::kCPU, BinaryFunction{}); }),
              HasSubstr("test_null_functions"));
  EXPECT_THAT(message([&] { e.set_gradient(DeviceType::kCPU, UnaryGradFunctionT0{}); }),
              HasSubstr("test_null_functions"));
  EXPECT_THAT(message([&] { e.set_gradient(DeviceType::kCPU, BinaryGradFunctionT2{}); }),
              HasSubstr("test_null_functions"));
  EXPECT_THAT(message([&] { e.set_shape_function(UnaryShapeFunction{}); }),
              HasSubstr("test_null_functions"));
  EXPECT_EQ(e.num_inputs(), 0);  // the refused calls set nothing

  // Registered once per process: the registry refuses a name twice, and
  // --gtest_repeat runs this body again.
  if (SimpleOpRegistry::Find("test_nothing_registered") == nullptr) {
    SimpleOpRegistry::Register("test_nothing_registered").describe("no functions");
    SimpleOpRegistry::Register("test_gradient_only").set_gradient(DeviceType::kCPU, RowSumGrad);
  }
  EngineOptions options;
  options.kind = EngineKind::kNaive;
  auto engine = CreateEngine(options);
  NDArray x(TShape{2, 2}, Context::CPU(), engine.get());
  x = 1.0;
  EXPECT_THAT(message([] { SimpleOpRegistry::Get("test_nothing_registered").Invoke({}); }),
              HasSubstr("test_nothing_registered: no forward function"));
  EXPECT_THAT(message([&] { SimpleOpRegistry::Get("test_gradient_only").Invoke({x}); }),
              HasSubstr("test_gradient_only: no forward function"));
  EXPECT_THAT(message([] { OperatorProperty::Create("test_nothing_registered"); }),
              HasSubstr("test_nothing_registered: no forward function"));
  EXPECT_THAT(message([] { OperatorProperty::Create("test_gradient_only"); }),
              HasSubstr("test_gradient_only: no forward function"));
}

}  // namespace
}  // namespace depengine::test
