// Dropout: in training, zeroes each element with probability p and scales
// the rest by 1/(1-p); the mask is a second, invisible output that the
// backward pass uses. Draws come from the kRandom resource, so dropout
// calls are serialized on the generator's var and reproducible from a seed.
#include <string>

#include "operators/op_common.h"
#include "operators/registry.h"

namespace depengine::op {
namespace {

struct DropoutParam {
  double p = 0.5;
  static const ParamSchema<DropoutParam>& Schema() {
    static const ParamSchema<DropoutParam> schema = [] {
      ParamSchema<DropoutParam> s;
      s.Field("p", &DropoutParam::p)
          .set_default(0.5)
          .set_range(0.0, 1.0)
          .describe("drop probability");
      return s;
    }();
    return schema;
  }
};

enum DropoutOutput { kOut, kMask };

class DropoutOp final : public Operator {
 public:
  explicit DropoutOp(DropoutParam p) : param_(p) {}

  void Forward(const OpContext& ctx, const std::vector<TBlob>& in_data,
               const std::vector<OpReqType>& req, const std::vector<TBlob>& out_data,
               const std::vector<TBlob>&) override {
    SwitchType(out_data[kOut].type_flag_, [&](auto tag) {
      using T = decltype(tag);
      const T* x = in_data[0].dptr<T>();
      T* y = out_data[kOut].dptr<T>();  // may alias x
      T* mask = out_data[kMask].dptr<T>();
      const std::size_t n = out_data[kOut].Size();
      if (ctx.is_train && param_.p > 0) {
        ctx.requested[0].get_random()->SampleBernoulli(mask, n, 1.0 - param_.p);
        const T scale = param_.p < 1 ? static_cast<T>(1.0 / (1.0 - param_.p)) : T(0);
        for (std::size_t i = 0; i < n; ++i) mask[i] *= scale;
      } else {
        for (std::size_t i = 0; i < n; ++i) mask[i] = T(1);
      }
      for (std::size_t i = 0; i < n; ++i) Assign(y[i], req[kOut], x[i] * mask[i]);
    });
  }

  void Backward(const OpContext&, const std::vector<TBlob>& out_grad, const std::vector<TBlob>&,
                const std::vector<TBlob>& out_data, const std::vector<OpReqType>& req,
                const std::vector<TBlob>& in_grad, const std::vector<TBlob>&) override {
    if (req[0] == kNullOp) return;
    SwitchType(in_grad[0].type_flag_, [&](auto tag) {
      using T = decltype(tag);
      const T* g = out_grad[kOut].dptr<T>();
      const T* mask = out_data[kMask].dptr<T>();
      T* gx = in_grad[0].dptr<T>();  // may alias g
      for (std::size_t i = 0, n = in_grad[0].Size(); i < n; ++i)
        Assign(gx[i], req[0], g[i] * mask[i]);
    });
  }

 private:
  DropoutParam param_;
};

class DropoutProp final : public ParamProperty<DropoutProp, DropoutParam> {
 public:
  static constexpr const char* kName = "Dropout";

  std::vector<std::string> ListOutputs() const override { return {"output", "mask"}; }
  int NumVisibleOutputs() const override { return 1; }

  bool InferShape(std::vector<TShape>* in_shape, std::vector<TShape>* out_shape,
                  std::vector<TShape>*) const override {
    if (in_shape->size() != 1) throw ShapeError(std::string(kName) + ": expected 1 input (data)");
    out_shape->resize(2);
    TShape& in = (*in_shape)[0];
    if (!in.known() && (*out_shape)[kOut].known()) in = (*out_shape)[kOut];
    if (!in.known()) return false;
    ShapeAssign(kName, "output (data " + in.ToString() + ")", &(*out_shape)[kOut], in);
    ShapeAssign(kName, "mask (data " + in.ToString() + ")", &(*out_shape)[kMask], in);
    return true;
  }
  std::vector<ResourceRequest> ForwardResource(const std::vector<TShape>&) const override {
    return {ResourceRequest::kRandom};
  }
  std::vector<int> DeclareBackwardDependency(const std::vector<int>& out_grad,
                                             const std::vector<int>&,
                                             const std::vector<int>& out_data) const override {
    return {out_grad[kOut], out_data[kMask]};
  }
  std::vector<std::pair<int, void*>> ForwardInplaceOption(
      const std::vector<int>& in_data, const std::vector<void*>& out_data) const override {
    return {{in_data[0], out_data[kOut]}};
  }
  std::vector<std::pair<int, void*>> BackwardInplaceOption(
      const std::vector<int>& out_grad, const std::vector<int>&, const std::vector<int>&,
      const std::vector<void*>& in_grad) const override {
    return {{out_grad[kOut], in_grad[0]}};
  }
  Operator* CreateOperator(Context) const override { return new DropoutOp(param_); }
};

}  // namespace

void RegisterDropout() {
  internal::AddOperator(
      DropoutProp::kName, [] { return std::make_unique<DropoutProp>(); },
      "random dropout in training (uses kRandom); identity in inference");
}

}  // namespace depengine::op
