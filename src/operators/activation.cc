// Activation: relu, sigmoid or tanh, elementwise. The gradient is computed
// from the output, so the input may be overwritten in place.
#include <cmath>
#include <string>

#include "operators/op_common.h"
#include "operators/registry.h"

namespace depengine::op {
namespace {

enum ActType { kReLU, kSigmoid, kTanh };

struct ActivationParam {
  int act_type = kReLU;
  static const ParamSchema<ActivationParam>& Schema() {
    static const ParamSchema<ActivationParam> schema = [] {
      ParamSchema<ActivationParam> s;
      s.Field("act_type", &ActivationParam::act_type)
          .add_enum("relu", kReLU)
          .add_enum("sigmoid", kSigmoid)
          .add_enum("tanh", kTanh)
          .describe("the activation function");
      return s;
    }();
    return schema;
  }
};

class ActivationOp final : public Operator {
 public:
  explicit ActivationOp(ActivationParam p) : param_(p) {}

  void Forward(const OpContext&, const std::vector<TBlob>& in_data,
               const std::vector<OpReqType>& req, const std::vector<TBlob>& out_data,
               const std::vector<TBlob>&) override {
    if (req[0] == kNullOp) return;
    SwitchType(out_data[0].type_flag_, [&](auto tag) {
      using T = decltype(tag);
      const T* x = in_data[0].dptr<T>();
      T* y = out_data[0].dptr<T>();
      for (std::size_t i = 0, n = out_data[0].Size(); i < n; ++i) {
        const T v = x[i];
        T r;
        switch (param_.act_type) {
          case kReLU:
            r = v > T(0) ? v : T(0);
            break;
          case kSigmoid:
            r = T(1) / (T(1) + std::exp(-v));
            break;
          default:
            r = std::tanh(v);
            break;
        }
        Assign(y[i], req[0], r);
      }
    });
  }

  void Backward(const OpContext&, const std::vector<TBlob>& out_grad, const std::vector<TBlob>&,
                const std::vector<TBlob>& out_data, const std::vector<OpReqType>& req,
                const std::vector<TBlob>& in_grad, const std::vector<TBlob>&) override {
    if (req[0] == kNullOp) return;
    SwitchType(in_grad[0].type_flag_, [&](auto tag) {
      using T = decltype(tag);
      const T* g = out_grad[0].dptr<T>();
      const T* y = out_data[0].dptr<T>();
      T* gx = in_grad[0].dptr<T>();  // may alias g
      for (std::size_t i = 0, n = in_grad[0].Size(); i < n; ++i) {
        const T yi = y[i], gi = g[i];
        T d;
        switch (param_.act_type) {
          case kReLU:
            d = yi > T(0) ? T(1) : T(0);
            break;
          case kSigmoid:
            d = yi * (T(1) - yi);
            break;
          default:
            d = T(1) - yi * yi;
            break;
        }
        Assign(gx[i], req[0], gi * d);
      }
    });
  }

 private:
  ActivationParam param_;
};

class ActivationProp final : public ParamProperty<ActivationProp, ActivationParam> {
 public:
  static constexpr const char* kName = "Activation";

  bool InferShape(std::vector<TShape>* in_shape, std::vector<TShape>* out_shape,
                  std::vector<TShape>*) const override {
    if (in_shape->size() != 1) throw ShapeError(std::string(kName) + ": expected 1 input (data)");
    out_shape->resize(1);
    TShape& in = (*in_shape)[0];
    TShape& out = (*out_shape)[0];
    if (!in.known() && out.known()) in = out;  // the shape flows both ways
    if (!in.known()) return false;
    ShapeAssign(kName, "output (data " + in.ToString() + ")", &out, in);
    return true;
  }
  std::vector<int> DeclareBackwardDependency(const std::vector<int>& out_grad,
                                             const std::vector<int>&,
                                             const std::vector<int>& out_data) const override {
    return {out_grad[0], out_data[0]};
  }
  std::vector<std::pair<int, void*>> ForwardInplaceOption(
      const std::vector<int>& in_data, const std::vector<void*>& out_data) const override {
    return {{in_data[0], out_data[0]}};
  }
  std::vector<std::pair<int, void*>> BackwardInplaceOption(
      const std::vector<int>& out_grad, const std::vector<int>&, const std::vector<int>&,
      const std::vector<void*>& in_grad) const override {
    return {{out_grad[0], in_grad[0]}};
  }
  Operator* CreateOperator(Context) const override { return new ActivationOp(param_); }
};

}  // namespace

void RegisterActivation() {
  internal::AddOperator(
      ActivationProp::kName, [] { return std::make_unique<ActivationProp>(); },
      "elementwise relu, sigmoid or tanh");
}

}  // namespace depengine::op
