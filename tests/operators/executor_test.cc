// The graph executor: shape inference and its errors, gradients through
// whole graphs against finite differences (shared entries, accumulation,
// in-place buffers), the memory plan against the naive one, and results
// that do not depend on the plan or the engine kind.
#include "depengine/executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include "depengine/simple_op.h"
#include "executor_fixture.h"
#include "ops_fixture.h"

namespace depengine::test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// data (n, 3) -> fc1 (8) -> relu -> fc2 (4) -> tanh -> fc3 (2) -> softmax
Graph Mlp(std::vector<NodeEntry>* heads) {
  Graph g;
  NodeEntry x = g.Variable("data");
  NodeEntry h = g.Op("FullyConnected", "fc1", {{"num_hidden", "8"}}, {x});
  h = g.Op("Activation", "relu1", {{"act_type", "relu"}}, {h});
  h = g.Op("FullyConnected", "fc2", {{"num_hidden", "4"}}, {h});
  h = g.Op("Activation", "tanh2", {{"act_type", "tanh"}}, {h});
  h = g.Op("FullyConnected", "fc3", {{"num_hidden", "2"}}, {h});
  heads->push_back(g.Op("SoftmaxOutput", "softmax", {{"normalization", "batch"}}, {h}));
  return g;
}

// a = tanh(x); b = a * a; c = smooth_l1(a + b - x); d = exp(c / 2):
// entries read twice, by one node (a * a) and by several (a, x).
Graph Diamond(std::vector<NodeEntry>* heads) {
  Graph g;
  NodeEntry x = g.Variable("x");
  NodeEntry a = g.Op("Activation", "a", {{"act_type", "tanh"}}, {x});
  NodeEntry b = g.Op("elemwise_mul", "b", {}, {a, a});
  NodeEntry s = g.Op("elemwise_add", "s", {}, {a, b});
  NodeEntry t = g.Op("elemwise_sub", "t", {}, {s, x});
  NodeEntry c = g.Op("smooth_l1", "c", {{"scalar", "1"}}, {t});
  NodeEntry h = g.Op("_div_scalar", "h", {{"scalar", "2"}}, {c});
  heads->push_back(g.Op("exp", "d", {}, {h}));
  return g;
}

void Fill(const NDArray& a, std::mt19937* rng, double lo = -1, double hi = 1) {
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(a.Size());
  for (double& x : v) x = d(*rng);
  if (a.dtype() == kFloat64) {
    NDArray(a).SyncCopyFromCPU(v.data(), v.size());
  } else {
    std::vector<float> f(v.begin(), v.end());
    NDArray(a).SyncCopyFromCPU(f.data(), f.size());
  }
}

// test_exec_nonneg: the identity, failing on a negative input (a forward
// failure in the middle of a graph).
void NonNeg(const TBlob& src, const EnvArguments&, TBlob* ret, OpReqType req, RunContext) {
  SwitchType(ret->type_flag_, [&](auto tag) {
    using T = decltype(tag);
    for (std::size_t i = 0; i < src.Size(); ++i) {
      if (src.dptr<T>()[i] < 0) throw std::domain_error("test_exec_nonneg: negative input");
      Assign(ret->dptr<T>()[i], req, src.dptr<T>()[i]);
    }
  });
}
void NonNegGrad(const OutputGrad& g, const EnvArguments&, TBlob* gx, OpReqType req, RunContext) {
  SwitchType(gx->type_flag_, [&](auto tag) {
    using T = decltype(tag);
    for (std::size_t i = 0; i < gx->Size(); ++i) Assign(gx->dptr<T>()[i], req, g.data.dptr<T>()[i]);
  });
}
DEPENGINE_REGISTER_SIMPLE_OP(test_exec_nonneg)
    .set_function(DeviceType::kCPU, NonNeg)
    .set_gradient(DeviceType::kCPU, NonNegGrad)
    .describe("identity; fails on a negative input");

