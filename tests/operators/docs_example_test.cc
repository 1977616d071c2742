// The Scale operator of docs/operators.md, copied verbatim between the
// markers below, so the documentation's example is compiled and tested.
#include <gtest/gtest.h>

#include "depengine/executor.h"
#include "op_harness.h"
#include "ops_fixture.h"

namespace docs_example {
// --- begin docs/operators.md (its #include "depengine/operator.h" is above) ---
// clang-format off
using namespace depengine;

// 1. The parameters, described once. Init parses key=value strings into it
//    and reports bad, missing and unknown keys by name.
struct ScaleParam {
  double factor = 1;
  static const ParamSchema<ScaleParam>& Schema() {
    static const ParamSchema<ScaleParam> schema = [] {
      ParamSchema<ScaleParam> s;
      s.Field("factor", &ScaleParam::factor).set_default(1.0).set_lower_bound(0.0)
          .describe("the multiplier");
      return s;
    }();
    return schema;
  }
};

// 2. The computation.
class ScaleOp : public Operator {
 public:
  explicit ScaleOp(ScaleParam p) : p_(p) {}
  void Forward(const OpContext&, const std::vector<TBlob>& in, const std::vector<OpReqType>& req,
               const std::vector<TBlob>& out, const std::vector<TBlob>&) override {
    SwitchType(out[0].type_flag_, [&](auto tag) {
      using T = decltype(tag);
      const T* x = in[0].dptr<T>();
      T* y = out[0].dptr<T>();            // may be x itself (in place)
      for (std::size_t i = 0; i < out[0].Size(); ++i) Assign(y[i], req[0], T(p_.factor * x[i]));
    });
  }
  void Backward(const OpContext&, const std::vector<TBlob>& out_grad, const std::vector<TBlob>&,
                const std::vector<TBlob>&, const std::vector<OpReqType>& req,
                const std::vector<TBlob>& in_grad, const std::vector<TBlob>&) override {
    SwitchType(in_grad[0].type_flag_, [&](auto tag) {
      using T = decltype(tag);
      const T* g = out_grad[0].dptr<T>();
      T* gx = in_grad[0].dptr<T>();       // may be g itself (in place)
      for (std::size_t i = 0; i < in_grad[0].Size(); ++i) Assign(gx[i], req[0], T(p_.factor * g[i]));
    });
  }
 private:
  ScaleParam p_;
};

// 3. The description.
class ScaleProp : public OperatorProperty {
 public:
  void Init(const KwArgs& kw) override { ScaleParam::Schema().Init(&p_, kw, "Scale"); }
  std::map<std::string, std::string> GetParams() const override { return ScaleParam::Schema().ToMap(p_); }
  bool InferShape(std::vector<TShape>* in, std::vector<TShape>* out, std::vector<TShape>*) const override {
    out->resize(1);
    if (!(*in)[0].known()) return false;                 // not enough information yet
    ShapeAssign("Scale", "output", &(*out)[0], (*in)[0]);  // fills or checks, naming the op
    return true;
  }
  // Backward reads only out_grad: the system may free the input and the
  // output as soon as the forward pass no longer needs them.
  std::vector<int> DeclareBackwardDependency(const std::vector<int>& out_grad, const std::vector<int>&,
                                             const std::vector<int>&) const override {
    return {out_grad[0]};
  }
  // x and y may share memory; so may out_grad and in_grad.
  std::vector<std::pair<int, void*>> ForwardInplaceOption(const std::vector<int>& in_data,
                                                          const std::vector<void*>& out_data) const override {
    return {{in_data[0], out_data[0]}};
  }
  std::vector<std::pair<int, void*>> BackwardInplaceOption(const std::vector<int>& out_grad,
      const std::vector<int>&, const std::vector<int>&, const std::vector<void*>& in_grad) const override {
    return {{out_grad[0], in_grad[0]}};
  }
  std::unique_ptr<OperatorProperty> Copy() const override { return std::make_unique<ScaleProp>(*this); }
  Operator* CreateOperator(Context) const override { return new ScaleOp(p_); }
  std::string TypeString() const override { return "Scale"; }
 private:
  ScaleParam p_;
};

// 4. Registration (from a .cc file linked into the program).
DEPENGINE_REGISTER_OP_PROPERTY(Scale, ScaleProp);
// clang-format on
// --- end docs/operators.md ---
}  // namespace docs_example

namespace depengine::test {
namespace {

class DocsExampleTest : public EngineTest {};

TEST_P(DocsExampleTest, ScaleOperatorGradientAndGraph) {
  CheckGradient(engine(), resources(),
                {.op = "Scale", .kwargs = {{"factor", "2.5"}}, .in_shapes = {TShape{3, 2}}});
  EXPECT_THROW(OperatorProperty::Create("Scale", {{"factor", "-1"}}), ParamError);
  // In a graph after FullyConnected: the plan takes the in-place option.
  Graph g;
  NodeEntry x = g.Variable("data");
  NodeEntry h = g.Op("FullyConnected", "fc", {{"num_hidden", "4"}}, {x});
  h = g.Op("Scale", "scale", {{"factor", "3"}}, {h});
  h = g.Op("SoftmaxOutput", "softmax", {}, {h});
  ExecutorOptions o;
  o.engine = engine();
  o.resources = resources();
  o.arg_shapes = {{"data", {2, 3}}};
  Executor exec(g, {h}, o);
  EXPECT_GE(exec.memory_stats().inplace, 2) << exec.PlanString();
  exec.Forward(true);
  exec.Backward();
  const auto p = exec.outputs()[0].ToVector();
  EXPECT_NEAR(p[0] + p[1] + p[2] + p[3], 1.0f, 1e-6);
}

DEPENGINE_INSTANTIATE_ENGINE_TEST(DocsExampleTest);

}  // namespace
}  // namespace depengine::test
