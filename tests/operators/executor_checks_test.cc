// The graph executor and Graph: binding errors (options that contradict the
// graph, heads that are not final outputs, operators whose shape or
// in-place declarations are wrong), Backward and name lookups given bad
// arguments, a backward step written in place over an input's forward
// memory, resources asked for by a backward step, an operator without a
// gradient, and the process-wide engine and resource manager as defaults.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "depengine/executor.h"
#include "depengine/simple_op.h"
#include "executor_fixture.h"
#include "ops_fixture.h"

namespace depengine::test {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// test_checks_square: y = x * x. Backward reads out_grad and the input and
// offers to write the input's gradient over the input's forward memory.
// Parameter `mode` selects a mistake a user's operator may make:
//   ok               consistent
//   backward_id      BackwardInplaceOption names id 42
//   extra_aux        InferShape gives an auxiliary shape, declaring none
//   overwrite_input  InferShape replaces the known input shape with (7,)
//   duplicate_args   ListArguments names "w" twice
//   no_gradient      the Operator does not override Backward
template <class T>
void SquareForward(const TBlob& x, const TBlob& y, OpReqType req) {
  for (std::size_t i = 0; i < y.Size(); ++i) {
    const T v = x.dptr<T>()[i];
    Assign(y.dptr<T>()[i], req, v * v);
  }
}
class SquareForwardOnlyOp : public Operator {
 public:
  void Forward(const OpContext&, const std::vector<TBlob>& in, const std::vector<OpReqType>& req,
               const std::vector<TBlob>& out, const std::vector<TBlob>&) override {
    SwitchType(out[0].type_flag_,
               [&](auto tag) { SquareForward<decltype(tag)>(in[0], out[0], req[0]); });
  }
};
class SquareOp : public SquareForwardOnlyOp {
 public:
  // in_grad[0] may be in_data[0]'s memory: each element is read before it
  // is written.
  void Backward(const OpContext&, const std::vector<TBlob>& out_grad,
                const std::vector<TBlob>& in_data, const std::vector<TBlob>&,
                const std::vector<OpReqType>& req, const std::vector<TBlob>& in_grad,
                const std::vector<TBlob>&) override {
    SwitchType(in_grad[0].type_flag_, [&](auto tag) {
      using T = decltype(tag);
      for (std::size_t i = 0; i < in_grad[0].Size(); ++i) {
        const T g = 2 * in_data[0].dptr<T>()[i] * out_grad[0].dptr<T>()[i];
        Assign(in_grad[0].dptr<T>()[i], req[0], g);
      }
    });
  }
};
class SquareProp : public OperatorProperty {
 public:
  void Init(const KwArgs& kw) override { ModeParam::Schema().Init(&p_, kw, "test_checks_square"); }
  std::map<std::string, std::string> GetParams() const override {
    return ModeParam::Schema().ToMap(p_);
  }
  std::vector<std::string> ListArguments() const override {
    if (p_.mode == "duplicate_args") return {"data", "w", "w"};
    return {"data"};
  }
  bool InferShape(std::vector<TShape>* in, std::vector<TShape>* out,
                  std::vector<TShape>* aux) const override {
    out->resize(1);
    if (p_.mode == "overwrite_input") (*in)[0] = TShape{7};
    if (!(*in)[0].known()) return false;
    ShapeAssign("test_checks_square", "output", &(*out)[0], (*in)[0]);
    if (p_.mode == "extra_aux") *aux = {TShape{1}};
    return true;
  }
  std::vector<int> DeclareBackwardDependency(const std::vector<int>& out_grad,
                                             const std::vector<int>& in_data,
                                             const std::vector<int>&) const override {
    return {out_grad[0], in_data[0]};
  }
  std::vector<std::pair<int, void*>> BackwardInplaceOption(
      const std::vector<int>&, const std::vector<int>& in_data, const std::vector<int>&,
      const std::vector<void*>& in_grad) const override {
    if (p_.mode == "backward_id") return {{42, in_grad[0]}};
    return {{in_data[0], in_grad[0]}};
  }
  std::unique_ptr<OperatorProperty> Copy() const override {
    return std::make_unique<SquareProp>(*this);
  }
  Operator* CreateOperator(Context) const override {
    if (p_.mode == "no_gradient") return new SquareForwardOnlyOp;
    return new SquareOp;
  }
  std::string TypeString() const override { return "test_checks_square"; }