// test_exec_declarations: the identity, with declarations a user's operator
// may get wrong, chosen by its parameter `mode`:
//   ok                    consistent (in place both ways, one auxiliary state)
//   null_operator         CreateOperator returns nullptr
//   forward_inplace_id    ForwardInplaceOption names input 7 of 1
//   backward_inplace_ptr  BackwardInplaceOption names a pointer it was not given
//   aux_unknown           InferShape leaves the auxiliary state's shape unknown
//   empty_output          InferShape gives the output no elements: (0, n)
//   outputs_mismatch      NumOutputs() is 3, ListOutputs() names 1
//   no_visible_outputs    NumVisibleOutputs() is 0
class DeclOp : public Operator {
 public:
  void Forward(const OpContext&, const std::vector<TBlob>& in, const std::vector<OpReqType>& req,
               const std::vector<TBlob>& out, const std::vector<TBlob>&) override {
    internal_copy(in[0], out[0], req[0]);
  }
  void Backward(const OpContext&, const std::vector<TBlob>& out_grad, const std::vector<TBlob>&,
                const std::vector<TBlob>&, const std::vector<OpReqType>& req,
                const std::vector<TBlob>& in_grad, const std::vector<TBlob>&) override {
    internal_copy(out_grad[0], in_grad[0], req[0]);
  }

 private:
  static void internal_copy(const TBlob& from, const TBlob& to, OpReqType req) {
    SwitchType(to.type_flag_, [&](auto tag) {
      using T = decltype(tag);
      for (std::size_t i = 0; i < to.Size(); ++i) Assign(to.dptr<T>()[i], req, from.dptr<T>()[i]);
    });
  }
};
class DeclProp : public OperatorProperty {
 public:
  void Init(const KwArgs& kw) override {
    ModeParam::Schema().Init(&p_, kw, "test_exec_declarations");
  }
  std::map<std::string, std::string> GetParams() const override {
    return ModeParam::Schema().ToMap(p_);
  }
  std::vector<std::string> ListAuxiliaryStates() const override { return {"state"}; }
  int NumOutputs() const override { return p_.mode == "outputs_mismatch" ? 3 : 1; }
  int NumVisibleOutputs() const override { return p_.mode == "no_visible_outputs" ? 0 : 1; }
  bool InferShape(std::vector<TShape>* in, std::vector<TShape>* out,
                  std::vector<TShape>* aux) const override {
    out->resize(static_cast<std::size_t>(NumOutputs()));
    if (!(*in)[0].known()) return false;
    const TShape shape = p_.mode == "empty_output" ? TShape{0, (*in)[0][0]} : (*in)[0];
    for (TShape& o : *out) ShapeAssign("test_exec_declarations", "output", &o, shape);
    if (p_.mode != "aux_unknown") (*aux)[0] = TShape{1};
    return true;
  }
  std::vector<int> DeclareBackwardDependency(const std::vector<int>& out_grad,
                                             const std::vector<int>&,
                                             const std::vector<int>&) const override {
    return {out_grad[0]};
  }
  std::vector<std::pair<int, void*>> ForwardInplaceOption(
      const std::vector<int>& in_data, const std::vector<void*>& out_data) const override {
    if (p_.mode == "forward_inplace_id") return {{7, out_data[0]}};
    return {{in_data[0], out_data[0]}};
  }
  std::vector<std::pair<int, void*>> BackwardInplaceOption(
      const std::vector<int>& out_grad, const std::vector<int>&, const std::vector<int>&,
      const std::vector<void*>& in_grad) const override {
    static int not_given;
    if (p_.mode == "backward_inplace_ptr") return {{out_grad[0], &not_given}};
    return {{out_grad[0], in_grad[0]}};
  }
  std::unique_ptr<OperatorProperty> Copy() const override {
    return std::make_unique<DeclProp>(*this);
  }
  Operator* CreateOperator(Context) const override {
    return p_.mode == "null_operator" ? nullptr : new DeclOp;
  }
  std::string TypeString() const override { return "test_exec_declarations"; }

 private:
  ModeParam p_;
};
DEPENGINE_REGISTER_OP_PROPERTY(test_exec_declarations, DeclProp);

// test_exec_log: the identity, whose Forward and Backward append 'F' / 'B'
// to a log and count calls that find another call of the same Operator
// still running (an Operator need not be thread-safe: operator.h promises
// it runs in one engine function at a time). Backward reads only out_grad.
struct CallLog {
  std::mutex mu;
  std::string calls;  // guarded by mu
  std::atomic<int> overlaps{0};
};
CallLog call_log;
class LogOp : public Operator {
 public:
  void Forward(const OpContext&, const std::vector<TBlob>& in, const std::vector<OpReqType>& req,
               const std::vector<TBlob>& out, const std::vector<TBlob>&) override {
    Enter('F');
    Copy(in[0], out[0], req[0]);
    busy_.store(false);
  }
  void Backward(const OpContext&, const std::vector<TBlob>& out_grad, const std::vector<TBlob>&,
                const std::vector<TBlob>&, const std::vector<OpReqType>& req,
                const std::vector<TBlob>& in_grad, const std::vector<TBlob>&) override {
    Enter('B');
    Copy(out_grad[0], in_grad[0], req[0]);
    busy_.store(false);
  }

