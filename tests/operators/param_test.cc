// The operator registry, typed parameters and their errors, shape errors,
// and the declared backward dependencies.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "depengine/operator.h"
#include "depengine/optimizer.h"
#include "depengine/simple_op.h"

namespace depengine::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// What a call throws, as text; "" when it does not throw E.
template <class E, class F>
std::string ErrorOf(F f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

TEST(Registry, ListsBuiltinsAndRejectsUnknownNames) {
  const auto names = OperatorRegistry::ListNames();
  for (const char* n : {"FullyConnected", "Activation", "SoftmaxOutput", "Pooling", "Dropout",
                        "elemwise_add", "smooth_l1"}) {
    EXPECT_THAT(names, ::testing::Contains(std::string(n)));
  }
  EXPECT_THAT(ErrorOf<std::invalid_argument>([] { OperatorProperty::Create("FullyConected"); }),
              AllOf(HasSubstr("unknown operator 'FullyConected'"), HasSubstr("FullyConnected")));
  EXPECT_THROW(OperatorRegistry::Register("Pooling", nullptr), std::invalid_argument);
  EXPECT_THROW(SimpleOpRegistry::Register("Pooling"), std::invalid_argument);
}

// A registration whose factory is empty, or returns no property, is an
// error that names the operator, not a std::bad_function_call or a crash.
TEST(Registry, EmptyFactoriesAreErrorsNamingTheOperator) {
  EXPECT_THAT(ErrorOf<std::invalid_argument>(
                  [] { OperatorRegistry::Register("test_registry_empty_factory", nullptr); }),
              HasSubstr("'test_registry_empty_factory'"));
  EXPECT_EQ(OperatorRegistry::Find("test_registry_empty_factory"), nullptr);
  // Registered once per process: the registry refuses a name twice, and
  // --gtest_repeat runs this body again.
  if (OperatorRegistry::Find("test_registry_null_property") == nullptr) {
    OperatorRegistry::Register("test_registry_null_property",
                               [] { return std::unique_ptr<OperatorProperty>(); });
  }
  EXPECT_THAT(
      ErrorOf<std::logic_error>([] { OperatorProperty::Create("test_registry_null_property"); }),
      HasSubstr("'test_registry_null_property'"));
  EXPECT_THAT(ErrorOf<std::logic_error>(
                  [] { OperatorProperty::Create("test_registry_null_property", {}); }),
              HasSubstr("'test_registry_null_property'"));
}

TEST(Params, MissingBadAndUnknownParametersNameEverything) {
  EXPECT_THAT(ErrorOf<ParamError>([] { OperatorProperty::Create("FullyConnected", {}); }),
              AllOf(HasSubstr("FullyConnected"), HasSubstr("required parameter 'num_hidden'"),
                    HasSubstr("an integer >= 1")));
  EXPECT_THAT(ErrorOf<ParamError>([] {
                OperatorProperty::Create("FullyConnected", {{"num_hidden", "abc"}});
              }),
              AllOf(HasSubstr("FullyConnected"), HasSubstr("'num_hidden'"),
                    HasSubstr("an integer >= 1"), HasSubstr("got 'abc'")));
  EXPECT_THAT(ErrorOf<ParamError>([] {
                OperatorProperty::Create("FullyConnected", {{"num_hidden", "0"}});
              }),
              HasSubstr("got '0'"));
  EXPECT_THAT(
      ErrorOf<ParamError>([] {
        OperatorProperty::Create("FullyConnected", {{"num_hidden", "2"}, {"no_bias", "maybe"}});
      }),
      AllOf(HasSubstr("'no_bias'"), HasSubstr("a boolean")));
  EXPECT_THAT(ErrorOf<ParamError>([] {
                OperatorProperty::Create("Activation", {{"act_type", "relux"}});
              }),
              AllOf(HasSubstr("Activation"), HasSubstr("'act_type'"),
                    HasSubstr("one of relu, sigmoid, tanh"), HasSubstr("got 'relux'")));
  EXPECT_THAT(ErrorOf<ParamError>([] {
                OperatorProperty::Create("Activation", {{"act_type", "relu"}, {"slope", "2"}});
              }),
              AllOf(HasSubstr("Activation"), HasSubstr("unknown parameter 'slope'"),
                    HasSubstr("act_type")));
  EXPECT_THAT(ErrorOf<ParamError>([] {
                OperatorProperty::Create("Pooling", {{"kernel", "(2,)"}});
              }),
              AllOf(HasSubstr("Pooling"), HasSubstr("'kernel'"), HasSubstr("2-D")));
  EXPECT_THAT(ErrorOf<ParamError>([] {
                OperatorProperty::Create("Dropout", {{"p", "1.5"}});
              }),
              AllOf(HasSubstr("Dropout"), HasSubstr("'p'"), HasSubstr("in [0, 1]")));
  EXPECT_THAT(ErrorOf<ParamError>([] { OperatorProperty::Create("smooth_l1", {}); }),
              AllOf(HasSubstr("smooth_l1"), HasSubstr("'scalar'")));
  EXPECT_THAT(ErrorOf<ParamError>([] {
                OperatorProperty::Create("elemwise_add", {{"scalar", "1"}});
              }),
              AllOf(HasSubstr("elemwise_add"), HasSubstr("'scalar'")));
  EXPECT_THAT(
      ErrorOf<ParamError>([] {
        OperatorProperty::Create("Activation", {{"act_type", "relu"}, {"act_type", "tanh"}});
      }),
      HasSubstr("given twice"));
}

// NaN compares false against both bounds and used to pass every range
// check; infinities are rejected by a bounded field too. The error names the
// field and the value.
TEST(Params, NanAndInfinityFailRangeChecks) {
  for (const char* v : {"nan", "NaN", "-nan", "inf", "-inf", "infinity"}) {
    SCOPED_TRACE(v);
    EXPECT_THAT(ErrorOf<ParamError>([&] {
                  OperatorProperty::Create("Dropout", {{"p", v}});
                }),
                AllOf(HasSubstr("Dropout"), HasSubstr("'p'"), HasSubstr("finite number in [0, 1]"),
                      HasSubstr(std::string("got '") + v + "'")));
    SGDParam s;
    EXPECT_THAT(ErrorOf<ParamError>([&] {
                  SGDParam::Schema().Init(&s, {{"momentum", v}}, "sgd");
                }),
                AllOf(HasSubstr("'momentum'"), HasSubstr(std::string("got '") + v + "'")));
    EXPECT_THAT(ErrorOf<ParamError>([&] {
                  SGDParam::Schema().Init(&s, {{"lr", v}}, "sgd");
                }),
                AllOf(HasSubstr("'lr'"), HasSubstr("finite number >= 0"),
                      HasSubstr(std::string("got '") + v + "'")));
  }
  // An unbounded number field takes infinities but not NaN, unless it is
  // marked finite (rescale_grad: an infinite factor turns a zero gradient
  // into NaN).
  SGDParam s;
  EXPECT_THAT(ErrorOf<ParamError>([&] {
                SGDParam::Schema().Init(&s, {{"clip_gradient", "nan"}}, "sgd");
              }),
              AllOf(HasSubstr("'clip_gradient'"), HasSubstr("got 'nan'")));
  for (const char* v : {"nan", "inf", "-inf"}) {
    EXPECT_THAT(ErrorOf<ParamError>([&] {
                  SGDParam::Schema().Init(&s, {{"rescale_grad", v}}, "sgd");
                }),
                AllOf(HasSubstr("'rescale_grad'"), HasSubstr("a finite number"),
                      HasSubstr(std::string("got '") + v + "'")));
  }
  SGDParam::Schema().Init(&s, {{"clip_gradient", "inf"}, {"momentum", "1"}, {"lr", "0"}}, "sgd");
  EXPECT_TRUE(std::isinf(s.clip_gradient));
  EXPECT_EQ(s.momentum, 1.0f);
}

// Pooling with pad >= kernel in a dimension has windows that lie entirely
// in the padding (max pooling returned -FLT_MAX there): rejected, naming both
// fields, as MXNet does.
TEST(Params, PoolingPadMustBeSmallerThanKernel) {
  EXPECT_THAT(ErrorOf<ParamError>([] {
                OperatorProperty::Create("Pooling", {{"kernel", "(1,1)"}, {"pad", "(1,1)"}});
              }),
              AllOf(HasSubstr("Pooling"), HasSubstr("'pad' (1,1)"), HasSubstr("'kernel' (1,1)")));
  EXPECT_THAT(ErrorOf<ParamError>([] {
                OperatorProperty::Create("Pooling", {{"kernel", "(3,2)"}, {"pad", "(0,2)"}});
              }),
              AllOf(HasSubstr("'pad' (0,2)"), HasSubstr("'kernel' (3,2)")));
  auto p = OperatorProperty::Create("Pooling",
                                    {{"kernel", "(3,2)"}, {"pad", "(2,1)"}, {"pool_type", "max"}});
  EXPECT_EQ(p->GetParams().at("pad"), "(2,1)");
}

TEST(Params, GetParamsRoundTrips) {
  auto p = OperatorProperty::Create("Pooling", {{"kernel", "(3,3)"}, {"pool_type", "avg"}});
  const auto params = p->GetParams();
  EXPECT_EQ(params.at("kernel"), "(3,3)");
  EXPECT_EQ(params.at("pool_type"), "avg");
  EXPECT_EQ(params.at("stride"), "(1,1)");
  KwArgs kw(params.begin(), params.end());
  auto q = OperatorProperty::Create("Pooling", kw);
  EXPECT_EQ(q->GetParams(), params);
  auto copy = q->Copy();
  EXPECT_EQ(copy->GetParams(), params);
  EXPECT_EQ(copy->TypeString(), "Pooling");
  auto s = OperatorProperty::Create("smooth_l1", {{"scalar", "3"}});
  EXPECT_EQ(s->GetParams().at("scalar"), "3");
}

TEST(Shapes, InferenceFillsWeightsAndErrorsNameOperatorAndShapes) {
  auto fc = OperatorProperty::Create("FullyConnected", {{"num_hidden", "10"}});
  EXPECT_THAT(fc->ListArguments(), ::testing::ElementsAre("data", "weight", "bias"));
  std::vector<TShape> in{TShape{5, 4}, TShape(), TShape()}, out(1), aux;
  ASSERT_TRUE(fc->InferShape(&in, &out, &aux));
  EXPECT_EQ(in[1], (TShape{10, 4}));
  EXPECT_EQ(in[2], (TShape{10}));
  EXPECT_EQ(out[0], (TShape{5, 10}));

  std::vector<TShape> unknown{TShape(), TShape(), TShape()};
  EXPECT_FALSE(fc->InferShape(&unknown, &out, &aux));

  std::vector<TShape> bad{TShape{5, 4}, TShape{3, 4}, TShape()};
  EXPECT_THAT(ErrorOf<ShapeError>([&] { fc->InferShape(&bad, &out, &aux); }),
              AllOf(HasSubstr("FullyConnected"), HasSubstr("weight"), HasSubstr("(3,4)"),
                    HasSubstr("(10,4)")));

  auto pool = OperatorProperty::Create("Pooling", {{"kernel", "(2,2)"}});
  std::vector<TShape> three_d{TShape{1, 4, 4}}, pout;
  EXPECT_THAT(ErrorOf<ShapeError>([&] { pool->InferShape(&three_d, &pout, &aux); }),
              AllOf(HasSubstr("Pooling"), HasSubstr("(1,4,4)")));
  auto big = OperatorProperty::Create("Pooling", {{"kernel", "(5,5)"}});
  std::vector<TShape> small{TShape{1, 1, 4, 4}};
  EXPECT_THAT(ErrorOf<ShapeError>([&] { big->InferShape(&small, &pout, &aux); }),
              AllOf(HasSubstr("Pooling"), HasSubstr("(5,5)"), HasSubstr("(1,1,4,4)")));

  auto add = OperatorProperty::Create("elemwise_add");
  std::vector<TShape> mismatch{TShape{2, 3}, TShape{3, 2}}, aout;
  EXPECT_THAT(ErrorOf<ShapeError>([&] { add->InferShape(&mismatch, &aout, &aux); }),
              AllOf(HasSubstr("elemwise_add"), HasSubstr("(2,3)"), HasSubstr("(3,2)")));
  // The default simple-op shape flows from a known input to the other.
  std::vector<TShape> half{TShape{2, 3}, TShape()};
  ASSERT_TRUE(add->InferShape(&half, &aout, &aux));
  EXPECT_EQ(half[1], (TShape{2, 3}));
}

TEST(Dependencies, DeclaredBackwardInputs) {
  // ids: out_grad 0, in_data 1..3, out_data 4.
  auto fc = OperatorProperty::Create("FullyConnected", {{"num_hidden", "2"}});
  EXPECT_THAT(fc->DeclareBackwardDependency({0}, {1, 2, 3}, {4}), ::testing::ElementsAre(0, 1, 2));
  std::vector<std::string> names =
      fc->BackwardInputs<std::string>({"og"}, {"data", "weight", "bias"}, {"out"});
  EXPECT_THAT(names, ::testing::ElementsAre("og", "data", "weight"));

  auto pool = OperatorProperty::Create("Pooling", {{"kernel", "(2,2)"}});
  EXPECT_THAT(pool->DeclareBackwardDependency({0}, {1}, {2}), ::testing::ElementsAre(0, 1, 2));
  auto act = OperatorProperty::Create("Activation", {{"act_type", "tanh"}});
  EXPECT_THAT(act->DeclareBackwardDependency({0}, {1}, {2}), ::testing::ElementsAre(0, 2));
  int out_tag = 0;
  auto inplace = act->ForwardInplaceOption({1}, {&out_tag});
  ASSERT_EQ(inplace.size(), 1u);
  EXPECT_EQ(inplace[0].first, 1);
  EXPECT_EQ(inplace[0].second, &out_tag);

  // Simple ops: by gradient kind.
  auto sl1 = OperatorProperty::Create("smooth_l1", {{"scalar", "1"}});
  EXPECT_THAT(sl1->DeclareBackwardDependency({0}, {1}, {2}), ::testing::ElementsAre(0, 1));
  EXPECT_TRUE(sl1->ForwardInplaceOption({1}, {&out_tag}).empty());
  EXPECT_EQ(sl1->BackwardInplaceOption({0}, {1}, {2}, {&out_tag}).size(), 1u);
  auto ex = OperatorProperty::Create("exp");
  EXPECT_THAT(ex->DeclareBackwardDependency({0}, {1}, {2}), ::testing::ElementsAre(0, 2));
  auto add = OperatorProperty::Create("elemwise_add");
  EXPECT_THAT(add->DeclareBackwardDependency({0}, {1, 2}, {3}), ::testing::ElementsAre(0));

  auto drop = OperatorProperty::Create("Dropout", {});
  EXPECT_EQ(drop->NumOutputs(), 2);
  EXPECT_EQ(drop->NumVisibleOutputs(), 1);
  ASSERT_EQ(drop->ForwardResource({TShape{2}}).size(), 1u);
  EXPECT_EQ(drop->ForwardResource({TShape{2}})[0].type, ResourceRequest::kRandom);
}

// A user-defined property registered with the macro, from a test file.
struct ScaleParam {
  double factor = 1;
  static const ParamSchema<ScaleParam>& Schema() {
    static const ParamSchema<ScaleParam> s = [] {
      ParamSchema<ScaleParam> s;
      s.Field("factor", &ScaleParam::factor).set_default(1.0);
      return s;
    }();
    return s;
  }
};
class TestScaleProp : public OperatorProperty {
 public:
  void Init(const KwArgs& kw) override { ScaleParam::Schema().Init(&p_, kw, "TestScale"); }
  std::map<std::string, std::string> GetParams() const override {
    return ScaleParam::Schema().ToMap(p_);
  }
  bool InferShape(std::vector<TShape>* in, std::vector<TShape>* out,
                  std::vector<TShape>*) const override {
    out->resize(1);
    if (!(*in)[0].known()) return false;
    ShapeAssign("TestScale", "output", &(*out)[0], (*in)[0]);
    return true;
  }
  std::unique_ptr<OperatorProperty> Copy() const override {
    return std::make_unique<TestScaleProp>(*this);
  }
  Operator* CreateOperator(Context) const override { return nullptr; }
  std::string TypeString() const override { return "TestScale"; }

 private:
  ScaleParam p_;
};
DEPENGINE_REGISTER_OP_PROPERTY(TestScale, TestScaleProp);

TEST(Registry, MacroRegistration) {
  auto p = OperatorProperty::Create("TestScale", {{"factor", "2.5"}});
  EXPECT_EQ(p->GetParams().at("factor"), "2.5");
  EXPECT_THAT(OperatorRegistry::ListNames(), ::testing::Contains(std::string("TestScale")));
}

}  // namespace
}  // namespace depengine::test
