// Runs one operator on NDArrays through the engine (no graph, no memory
// planning), and checks its gradient against central finite differences.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "depengine/ndarray.h"
#include "depengine/operator.h"
#include "depengine/resource.h"

namespace depengine::test {

class OpHarness {
 public:
  // Creates operator `type` with `kwargs` and allocates its arrays; shapes
  // not given in `in_shapes` (unknown) are inferred.
  OpHarness(Engine* engine, ResourceManager* rm, const std::string& type, const KwArgs& kwargs,
            std::vector<TShape> in_shapes, int dtype = kFloat64)
      : engine_(engine), prop_(OperatorProperty::Create(type, kwargs)) {
    in_shapes.resize(prop_->ListArguments().size());
    std::vector<TShape> out_shapes(static_cast<std::size_t>(prop_->NumOutputs())), aux_shapes;
    if (!prop_->InferShape(&in_shapes, &out_shapes, &aux_shapes)) {
      throw std::runtime_error("OpHarness: shapes of " + type + " cannot be inferred");
    }
    op_.reset(prop_->CreateOperator(Context::CPU()));
    for (const TShape& s : in_shapes) {
      in.emplace_back(s, Context::CPU(), engine, dtype);
      in_grad.emplace_back(s, Context::CPU(), engine, dtype);
      in.back() = 0.0;
      in_grad.back() = 0.0;
    }
    for (const TShape& s : out_shapes) {
      out.emplace_back(s, Context::CPU(), engine, dtype);
      out_grad.emplace_back(s, Context::CPU(), engine, dtype);
      out_grad.back() = 0.0;
    }
    std::vector<TShape> shapes(in_shapes);
    for (const ResourceRequest& r : prop_->ForwardResource(shapes))
      fwd_res_.push_back(rm->Request(Context::CPU(), r));
    for (const ResourceRequest& r : prop_->BackwardResource(shapes))
      bwd_res_.push_back(rm->Request(Context::CPU(), r));
  }

  const OperatorProperty& prop() const { return *prop_; }

  // Pushes Forward (every output kWriteTo) and waits for it.
  void Forward(bool is_train) {
    std::vector<VarHandle> reads, writes;
    for (auto& a : in) reads.push_back(a.var());
    for (auto& a : out) writes.push_back(a.var());
    for (auto& r : fwd_res_) writes.push_back(r.var);
    OpContext ctx;
    ctx.is_train = is_train;
    ctx.requested = fwd_res_;
    auto in_b = Blobs(in), out_b = Blobs(out);
    std::vector<OpReqType> req(out.size(), kWriteTo);
    Operator* op = op_.get();
    engine_->PushSync(
        [=](RunContext rctx) mutable {
          ctx.run_ctx = rctx;
          op->Forward(ctx, in_b, req, out_b, {});
        },
        Context::CPU(), reads, writes);
    engine_->WaitForAll();
  }

  // Pushes Backward with `req` per input and waits. Only the declared
  // backward inputs are passed; the others are empty blobs.
  void Backward(const std::vector<OpReqType>& req) {
    const std::size_t no = out.size(), ni = in.size();
    std::vector<int> og_id(no), in_id(ni), out_id(no);
    int n = 0;
    for (auto& v : og_id) v = n++;
    for (auto& v : in_id) v = n++;
    for (auto& v : out_id) v = n++;
    const std::vector<int> deps = prop_->DeclareBackwardDependency(og_id, in_id, out_id);
    auto declared = [&](int id) { return std::find(deps.begin(), deps.end(), id) != deps.end(); };
    std::vector<TBlob> og(no), id(ni), od(no);
    std::vector<VarHandle> reads, writes;
    for (std::size_t i = 0; i < no; ++i) {
      if (declared(og_id[i])) og[i] = out_grad[i].data(), reads.push_back(out_grad[i].var());
      if (declared(out_id[i])) od[i] = out[i].data(), reads.push_back(out[i].var());
    }
    for (std::size_t i = 0; i < ni; ++i) {
      if (declared(in_id[i])) id[i] = in[i].data(), reads.push_back(in[i].var());
      if (req[i] != kNullOp) writes.push_back(in_grad[i].var());
    }
    for (auto& r : bwd_res_) writes.push_back(r.var);
    OpContext ctx;
    ctx.is_train = 1;
    ctx.requested = bwd_res_;
    auto ig = Blobs(in_grad);
    Operator* op = op_.get();
    engine_->PushSync(
        [=](RunContext rctx) mutable {
          ctx.run_ctx = rctx;
          op->Backward(ctx, og, id, od, req, ig, {});
        },
        Context::CPU(), reads, writes);
    engine_->WaitForAll();
  }

  std::vector<NDArray> in, out, in_grad, out_grad;

