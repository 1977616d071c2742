// FullyConnected: out = data * weight^T + bias, through OpenBLAS GEMM.
#include <string>

#include "operators/op_common.h"
#include "operators/registry.h"

namespace depengine::op {
namespace {

struct FullyConnectedParam {
  int num_hidden = 0;
  bool no_bias = false;
  bool flatten = true;
  static const ParamSchema<FullyConnectedParam>& Schema() {
    static const ParamSchema<FullyConnectedParam> schema = [] {
      ParamSchema<FullyConnectedParam> s;
      s.Field("num_hidden", &FullyConnectedParam::num_hidden)
          .set_lower_bound(1)
          .describe("number of output units");
      s.Field("no_bias", &FullyConnectedParam::no_bias)
          .set_default(false)
          .describe("omit the bias");
      s.Field("flatten", &FullyConnectedParam::flatten)
          .set_default(true)
          .describe("flatten all but the first input axis (else apply to the last axis)");
      return s;
    }();
    return schema;
  }
};

enum FCInput { kData, kWeight, kBias };

class FullyConnectedOp final : public Operator {
 public:
  explicit FullyConnectedOp(FullyConnectedParam p) : param_(p) {}

  void Forward(const OpContext&, const std::vector<TBlob>& in_data,
               const std::vector<OpReqType>& req, const std::vector<TBlob>& out_data,
               const std::vector<TBlob>&) override {
    if (req[0] == kNullOp) return;
    const TBlob x = Rows(in_data[kData]);
    const TBlob& w = in_data[kWeight];
    const TBlob y = Rows(out_data[0]);
    const int n = static_cast<int>(x.shape_[0]), k = static_cast<int>(x.shape_[1]);
    const int h = param_.num_hidden;
    SwitchType(y.type_flag_, [&](auto tag) {
      using T = decltype(tag);
      T* out = y.dptr<T>();
      // y = x * w^T (+ y when adding).
      Gemm(false, true, n, h, k, T(1), x.dptr<T>(), k, w.dptr<T>(), k,
           static_cast<T>(BetaFor(req[0])), out, h);
      if (!param_.no_bias) {
        const T* b = in_data[kBias].dptr<T>();
        for (int i = 0; i < n; ++i) {
          for (int j = 0; j < h; ++j) out[i * h + j] += b[j];
        }
      }
    });
  }

  void Backward(const OpContext&, const std::vector<TBlob>& out_grad,
                const std::vector<TBlob>& in_data, const std::vector<TBlob>&,
                const std::vector<OpReqType>& req, const std::vector<TBlob>& in_grad,
                const std::vector<TBlob>&) override {
    const TBlob g = Rows(out_grad[0]);
    const TBlob x = Rows(in_data[kData]);
    const TBlob& w = in_data[kWeight];
    const int n = static_cast<int>(x.shape_[0]), k = static_cast<int>(x.shape_[1]);
    const int h = param_.num_hidden;
    SwitchType(g.type_flag_, [&](auto tag) {
      using T = decltype(tag);
      const T* gp = g.dptr<T>();
      // d weight (h x k) = g^T (h x n) * x (n x k)
      if (req[kWeight] != kNullOp) {
        Gemm(true, false, h, k, n, T(1), gp, h, x.dptr<T>(), k,
             static_cast<T>(BetaFor(req[kWeight])), in_grad[kWeight].dptr<T>(), k);
      }
      // d data (n x k) = g (n x h) * w (h x k)
      if (req[kData] != kNullOp) {
        Gemm(false, false, n, k, h, T(1), gp, h, w.dptr<T>(), k,
             static_cast<T>(BetaFor(req[kData])), Rows(in_grad[kData]).dptr<T>(), k);
      }
      // d bias = column sums of g
      if (!param_.no_bias && req[kBias] != kNullOp) {
        T* gb = in_grad[kBias].dptr<T>();
        for (int j = 0; j < h; ++j) {
          T s = 0;
          for (int i = 0; i < n; ++i) s += gp[i * h + j];
          Assign(gb[j], req[kBias], s);
        }
      }
    });
  }

 private:
  // The blob as a matrix of rows: flatten all but the first axis, or all
  // but the last one.
  TBlob Rows(const TBlob& b) const {
    if (param_.flatten) {
      return b.Reshape(TShape{b.shape_[0], b.shape_.ProdShape(1, b.ndim())});
    }
    return b.FlatTo2D();
  }
  FullyConnectedParam param_;
};

class FullyConnectedProp final : public ParamProperty<FullyConnectedProp, FullyConnectedParam> {
 public:
  static constexpr const char* kName = "FullyConnected";

  std::vector<std::string> ListArguments() const override {
    if (param_.no_bias) return {"data", "weight"};
    return {"data", "weight", "bias"};
  }

  bool InferShape(std::vector<TShape>* in_shape, std::vector<TShape>* out_shape,
                  std::vector<TShape>*) const override {
    const std::size_t nargs = ListArguments().size();
    if (in_shape->size() != nargs) {
      throw ShapeError(std::string(kName) + ": expected " + std::to_string(nargs) +
                       " inputs, got " + std::to_string(in_shape->size()));
    }
    const TShape& d = (*in_shape)[kData];
    if (!d.known()) return false;
    if (param_.flatten ? d.ndim() < 2 : d.ndim() < 1) {
      throw ShapeError(std::string(kName) + ": data has shape " + d.ToString() +
                       (param_.flatten ? " but needs at least 2 dimensions (batch, features)"
                                       : " but needs at least 1 dimension"));
    }
    const TShape::index_t k = param_.flatten ? d.ProdShape(1, d.ndim()) : d[d.ndim() - 1];
    const TShape::index_t h = param_.num_hidden;
    ShapeAssign(kName, "weight (num_hidden=" + std::to_string(h) + ", data " + d.ToString() + ")",
                &(*in_shape)[kWeight], TShape{h, k});
    if (!param_.no_bias) ShapeAssign(kName, "bias", &(*in_shape)[kBias], TShape{h});
    std::vector<TShape::index_t> out;
    if (param_.flatten) {
      out = {d[0], h};
    } else {
      out.assign(d.begin(), d.end() - 1);
      out.push_back(h);
    }
    out_shape->resize(1);
    ShapeAssign(kName, "output", &(*out_shape)[0], TShape(out));
    return true;
  }

  // The output is not needed: the system may free it after the forward
  // pass (seed 000's example).
  std::vector<int> DeclareBackwardDependency(const std::vector<int>& out_grad,
                                             const std::vector<int>& in_data,
                                             const std::vector<int>&) const override {
    return {out_grad[0], in_data[kData], in_data[kWeight]};
  }

  Operator* CreateOperator(Context) const override {
    UseSingleThreadedBlas();
    return new FullyConnectedOp(param_);
  }
};

}  // namespace

void RegisterFullyConnected() {
  internal::AddOperator(
      FullyConnectedProp::kName, [] { return std::make_unique<FullyConnectedProp>(); },
      "out = data * weight^T + bias (GEMM through OpenBLAS)");
}

}  // namespace depengine::op