 private:
  void Enter(char what) {
    if (busy_.exchange(true)) ++call_log.overlaps;
    std::lock_guard<std::mutex> lock(call_log.mu);
    call_log.calls += what;
  }
  static void Copy(const TBlob& from, const TBlob& to, OpReqType req) {
    SwitchType(to.type_flag_, [&](auto tag) {
      using T = decltype(tag);
      for (std::size_t i = 0; i < to.Size(); ++i) Assign(to.dptr<T>()[i], req, from.dptr<T>()[i]);
    });
  }
  std::atomic<bool> busy_{false};
};
class LogProp : public OperatorProperty {
 public:
  void Init(const KwArgs&) override {}
  std::map<std::string, std::string> GetParams() const override { return {}; }
  bool InferShape(std::vector<TShape>* in, std::vector<TShape>* out,
                  std::vector<TShape>*) const override {
    out->resize(1);
    if (!(*in)[0].known()) return false;
    ShapeAssign("test_exec_log", "output", &(*out)[0], (*in)[0]);
    return true;
  }
  std::vector<int> DeclareBackwardDependency(const std::vector<int>& out_grad,
                                             const std::vector<int>&,
                                             const std::vector<int>&) const override {
    return {out_grad[0]};
  }
  std::unique_ptr<OperatorProperty> Copy() const override {
    return std::make_unique<LogProp>(*this);
  }
  Operator* CreateOperator(Context) const override { return new LogOp; }
  std::string TypeString() const override { return "test_exec_log"; }
};
DEPENGINE_REGISTER_OP_PROPERTY(test_exec_log, LogProp);

// x -> a -> b -> c, three test_exec_declarations nodes; b has `mode`, so
// that in-place sharing between internal tensors is possible at b.
Graph DeclChain(const std::string& mode, NodeEntry* head) {
  Graph g;
  NodeEntry x = g.Variable("x");
  NodeEntry h = g.Op("test_exec_declarations", "a", {}, {x});
  h = g.Op("test_exec_declarations", "b", {{"mode", mode}}, {h});
  *head = g.Op("test_exec_declarations", "c", {}, {h});
  return g;
}

// What constructing an executor raises, as "<type>: <what>"; "" when it
// does not raise E.
template <class E>
std::string BindError(const Graph& g, NodeEntry head, const ExecutorOptions& o) {
  try {
    Executor exec(g, {head}, o);
  } catch (const E& e) {
    return std::string(typeid(E).name()) + ": " + e.what();
  }
  return "";
}

// How many of the executor's gradients and outputs rethrow on WaitToRead
// (which delivers and clears each).
int CollectFailures(const Executor& ex) {
  int failures = 0;
  for (const auto& [name, g] : ex.grad_dict()) {
    try {
      g.WaitToRead();
    } catch (const std::exception&) {
      ++failures;
    }
  }
  for (const NDArray& out : ex.outputs()) {
    try {
      out.WaitToRead();
    } catch (const std::exception&) {
      ++failures;
    }
  }
  return failures;
}

class ExecutorTest : public ExecutorEngineTest {
 protected:
  // Checks d(sum(w * head)) / d(arg) for every argument with a gradient.
  void CheckGraphGradient(const Graph& g, const std::vector<NodeEntry>& heads, ExecutorOptions o,
                          const std::function<void(Executor&)>& init,
                          const std::function<void()>& before_forward = nullptr,
                          double tol = 1e-6) {
    Executor exec(g, heads, o);
    std::mt19937 rng(5);
    init(exec);
    NDArray w(exec.outputs()[0].shape(), Context::CPU(), engine(), kFloat64);
    Fill(w, &rng);
    const auto wv = w.ToVector<double>();
    auto loss = [&] {
      if (before_forward) before_forward();
      exec.Forward(true);
      const auto out = exec.outputs()[0].ToVector<double>();
      double l = 0;
      for (std::size_t i = 0; i < out.size(); ++i) l += wv[i] * out[i];
      return l;
    };
    loss();
    exec.Backward({w});
    for (const auto& [name, grad] : exec.grad_dict()) {
      SCOPED_TRACE(name);
      const auto analytic = grad.ToVector<double>();
      NDArray arg = exec.arg(name);
      auto x = arg.ToVector<double>();
      for (std::size_t j = 0; j < x.size(); ++j) {
        const double saved = x[j], eps = 1e-6;
        x[j] = saved + eps;
        arg.SyncCopyFromCPU(x.data(), x.size());
        const double lp = loss();
        x[j] = saved - eps;
        arg.SyncCopyFromCPU(x.data(), x.size());
        const double lm = loss();
        x[j] = saved;
        arg.SyncCopyFromCPU(x.data(), x.size());
        const double numeric = (lp - lm) / (2 * eps);
        ASSERT_NEAR(analytic[j], numeric, tol * std::max(1.0, std::abs(numeric)))
            << "element " << j;
      }
    }
  }
};