 private:
  ModeParam p_;
};
DEPENGINE_REGISTER_OP_PROPERTY(test_checks_square, SquareProp);

// test_checks_triple: y = 3 x, forward and gradient both staged through
// kTempSpace, which each checks it was given (a backward step that asked
// for resources and got none would fail). No in-place options.
void CheckTempSpace(const EnvArguments& env, const char* who) {
  if (env.resource.size() != 1 || env.resource[0].req.type != ResourceRequest::kTempSpace) {
    throw std::logic_error(std::string(who) + ": expected one kTempSpace resource");
  }
}
void TripleStaged(const TBlob& src, const TBlob& dst, OpReqType req, const EnvArguments& env) {
  SwitchType(dst.type_flag_, [&](auto tag) {
    using T = decltype(tag);
    const TBlob tmp = env.resource[0].get_space(dst.shape_, dst.type_flag_);
    for (std::size_t i = 0; i < dst.Size(); ++i) tmp.dptr<T>()[i] = 3 * src.dptr<T>()[i];
    for (std::size_t i = 0; i < dst.Size(); ++i) Assign(dst.dptr<T>()[i], req, tmp.dptr<T>()[i]);
  });
}
void Triple(const TBlob& src, const EnvArguments& env, TBlob* ret, OpReqType req, RunContext) {
  CheckTempSpace(env, "test_checks_triple forward");
  TripleStaged(src, *ret, req, env);
}
void TripleGrad(const OutputGrad& g, const EnvArguments& env, TBlob* gx, OpReqType req,
                RunContext) {
  CheckTempSpace(env, "test_checks_triple backward");
  TripleStaged(g.data, *gx, req, env);
}
DEPENGINE_REGISTER_SIMPLE_OP(test_checks_triple)
    .set_function(DeviceType::kCPU, Triple)
    .set_gradient(DeviceType::kCPU, TripleGrad)
    .set_resource_request(ResourceRequest::kTempSpace)
    .describe("3 x through temporary space");

// test_checks_no_grad: the identity, with no gradient function.
void Identity(const TBlob& src, const EnvArguments&, TBlob* ret, OpReqType req, RunContext) {
  SwitchType(ret->type_flag_, [&](auto tag) {
    using T = decltype(tag);
    for (std::size_t i = 0; i < ret->Size(); ++i) Assign(ret->dptr<T>()[i], req, src.dptr<T>()[i]);
  });
}
DEPENGINE_REGISTER_SIMPLE_OP(test_checks_no_grad)
    .set_function(DeviceType::kCPU, Identity)
    .describe("identity without a gradient");

class ExecutorChecksTest : public ExecutorEngineTest {};

// A shared array whose shape, type or engine contradicts the options is
// refused when the executor is bound, naming the variable.
TEST_P(ExecutorChecksTest, SharedArgumentsMustMatchTheOptions) {
  Graph g;
  NodeEntry x = g.Variable("x");
  NodeEntry y = g.Op("negative", "y", {}, {x});
  auto o = Options({{"x", {2, 3}}});
  o.shared_args["x"] = NDArray(TShape{3, 2}, Context::CPU(), engine(), kFloat64);
  EXPECT_THAT(Raised<ShapeError>([&] { Executor(g, {y}, o); }),
              AllOf(HasSubstr("variable 'x'"), HasSubstr("given shape (2,3)"),
                    HasSubstr("its shared array has shape (3,2)")));

  o = Options({});
  o.shared_args["x"] = NDArray(TShape{2, 3}, Context::CPU(), engine(), kFloat32);
  EXPECT_THAT(Raised<std::invalid_argument>([&] { Executor(g, {y}, o); }),
              AllOf(HasSubstr("shared array 'x'"), HasSubstr("another type or engine")));

  EngineOptions eo;
  eo.kind = EngineKind::kNaive;
  auto other_engine = CreateEngine(eo);
  {
    o.shared_args["x"] = NDArray(TShape{2, 3}, Context::CPU(), other_engine.get(), kFloat64);
    EXPECT_THAT(Raised<std::invalid_argument>([&] { Executor(g, {y}, o); }),
                AllOf(HasSubstr("shared array 'x'"), HasSubstr("another type or engine")));
    o.shared_args.clear();
  }
  other_engine->WaitForAll();

  // A matching shared array is used as the variable.
  NDArray shared(TShape{2, 3}, Context::CPU(), engine(), kFloat64);
  shared = 4.0;
  o.shared_args["x"] = shared;
  Executor exec(g, {y}, o);
  EXPECT_TRUE(exec.arg("x").SharesStorageWith(shared));
  exec.Forward(false);
  EXPECT_THAT(exec.outputs()[0].ToVector<double>(), ::testing::Each(-4.0));
}

// A resource manager of another engine is refused.
TEST_P(ExecutorChecksTest, ResourceManagerMustBeOnTheExecutorsEngine) {
  Graph g;
  NodeEntry y = g.Op("negative", "y", {}, {g.Variable("x")});
  EngineOptions eo;
  eo.kind = EngineKind::kNaive;
  auto other_engine = CreateEngine(eo);
  {
    ResourceManager other(other_engine.get());
    auto o = Options({{"x", {2}}});
    o.resources = &other;
    EXPECT_THAT(Raised<std::invalid_argument>([&] { Executor(g, {y}, o); }),
                HasSubstr("Executor: the resource manager belongs to another engine"));
  }
  other_engine->WaitForAll();
}

// A head must be an output of an operator node of the graph, and a final
// one: an output another node reads would get its gradient from two
// places.
TEST_P(ExecutorChecksTest, HeadsMustBeFinalOutputsOfOperatorNodes) {
  Graph g;
  NodeEntry x = g.Variable("x");
  NodeEntry y = g.Op("negative", "y", {}, {x});
  NodeEntry z = g.Op("exp", "z", {}, {y});
  const auto o = Options({{"x", {3}}});
  for (const NodeEntry& bad :
       {x, NodeEntry{y.node, 1}, NodeEntry{y.node, -1}, NodeEntry{9, 0}, NodeEntry{-1, 0}}) {
    SCOPED_TRACE(std::to_string(bad.node) + ":" + std::to_string(bad.index));
    EXPECT_THAT(Raised<std::invalid_argument>([&] { Executor(g, {bad}, o); }),
                HasSubstr("every head must be an output of an operator node of the graph"));
  }
  EXPECT_THAT(Raised<std::invalid_argument>([&] { Executor(g, {}, o); }), HasSubstr("no heads"));
  EXPECT_THAT(Raised<std::invalid_argument>([&] {
                Executor(g, {y, z}, o);
              }),
              AllOf(HasSubstr("head 'y_output' is also an input of node 'z'"),
                    HasSubstr("heads must be final outputs")));
  Executor exec(g, {z}, o);
  NDArray(exec.arg("x")) = 0.0;
  exec.Forward(false);
  EXPECT_THAT(exec.outputs()[0].ToVector<double>(), ::testing::Each(1.0));
}

// An operator whose InferShape replaces a known shape (instead of raising
// ShapeError) or gives more auxiliary shapes than it declares states, or
// whose BackwardInplaceOption names an id it was not given: errors naming
// the node, its operator and the shapes or the id.
TEST_P(ExecutorChecksTest, WrongDeclarationsOfAnOperatorNameTheNode) {
  auto bind = [&](const std::string& mode) {
    Graph g;
    NodeEntry x = g.Variable("x");
    NodeEntry h = g.Op("test_checks_square", "sq", {{"mode", mode}}, {x});
    Executor exec(g, {h}, Options({{"x", {2, 3}}}));
  };
  EXPECT_THAT(Raised<ShapeError>([&] { bind("overwrite_input"); }),
              AllOf(HasSubstr("node 'sq' (test_checks_square)"), HasSubstr("input 'data'"),
                    HasSubstr("has shape (2,3) but (7,) is required")));
  EXPECT_THAT(Raised<ShapeError>([&] { bind("extra_aux"); }),
              AllOf(HasSubstr("node 'sq' (test_checks_square)"),
                    HasSubstr("InferShape gave 1 auxiliary shapes for 0 auxiliary states")));
  EXPECT_THAT(Raised<std::logic_error>([&] { bind("backward_id"); }),
              AllOf(HasSubstr("node 'sq' (test_checks_square)"),
                    HasSubstr("BackwardInplaceOption names id 42"), HasSubstr("(0 to 2)")));
  EXPECT_NO_THROW(bind("ok"));
}

// Backward with the wrong number of head gradients raises before pushing
// anything; arg() and grad() raise for names that are not variables (grad()
// of a variable without a gradient is an empty array, not an error).
TEST_P(ExecutorChecksTest, BackwardAndLookupsRejectBadArguments) {
  Graph g;
  NodeEntry x = g.Variable("x");
  NodeEntry c = g.Variable("c");
  NodeEntry y = g.Op("elemwise_mul", "y", {}, {x, c});
  auto o = Options({{"x", {3}}, {"c", {3}}});
  o.grad_req = {{"c", kNullOp}};
  Executor exec(g, {y}, o);
  NDArray(exec.arg("x")) = 2.0;
  NDArray(exec.arg("c")) = 5.0;
  NDArray w(TShape{3}, Context::CPU(), engine(), kFloat64);
  w = 1.0;
  exec.Forward(true);
  EXPECT_THAT(Raised<std::invalid_argument>([&] {
                exec.Backward({w, w});
              }),
              HasSubstr("Executor::Backward: expected 1 head gradients, got 2"));
  EXPECT_THAT(Raised<std::invalid_argument>([&] { exec.arg("y"); }),
              HasSubstr("Executor::arg: unknown variable 'y'"));
  EXPECT_THAT(Raised<std::invalid_argument>([&] { exec.grad("nope"); }),
              HasSubstr("Executor::grad: unknown variable 'nope'"));
  EXPECT_TRUE(exec.grad("c").is_none());
  // The executor still works: d(x * c)/dx = c.
  exec.Backward({w});
  EXPECT_THAT(exec.grad("x").ToVector<double>(), ::testing::Each(5.0));
}

// The backward of test_checks_square may write x's gradient over x's
// forward memory. With t = -x internal, t dies at that backward step, so the
// plan shares t's block with t's gradient; the gradient stays right:
// d(sum w * t^2)/dx = 2 x w.
TEST_P(ExecutorChecksTest, BackwardInPlaceOverAnInputsForwardMemory) {
  Graph g;
  NodeEntry x = g.Variable("x");
  NodeEntry t = g.Op("negative", "t", {}, {x});
  NodeEntry y = g.Op("test_checks_square", "sq", {}, {t});
  const std::vector<double> xv{1, -2, 0.5, 3}, wv{1, 2, -1, 0.25};
  auto run = [&](bool allow_inplace) {
    auto o = Options({{"x", {4}}});
    o.allow_inplace = allow_inplace;
    Executor exec(g, {y}, o);
    NDArray(exec.arg("x")).SyncCopyFromCPU(xv.data(), xv.size());
    NDArray w(TShape{4}, Context::CPU(), engine(), kFloat64);
    w.SyncCopyFromCPU(wv.data(), wv.size());
    exec.Forward(true);
    exec.Backward({w});
    EXPECT_THAT(exec.outputs()[0].ToVector<double>(), ElementsAre(1, 4, 0.25, 9));
    const std::vector<double> grad = exec.grad("x").ToVector<double>();
    for (std::size_t i = 0; i < xv.size(); ++i) EXPECT_DOUBLE_EQ(grad[i], 2 * xv[i] * wv[i]) << i;
    return exec.PlanString();
  };
  const std::string planned = run(true);
  EXPECT_THAT(planned, HasSubstr("t_output_grad (4,) 32 B steps [2, 3] block 0 (in place)"));
  EXPECT_THAT(run(false), ::testing::Not(HasSubstr("(in place)")));
}

// A simple op that asks for temporary space gets it in its backward step
// too (BackwardResource), and one without in-place options is planned
// without any: d(3 * 3 x)/dx = 9.
TEST_P(ExecutorChecksTest, BackwardStepsGetTheResourcesTheyAskFor) {
  Graph g;
  NodeEntry x = g.Variable("x");
  NodeEntry h = g.Op("test_checks_triple", "a", {}, {x});
  h = g.Op("test_checks_triple", "b", {}, {h});
  Executor exec(g, {h}, Options({{"x", {5}}}));
  const std::vector<double> xv{1, 2, 3, 4, 5};
  NDArray(exec.arg("x")).SyncCopyFromCPU(xv.data(), xv.size());
  exec.Forward(true);
  exec.Backward();
  EXPECT_THAT(exec.outputs()[0].ToVector<double>(), ElementsAre(9, 18, 27, 36, 45));
  EXPECT_THAT(exec.grad("x").ToVector<double>(), ::testing::Each(9.0));
  EXPECT_EQ(exec.memory_stats().inplace, 0);
}

// An operator without a gradient in a training graph: Backward fails the
// gradients it would write with std::logic_error naming the problem (the
// default Operator::Backward, or a simple op without a gradient function),
// and the forward results are unaffected.
TEST_P(ExecutorChecksTest, OperatorWithoutGradientFailsItsBackward) {
  struct Case {
    const char* op;
    KwArgs kwargs;
    const char* message;
  };
  for (const Case& c :
       {Case{"test_checks_square", {{"mode", "no_gradient"}}, "this operator has no gradient"},
        Case{"test_checks_no_grad", {}, "test_checks_no_grad: no gradient function"}}) {
    SCOPED_TRACE(c.op);
    Graph g;
    NodeEntry x = g.Variable("x");
    NodeEntry y = g.Op(c.op, "y", c.kwargs, {x});
    Executor exec(g, {y}, Options({{"x", {2}}}));
    NDArray(exec.arg("x")) = 3.0;
    exec.Forward(true);
    exec.Backward();
    EXPECT_THAT(Raised<std::logic_error>([&] { exec.grad("x").WaitToRead(); }),
                HasSubstr(c.message));
    EXPECT_NO_THROW(exec.outputs()[0].WaitToRead());
    EXPECT_NO_THROW(engine()->WaitForAll());
  }
}

DEPENGINE_INSTANTIATE_ENGINE_TEST(ExecutorChecksTest);

// Without an engine and a resource manager in the options, the executor
// uses Engine::Get() and ResourceManager::Get().
TEST(ExecutorDefaults, UsesTheProcessWideEngineAndResources) {
  Graph g;
  NodeEntry y = g.Op("test_checks_triple", "y", {}, {g.Variable("x")});
  ExecutorOptions o;
  o.arg_shapes = {{"x", {3}}};
  Executor exec(g, {y}, o);
  EXPECT_EQ(exec.arg("x").engine(), Engine::Get());
  EXPECT_EQ(exec.arg("x").dtype(), kFloat32);
  NDArray(exec.arg("x")) = 2.0;
  exec.Forward(true);
  exec.Backward();
  EXPECT_THAT(exec.outputs()[0].ToVector(), ::testing::Each(6.0f));
  EXPECT_THAT(exec.grad("x").ToVector(), ::testing::Each(3.0f));
}

// Graph::AddOp checks its inputs: no more than the operator's arguments,
// entries of this graph's nodes and outputs that exist; and the variables
// it would add for the remaining arguments must have distinct names. It
// raises naming the node and leaves the graph unchanged.
TEST(GraphChecks, AddOpRejectsBadInputsAndLeavesTheGraphUnchanged) {
  Graph g;
  NodeEntry x = g.Variable("x");
  NodeEntry y = g.Op("negative", "y", {}, {x});
  EXPECT_THAT(Raised<std::invalid_argument>([&] {
                g.Op("negative", "n", {}, {x, y});
              }),
              HasSubstr("Graph: negative 'n' takes 1 inputs, got 2"));
  EXPECT_THAT(Raised<std::invalid_argument>([&] {
                g.Op("negative", "n", {}, {NodeEntry{5, 0}});
              }),
              HasSubstr("an input of 'n' is not a node of this graph"));
  EXPECT_THAT(Raised<std::invalid_argument>([&] {
                g.Op("negative", "n", {}, {NodeEntry{-1, 0}});
              }),
              HasSubstr("not a node of this graph"));
  EXPECT_THAT(Raised<std::invalid_argument>([&] {
                g.Op("negative", "n", {}, {NodeEntry{0, 1}});
              }),
              HasSubstr("an input of 'n' names output 1 of 'x', which has 1"));
  EXPECT_THAT(Raised<std::invalid_argument>([&] {
                g.Op("negative", "n", {}, {NodeEntry{1, -1}});
              }),
              HasSubstr("names output -1 of 'y'"));
  EXPECT_THAT(Raised<std::invalid_argument>([&] {
                g.Op("test_checks_square", "n", {{"mode", "duplicate_args"}}, {x});
              }),
              HasSubstr("the name 'n_w' is already used"));
  EXPECT_EQ(g.num_nodes(), 2);
  EXPECT_THAT(g.ListArguments(), ElementsAre("x"));
  // A good node is still added under the name the failures did not take.
  NodeEntry n = g.Op("negative", "n", {}, {y});
  EXPECT_EQ(n.node, 2);
}

}  // namespace
}  // namespace depengine::test