 private:
  static std::vector<TBlob> Blobs(const std::vector<NDArray>& a) {
    std::vector<TBlob> b;
    for (const auto& x : a) b.push_back(x.data());
    return b;
  }
  Engine* engine_;
  std::unique_ptr<OperatorProperty> prop_;
  std::unique_ptr<Operator> op_;
  std::vector<Resource> fwd_res_, bwd_res_;
};

// How to check one operator's gradient.
struct GradCheck {
  std::string op{};
  KwArgs kwargs{};
  std::vector<TShape> in_shapes{};  // unknown entries are inferred
  // Inputs whose gradient is checked (default: all).
  std::vector<bool> check{};
  // Fills input i (default: uniform in [-1, 1]).
  std::function<void(int i, std::vector<double>* values, std::mt19937* rng)> init{};
  // The loss of the outputs (default: sum of w_k * out_k with random
  // weights w, which become the head gradients). A custom loss must be
  // what the operator's backward differentiates (loss layers).
  std::function<double(const std::vector<std::vector<double>>& outs,
                       const std::vector<std::vector<double>>& ins)>
      loss{};
  // Called before each forward (e.g. to reseed a generator).
  std::function<void()> before_forward{};
  double eps = 1e-6;
  double tol = 1e-6;  // on |analytic - numeric| / max(1, |numeric|)
};

inline void CheckGradient(Engine* engine, ResourceManager* rm, const GradCheck& c,
                          unsigned seed = 17) {
  SCOPED_TRACE(c.op + " seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  OpHarness h(engine, rm, c.op, c.kwargs, c.in_shapes, kFloat64);
  const std::size_t ni = h.in.size(), no = static_cast<std::size_t>(h.prop().NumVisibleOutputs());
  std::vector<std::vector<double>> x(ni);
  for (std::size_t i = 0; i < ni; ++i) {
    x[i].resize(h.in[i].Size());
    if (c.init) {
      c.init(static_cast<int>(i), &x[i], &rng);
    } else {
      std::uniform_real_distribution<double> d(-1, 1);
      for (double& v : x[i]) v = d(rng);
    }
    h.in[i].SyncCopyFromCPU(x[i].data(), x[i].size());
  }
  std::vector<std::vector<double>> w(no);
  for (std::size_t k = 0; k < no; ++k) {
    std::uniform_real_distribution<double> d(-1, 1);
    w[k].resize(h.out[k].Size());
    for (double& v : w[k]) v = d(rng);
    h.out_grad[k].SyncCopyFromCPU(w[k].data(), w[k].size());
  }
  auto loss = [&]() {
    if (c.before_forward) c.before_forward();
    h.Forward(true);
    std::vector<std::vector<double>> outs;
    for (std::size_t k = 0; k < no; ++k) outs.push_back(h.out[k].ToVector<double>());
    if (c.loss) return c.loss(outs, x);
    double l = 0;
    for (std::size_t k = 0; k < no; ++k) {
      for (std::size_t j = 0; j < outs[k].size(); ++j) l += w[k][j] * outs[k][j];
    }
    return l;
  };
  auto checked = [&](std::size_t i) { return c.check.empty() || c.check[i]; };

  // Analytic gradient, written, then accumulated (kAddTo doubles it).
  loss();
  std::vector<OpReqType> req(ni);
  for (std::size_t i = 0; i < ni; ++i) req[i] = checked(i) ? kWriteTo : kNullOp;
  h.Backward(req);
  std::vector<std::vector<double>> analytic(ni);
  for (std::size_t i = 0; i < ni; ++i) {
    if (checked(i)) analytic[i] = h.in_grad[i].ToVector<double>();
  }
  for (std::size_t i = 0; i < ni; ++i) req[i] = checked(i) ? kAddTo : kNullOp;
  h.Backward(req);
  for (std::size_t i = 0; i < ni; ++i) {
    if (!checked(i)) continue;
    const auto twice = h.in_grad[i].ToVector<double>();
    for (std::size_t j = 0; j < twice.size(); ++j) {
      ASSERT_NEAR(twice[j], 2 * analytic[i][j], 1e-12 + 1e-9 * std::abs(analytic[i][j]))
          << "kAddTo, input " << h.prop().ListArguments()[i] << " element " << j;
    }
  }

  // Central differences, input by input.
  for (std::size_t i = 0; i < ni; ++i) {
    if (!checked(i)) continue;
    for (std::size_t j = 0; j < x[i].size(); ++j) {
      const double saved = x[i][j];
      x[i][j] = saved + c.eps;
      h.in[i].SyncCopyFromCPU(x[i].data(), x[i].size());
      const double lp = loss();
      x[i][j] = saved - c.eps;
      h.in[i].SyncCopyFromCPU(x[i].data(), x[i].size());
      const double lm = loss();
      x[i][j] = saved;
      h.in[i].SyncCopyFromCPU(x[i].data(), x[i].size());
      const double numeric = (lp - lm) / (2 * c.eps);
      const double err = std::abs(analytic[i][j] - numeric) / std::max(1.0, std::abs(numeric));
      ASSERT_LE(err, c.tol) << "input " << h.prop().ListArguments()[i] << " element " << j
                            << ": analytic " << analytic[i][j] << " numeric " << numeric;
    }
  }
}

}  // namespace depengine::test