TEST_P(ExecutorTest, InfersEveryShapeFromTheData) {
  std::vector<NodeEntry> heads;
  Graph g = Mlp(&heads);
  EXPECT_THAT(g.ListArguments(),
              ::testing::ElementsAre("data", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias",
                                     "fc3_weight", "fc3_bias", "softmax_label"));
  Executor exec(g, heads, Options({{"data", {5, 3}}}));
  EXPECT_EQ(exec.arg_shapes().at("fc1_weight"), (TShape{8, 3}));
  EXPECT_EQ(exec.arg_shapes().at("fc2_weight"), (TShape{4, 8}));
  EXPECT_EQ(exec.arg_shapes().at("fc3_bias"), (TShape{2}));
  EXPECT_EQ(exec.arg_shapes().at("softmax_label"), (TShape{5}));
  EXPECT_EQ(exec.outputs()[0].shape(), (TShape{5, 2}));
}

TEST_P(ExecutorTest, ShapeAndNameErrors) {
  std::vector<NodeEntry> heads;
  Graph g = Mlp(&heads);
  try {
    Executor exec(g, heads, Options({}));
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("fc1"));
    EXPECT_THAT(e.what(), HasSubstr("data=?"));
  }
  try {
    Executor exec(g, heads, Options({{"data", {5, 3}}, {"fc2_weight", {4, 7}}}));
    FAIL();
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("fc2"));
    EXPECT_THAT(e.what(), HasSubstr("(4,7)"));
    EXPECT_THAT(e.what(), HasSubstr("(4,8)"));
  }
  EXPECT_THROW(Executor(g, heads, Options({{"dta", {5, 3}}})), std::invalid_argument);
  EXPECT_THROW(g.Op("Activation", "fc1", {{"act_type", "relu"}}, {heads[0]}),
               std::invalid_argument);
}

// A variable that no operator reads and whose shape is not given: a
// ShapeError naming it (before: "NDArray: cannot allocate shape ()", an
// std::invalid_argument naming nothing). With its shape it is allocated.
TEST_P(ExecutorTest, UnusedVariableWithoutShapeIsAShapeError) {
  Graph g;
  NodeEntry x = g.Variable("x");
  g.Variable("unused");
  NodeEntry y = g.Op("negative", "y", {}, {x});
  try {
    Executor exec(g, {y}, Options({{"x", {3}}}));
    FAIL() << "expected a ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("'unused'"));
    EXPECT_THAT(e.what(), HasSubstr("variable"));
    EXPECT_THAT(e.what(), HasSubstr("arg_shapes"));
  }
  Executor exec(g, {y}, Options({{"x", {3}}, {"unused", {2}}}));
  EXPECT_EQ(exec.arg("unused").shape(), (TShape{2}));
}

TEST_P(ExecutorTest, MlpGradientMatchesFiniteDifferences) {
  // SoftmaxOutput ignores the head gradient (a loss layer): check a body
  // without it, with a sigmoid head.
  Graph body;
  NodeEntry x = body.Variable("data");
  NodeEntry h = body.Op("FullyConnected", "fc1", {{"num_hidden", "6"}}, {x});
  h = body.Op("Activation", "relu1", {{"act_type", "relu"}}, {h});
  h = body.Op("Dropout", "drop", {{"p", "0.25"}}, {h});
  h = body.Op("FullyConnected", "fc2", {{"num_hidden", "3"}}, {h});
  h = body.Op("Activation", "sig", {{"act_type", "sigmoid"}}, {h});
  auto o = Options({{"data", {4, 3}}});
  o.grad_req = {{"data", kWriteTo}};
  CheckGraphGradient(
      body, {h}, o,
      [&](Executor& e) {
        std::mt19937 rng(9);
        for (const auto& [name, a] : e.arg_dict()) Fill(a, &rng);
      },
      // Dropout draws a new mask each forward: reseed so that every forward
      // sees the same one.
      [&] { resources()->SeedRandom(1); });
}

