// SoftmaxOutput: softmax over the last axis in the forward pass; in the
// backward pass, the gradient of the cross-entropy loss
// -sum log p[label] (scaled by grad_scale, divided by the batch size when
// normalization=batch). The head gradient is not used: this is a loss layer.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "operators/op_common.h"
#include "operators/registry.h"

namespace depengine::op {
namespace {

enum Normalization { kNull, kBatch };

struct SoftmaxOutputParam {
  double grad_scale = 1;
  int normalization = kNull;
  static const ParamSchema<SoftmaxOutputParam>& Schema() {
    static const ParamSchema<SoftmaxOutputParam> schema = [] {
      ParamSchema<SoftmaxOutputParam> s;
      s.Field("grad_scale", &SoftmaxOutputParam::grad_scale)
          .set_default(1.0)
          .describe("multiplies the gradient");
      s.Field("normalization", &SoftmaxOutputParam::normalization)
          .add_enum("null", kNull)
          .add_enum("batch", kBatch)
          .set_default(kNull)
          .describe("batch: divide the gradient by the batch size");
      return s;
    }();
    return schema;
  }
};

enum SoftmaxInput { kData, kLabel };

class SoftmaxOutputOp final : public Operator {
 public:
  explicit SoftmaxOutputOp(SoftmaxOutputParam p) : param_(p) {}

  void Forward(const OpContext&, const std::vector<TBlob>& in_data,
               const std::vector<OpReqType>& req, const std::vector<TBlob>& out_data,
               const std::vector<TBlob>&) override {
    if (req[0] == kNullOp) return;
    const TBlob x = in_data[kData].FlatTo2D();
    const TBlob y = out_data[0].FlatTo2D();
    const auto n = x.shape_[0], c = x.shape_[1];
    SwitchType(y.type_flag_, [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.dptr<T>();
      T* yp = y.dptr<T>();  // may alias xp
      for (TShape::index_t i = 0; i < n; ++i) {
        const T* row = xp + i * c;
        T* out = yp + i * c;
        const T mx = *std::max_element(row, row + c);
        T sum = 0;
        for (TShape::index_t j = 0; j < c; ++j) {
          const T e = std::exp(row[j] - mx);
          out[j] = e;
          sum += e;
        }
        for (TShape::index_t j = 0; j < c; ++j) out[j] /= sum;
      }
    });
  }

  void Backward(const OpContext&, const std::vector<TBlob>&, const std::vector<TBlob>& in_data,
                const std::vector<TBlob>& out_data, const std::vector<OpReqType>& req,
                const std::vector<TBlob>& in_grad, const std::vector<TBlob>&) override {
    const TBlob p = out_data[0].FlatTo2D();
    const auto n = p.shape_[0], c = p.shape_[1];
    SwitchType(p.type_flag_, [&](auto tag) {
      using T = decltype(tag);
      const T* pp = p.dptr<T>();
      const T* label = in_data[kLabel].dptr<T>();
      const T scale = static_cast<T>(param_.grad_scale /
                                     static_cast<double>(param_.normalization == kBatch ? n : 1));
      if (req[kData] != kNullOp) {
        T* g = in_grad[kData].dptr<T>();  // may alias pp
        for (TShape::index_t i = 0; i < n; ++i) {
          const auto k = static_cast<TShape::index_t>(label[i]);
          if (k < 0 || k >= c || static_cast<T>(k) != label[i]) {
            throw std::out_of_range("SoftmaxOutput: label " + std::to_string(label[i]) +
                                    " of row " + std::to_string(i) +
                                    " is not a class index in [0, " + std::to_string(c) + ")");
          }
          for (TShape::index_t j = 0; j < c; ++j) {
            const T v = (pp[i * c + j] - (j == k ? T(1) : T(0))) * scale;
            Assign(g[i * c + j], req[kData], v);
          }
        }
      }
      if (req[kLabel] == kWriteTo || req[kLabel] == kWriteInplace) {
        T* gl = in_grad[kLabel].dptr<T>();
        std::fill(gl, gl + in_grad[kLabel].Size(), T(0));
      }
    });
  }

 private:
  SoftmaxOutputParam param_;
};

class SoftmaxOutputProp final : public ParamProperty<SoftmaxOutputProp, SoftmaxOutputParam> {
 public:
  static constexpr const char* kName = "SoftmaxOutput";

  std::vector<std::string> ListArguments() const override { return {"data", "label"}; }

  bool InferShape(std::vector<TShape>* in_shape, std::vector<TShape>* out_shape,
                  std::vector<TShape>*) const override {
    if (in_shape->size() != 2)
      throw ShapeError(std::string(kName) + ": expected 2 inputs (data, label)");
    const TShape& d = (*in_shape)[kData];
    if (!d.known()) return false;
    if (d.ndim() < 2) {
      throw ShapeError(std::string(kName) + ": data has shape " + d.ToString() +
                       " but needs (batch, classes)");
    }
    ShapeAssign(kName, "label (data " + d.ToString() + ")", &(*in_shape)[kLabel],
                TShape{d.ProdShape(0, d.ndim() - 1)});
    out_shape->resize(1);
    ShapeAssign(kName, "output", &(*out_shape)[0], d);
    return true;
  }
  std::vector<int> DeclareBackwardDependency(const std::vector<int>&,
                                             const std::vector<int>& in_data,
                                             const std::vector<int>& out_data) const override {
    return {in_data[kLabel], out_data[0]};
  }
  std::vector<std::pair<int, void*>> ForwardInplaceOption(
      const std::vector<int>& in_data, const std::vector<void*>& out_data) const override {
    return {{in_data[kData], out_data[0]}};
  }
  std::vector<std::pair<int, void*>> BackwardInplaceOption(
      const std::vector<int>&, const std::vector<int>&, const std::vector<int>& out_data,
      const std::vector<void*>& in_grad) const override {
    return {{out_data[0], in_grad[kData]}};
  }
  Operator* CreateOperator(Context) const override { return new SoftmaxOutputOp(param_); }
};

}  // namespace

void RegisterSoftmaxOutput() {
  internal::AddOperator(
      SoftmaxOutputProp::kName, [] { return std::make_unique<SoftmaxOutputProp>(); },
      "softmax forward; cross-entropy gradient backward (a loss layer)");
}

}  // namespace depengine::op