TEST_P(ExecutorTest, SharedEntriesAccumulateGradients) {
  std::vector<NodeEntry> heads;
  Graph g = Diamond(&heads);
  ExecutorOptions o = Options({{"x", {3, 4}}});
  CheckGraphGradient(g, heads, o, [&](Executor& e) {
    std::mt19937 rng(3);
    Fill(e.arg("x"), &rng, -1.5, 1.5);
  });
  // The same with a naive plan and without in-place sharing.
  o.plan_memory = false;
  CheckGraphGradient(g, heads, o, [&](Executor& e) {
    std::mt19937 rng(3);
    Fill(e.arg("x"), &rng, -1.5, 1.5);
  });
}

// Planned, unplanned and no-in-place executors compute the same bits.
TEST_P(ExecutorTest, PlanDoesNotChangeResults) {
  std::vector<NodeEntry> heads;
  Graph g = Mlp(&heads);
  auto run = [&](bool plan, bool inplace) {
    auto o = Options({{"data", {6, 3}}}, kFloat32);
    o.plan_memory = plan;
    o.allow_inplace = inplace;
    o.grad_req = {{"data", kNullOp}, {"softmax_label", kNullOp}};
    Executor exec(g, heads, o);
    std::mt19937 rng(21);
    for (const auto& [name, a] : exec.arg_dict()) {
      if (name != "softmax_label") Fill(a, &rng);
    }
    std::vector<float> label{0, 1, 1, 0, 1, 0};
    NDArray(exec.arg("softmax_label")).SyncCopyFromCPU(label.data(), label.size());
    std::vector<std::vector<float>> result;
    for (int it = 0; it < 3; ++it) {
      exec.Forward(true);
      exec.Backward();
    }
    result.push_back(exec.outputs()[0].ToVector());
    for (const auto& [name, grad] : exec.grad_dict()) result.push_back(grad.ToVector());
    return result;
  };
  const auto planned = run(true, true);
  EXPECT_EQ(planned, run(false, false));
  EXPECT_EQ(planned, run(true, false));
}

TEST_P(ExecutorTest, MemoryPlanSavesAgainstNaive) {
  std::vector<NodeEntry> heads;
  Graph g = Mlp(&heads);
  auto o = Options({{"data", {64, 3}}}, kFloat32);
  o.grad_req = {{"data", kNullOp}, {"softmax_label", kNullOp}};
  Executor train(g, heads, o);
  const MemoryPlanStats& s = train.memory_stats();
  SCOPED_TRACE(train.PlanString());
  // fc1, relu1, fc2, tanh2, fc3 outputs and their gradients.
  EXPECT_EQ(s.tensors, 10);
  EXPECT_GT(s.inplace, 0);
  EXPECT_GT(s.not_kept_for_backward, 0);  // fc outputs feeding an in-place activation
  EXPECT_LT(s.planned_bytes, s.naive_bytes);
  EXPECT_LE(s.blocks, s.tensors);

  o.plan_memory = false;
  Executor naive(g, heads, o);
  EXPECT_EQ(naive.memory_stats().planned_bytes, naive.memory_stats().naive_bytes);
  EXPECT_EQ(naive.memory_stats().naive_bytes, s.naive_bytes);

  o.plan_memory = true;
  o.for_training = false;
  Executor infer(g, heads, o);
  EXPECT_EQ(infer.memory_stats().tensors, 5);
  EXPECT_LT(infer.memory_stats().planned_bytes, s.planned_bytes);
  EXPECT_THROW(infer.Backward(), std::logic_error);
}

TEST_P(ExecutorTest, SharedArgumentsAndEarlyDestruction) {
  std::vector<NodeEntry> heads;
  Graph g = Mlp(&heads);
  auto o = Options({{"data", {4, 3}}}, kFloat32);
  auto train = std::make_unique<Executor>(g, heads, o);
  std::mt19937 rng(2);
  for (const auto& [name, a] : train->arg_dict()) {
    if (name != "softmax_label") Fill(a, &rng, 0, 1);  // labels stay 0
  }
  auto eo = Options({{"data", {2, 3}}}, kFloat32);
  eo.for_training = false;
  for (const auto& [name, a] : train->arg_dict()) {
    if (name != "data" && name != "softmax_label") eo.shared_args[name] = a;
  }
  Executor eval(g, heads, eo);
  EXPECT_TRUE(eval.arg("fc1_weight").SharesStorageWith(train->arg("fc1_weight")));
  // Work pushed, then the executor dropped without waiting: its memory and
  // operators stay alive until the work is done.
  train->Forward(true);
  train->Backward();
  train.reset();
  eval.Forward(false);
  const auto p = eval.outputs()[0].ToVector();
  for (int i = 0; i < 2; ++i) EXPECT_NEAR(p[2 * i] + p[2 * i + 1], 1.0f, 1e-5);
}

// A Backward that fails (a label out of range) fails every gradient; once
// the caller collected the failure there and fixed the label, later runs
// compute what a fresh executor computes. The executor's internal arrays
// (planned memory, head gradients) must not keep the failure.
TEST_P(ExecutorTest, RecoversAfterAFailedBackward) {
  std::vector<NodeEntry> heads;
  Graph g = Mlp(&heads);
  auto o = Options({{"data", {2, 3}}}, kFloat32);
  o.grad_req = {{"data", kNullOp}, {"softmax_label", kNullOp}};
  Executor ex(g, heads, o);
  std::mt19937 rng(3);
  for (const auto& [name, a] : ex.arg_dict()) {
    if (name != "softmax_label") Fill(a, &rng);
  }
  const std::vector<float> bad{0, 7}, good{0, 1};
  NDArray(ex.arg("softmax_label")).SyncCopyFromCPU(bad.data(), bad.size());
  ex.Forward(true);
  ex.Backward();
  for (const auto& [name, gr] : ex.grad_dict()) {
    EXPECT_THROW(gr.WaitToRead(), std::out_of_range) << name;
  }
  EXPECT_NO_THROW(ex.outputs()[0].WaitToRead());
  NDArray(ex.arg("softmax_label")).SyncCopyFromCPU(good.data(), good.size());

  // The reference: a fresh executor on the same arrays.
  auto ro = o;
  for (const auto& [name, a] : ex.arg_dict()) ro.shared_args[name] = a;
  Executor fresh(g, heads, ro);
  fresh.Forward(true);
  fresh.Backward();
  ASSERT_EQ(CollectFailures(fresh), 0);
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    ex.Forward(true);
    ex.Backward();
    ASSERT_EQ(CollectFailures(ex), 0);
    EXPECT_EQ(ex.outputs()[0].ToVector(), fresh.outputs()[0].ToVector());
    for (const auto& [name, gr] : ex.grad_dict()) {
      EXPECT_EQ(gr.ToVector(), fresh.grad(name).ToVector()) << name;
    }
  }
}

// A forward failure in the middle of the graph reaches the output and the
// gradients of the same run; after it is collected, a run with good data
// succeeds. Not collected, WaitForAll still reports it: clearing the
// internal arrays loses nothing.
TEST_P(ExecutorTest, ForwardFailureReachesOutputs) {
  Graph g;
  NodeEntry x = g.Variable("data");
  NodeEntry h = g.Op("test_exec_nonneg", "check", {}, {x});
  h = g.Op("FullyConnected", "fc1", {{"num_hidden", "3"}}, {h});
  h = g.Op("Activation", "act", {{"act_type", "tanh"}}, {h});
  NodeEntry y = g.Op("SoftmaxOutput", "softmax", {}, {h});
  auto o = Options({{"data", {2, 4}}}, kFloat32);
  o.grad_req = {{"data", kNullOp}, {"softmax_label", kNullOp}};
  Executor ex(g, {y}, o);
  NDArray(ex.arg("fc1_weight")) = 0.1;
  NDArray data(ex.arg("data"));
  auto run = [&] {
    ex.Forward(true);
    ex.Backward();
  };

  data = -1.0;
  run();
  EXPECT_THROW(ex.outputs()[0].WaitToRead(), std::domain_error);
  for (const auto& [name, gr] : ex.grad_dict()) {
    EXPECT_THROW(gr.WaitToRead(), std::domain_error) << name;
  }
  data = 1.0;
  run();
  EXPECT_EQ(CollectFailures(ex), 0);

  // Not collected this time: the next Forward clears the internal arrays
  // (at once on the naive engine, which has run the failed run by then),
  // and WaitForAll still reports the failure.
  data = -1.0;
  run();
  data = 1.0;
  ex.Forward(true);
  EXPECT_THROW(engine()->WaitForAll(), std::domain_error);
  run();
  EXPECT_EQ(CollectFailures(ex), 0);
  EXPECT_NO_THROW(engine()->WaitForAll());
}

// Backward() without head gradients uses ones every time, also after a
// Backward(head_grads) (which used to leave its values in place for every
// later Backward()).
TEST_P(ExecutorTest, BackwardWithoutHeadGradsUsesOnesAgain) {
  Graph g;
  NodeEntry x = g.Variable("x");
  NodeEntry y = g.Op("_mul_scalar", "y", {{"scalar", "2"}}, {x});  // dy/dx = 2
  Executor exec(g, {y}, Options({{"x", {3}}}, kFloat32));
  exec.Forward(true);
  exec.Backward();
  EXPECT_THAT(exec.grad("x").ToVector(), ::testing::ElementsAre(2, 2, 2));
  std::vector<float> wv{5, 6, 7};
  NDArray w(TShape{3}, Context::CPU(), engine());
  w.SyncCopyFromCPU(wv.data(), wv.size());
  for (int i = 0; i < 2; ++i) {
    exec.Forward(true);
    exec.Backward({w});
    EXPECT_THAT(exec.grad("x").ToVector(), ::testing::ElementsAre(10, 12, 14));
    exec.Forward(true);
    exec.Backward();
    EXPECT_THAT(exec.grad("x").ToVector(), ::testing::ElementsAre(2, 2, 2));
    exec.Forward(true);
    exec.Backward();
    EXPECT_THAT(exec.grad("x").ToVector(), ::testing::ElementsAre(2, 2, 2));
  }
}

// The same output given twice as a head: its head gradients would have to
// be summed (before, the second silently overwrote the first); rejected,
// naming the head.
TEST_P(ExecutorTest, SameHeadTwiceIsRejected) {
  Graph g;
  NodeEntry x = g.Variable("x");
  NodeEntry y = g.Op("_mul_scalar", "y", {{"scalar", "2"}}, {x});
  NodeEntry z = g.Op("negative", "z", {}, {x});
  try {
    Executor exec(g, {y, z, y}, Options({{"x", {3}}}));
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("'y_output'"));
    EXPECT_THAT(e.what(), HasSubstr("twice"));
  }
  Executor exec(g, {y, z}, Options({{"x", {3}}}));
  EXPECT_EQ(exec.outputs().size(), 2u);
}

// A user's operator whose declarations are wrong gets an error naming the
// node when the executor is bound. Before: CreateOperator's nullptr was
// called on an engine worker (segfault), and an in-place option naming an
// input or pointer the operator was not given indexed out of bounds
// (AddressSanitizer: heap-buffer-overflow).
TEST_P(ExecutorTest, CustomOperatorDeclarationErrorsNameTheNode) {
  NodeEntry head;
  {
    Graph g = DeclChain("ok", &head);
    Executor exec(g, {head}, Options({{"x", {2, 3}}}));
    NDArray x = exec.arg("x");
    x = 1.5;
    exec.Forward(true);
    exec.Backward();
    EXPECT_THAT(exec.outputs()[0].ToVector<double>(), ::testing::Each(1.5));
    EXPECT_THAT(exec.grad("x").ToVector<double>(), ::testing::Each(1.0));
  }
  for (const char* mode : {"null_operator", "forward_inplace_id", "backward_inplace_ptr"}) {
    SCOPED_TRACE(mode);
    Graph g = DeclChain(mode, &head);
    const std::string error = BindError<std::logic_error>(g, head, Options({{"x", {2, 3}}}));
    EXPECT_THAT(error, HasSubstr("node 'b' (test_exec_declarations)"));
  }
}

// The next run's Forward of a node waits for this run's Backward of it,
// even when they share no array (the backward reads only out_grad and
// writes x's gradient; the forward reads x and writes the output), so that
// one Operator never runs in two engine functions at once. Before, the
// second Forward ran while the Backward was still waiting (log "FFB"; on
// the threaded engines the two calls could overlap).
TEST_P(ExecutorTest, ForwardWaitsForTheSameOperatorsBackward) {
  {
    std::lock_guard<std::mutex> lock(call_log.mu);
    call_log.calls.clear();
  }
  call_log.overlaps = 0;
  Graph g;
  NodeEntry x = g.Variable("x");
  NodeEntry y = g.Op("test_exec_log", "s", {}, {x});
  Executor exec(g, {y}, Options({{"x", {4}}}));
  exec.Forward(true);
  // Holds x's gradient, so that the Backward below waits until released.
  std::atomic<bool> holding{false};
  CallbackOnComplete release;
  engine()->PushAsync(
      [&](RunContext, CallbackOnComplete done) {
        release = done;
        holding.store(true, std::memory_order_release);
      },
      Context::CPU(), {}, {exec.grad("x").var()});
  while (!holding.load(std::memory_order_acquire)) std::this_thread::yield();
  exec.Backward();
  exec.Forward(true);
  release();
  exec.outputs()[0].WaitToRead();
  exec.grad("x").WaitToRead();
  std::lock_guard<std::mutex> lock(call_log.mu);
  EXPECT_EQ(call_log.calls, "FBF");
  EXPECT_EQ(call_log.overlaps.load(), 0);
}

// Shapes no array can have are ShapeErrors naming the node, whether given
// (a variable) or inferred (an output, an auxiliary state). Before: the
// allocation failed with "NDArray: cannot allocate shape ()" or
// "NDArray::Slice: rows [0, 0) outside (1,)", naming no node.
TEST_P(ExecutorTest, UnallocatableShapesAreShapeErrorsNamingTheNode) {
  NodeEntry head;
  Graph g = DeclChain("aux_unknown", &head);
  EXPECT_THAT(
      BindError<ShapeError>(g, head, Options({{"x", {2, 3}}})),
      AllOf(HasSubstr("node 'b' (test_exec_declarations)"), HasSubstr("auxiliary state 'state'")));
  g = DeclChain("empty_output", &head);
  EXPECT_THAT(BindError<ShapeError>(g, head, Options({{"x", {2, 3}}})),
              AllOf(HasSubstr("node 'b' (test_exec_declarations)"), HasSubstr("output 'output'"),
                    HasSubstr("(0,2)")));
  g = DeclChain("ok", &head);
  EXPECT_THAT(BindError<ShapeError>(g, head, Options({{"x", {0, 3}}})),
              AllOf(HasSubstr("node 'x' (variable)"), HasSubstr("(0,3)")));
  EXPECT_THAT(BindError<ShapeError>(g, head, Options({{"x", {-2, 3}}})),
              AllOf(HasSubstr("node 'x' (variable)"), HasSubstr("negative")));
  Graph fc;
  NodeEntry d = fc.Variable("d");
  head = fc.Op("FullyConnected", "fc", {{"num_hidden", "4"}}, {d});
  EXPECT_THAT(BindError<ShapeError>(fc, head, Options({{"d", {-2, 3}}})),
              AllOf(HasSubstr("node 'd' (variable)"), HasSubstr("negative")));
}

// Graph::AddOp checks the operator's output counts (before: NumOutputs()
// larger than ListOutputs() overflowed a vector in the executor, and no
// visible output made Graph::Op read an empty vector), and a failed AddOp
// leaves the graph as it was (before: the variables made for the arguments
// before the taken name stayed, and later failed the bind as unread
// variables).
TEST(GraphTest, AddOpChecksDeclarationsAndChangesNothingWhenItFails) {
  Graph g;
  NodeEntry x = g.Variable("x");
  for (const char* mode : {"outputs_mismatch", "no_visible_outputs"}) {
    SCOPED_TRACE(mode);
    try {
      g.AddOp("test_exec_declarations", "n", {{"mode", mode}}, {x});
      FAIL() << "expected std::logic_error";
    } catch (const std::logic_error& e) {
      EXPECT_THAT(e.what(), HasSubstr("test_exec_declarations (node 'n')"));
      EXPECT_THAT(e.what(), HasSubstr("NumOutputs()"));
    }
  }
  g.Variable("fc_bias");
  EXPECT_THROW(g.Op("FullyConnected", "fc", {{"num_hidden", "2"}}, {x}), std::invalid_argument);
  EXPECT_EQ(g.num_nodes(), 2);
  EXPECT_THAT(g.ListArguments(), ::testing::ElementsAre("x", "fc_bias"));
}

DEPENGINE_INSTANTIATE_ENGINE_TEST(ExecutorTest);

}  // namespace
}  // namespace depengine::test
