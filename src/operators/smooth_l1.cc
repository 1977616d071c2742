// smooth_l1, written the way seed 000 walks through it: a unary simple op
// with a scalar (sigma), the default shape function, a forward function, a
// gradient that needs the input (UnaryGradFunctionT2), no in-place forward
// (the gradient reads the input) and an in-place gradient (out_grad is not
// needed once in_grad is computed).
//
//   f(x) = 0.5 * (sigma * x)^2     if |x| < 1 / sigma^2
//          |x| - 0.5 / sigma^2     otherwise
#include "depengine/simple_op.h"
#include "operators/registry.h"

namespace depengine::op {
namespace {

// The scalar mappers (the seed's mshadow_op::smooth_l1_loss and
// smooth_l1_gradient): a is x, b is sigma^2.
struct smooth_l1_loss {
  template <class T>
  static T Map(T a, T b) {
    if (a > T(1) / b) return a - T(0.5) / b;
    if (a < T(-1) / b) return -a - T(0.5) / b;
    return T(0.5) * a * a * b;
  }
};
struct smooth_l1_gradient {
  template <class T>
  static T Map(T a, T b) {
    if (a > T(1) / b) return T(1);
    if (a < T(-1) / b) return T(-1);
    return b * a;
  }
};

// The default shape function, written out as in the seed.
TShape SmoothL1Shape_(const TShape& src, const EnvArguments&) { return TShape(src); }

void SmoothL1Forward_(const TBlob& src, const EnvArguments& env, TBlob* ret, OpReqType req,
                      RunContext) {
  const double sigma2 = env.scalar * env.scalar;
  SwitchType(ret->type_flag_, [&](auto tag) {
    using DType = decltype(tag);
    const DType* in = src.dptr<DType>();
    DType* out = ret->dptr<DType>();
    for (std::size_t i = 0, n = ret->Size(); i < n; ++i) {
      Assign(out[i], req, smooth_l1_loss::Map(in[i], static_cast<DType>(sigma2)));
    }
  });
}

void SmoothL1BackwardUseIn_(const OutputGrad& out_grad, const Input0& in_data0,
                            const EnvArguments& env, TBlob* in_grad, OpReqType req, RunContext) {
  const double sigma2 = env.scalar * env.scalar;
  SwitchType(in_grad->type_flag_, [&](auto tag) {
    using DType = decltype(tag);
    const DType* src = in_data0.data.dptr<DType>();
    const DType* ograd = out_grad.data.dptr<DType>();
    DType* igrad = in_grad->dptr<DType>();  // may alias ograd (kInplaceOutIn)
    for (std::size_t i = 0, n = in_grad->Size(); i < n; ++i) {
      const DType g = ograd[i];
      Assign(igrad[i], req, g * smooth_l1_gradient::Map(src[i], static_cast<DType>(sigma2)));
    }
  });
}

}  // namespace

void RegisterSmoothL1() {
  internal::AddSimpleOp("smooth_l1")
      .set_shape_function(SmoothL1Shape_)
      .set_function(DeviceType::kCPU, SmoothL1Forward_, kNoInplace)
      .set_gradient(DeviceType::kCPU, SmoothL1BackwardUseIn_, kInplaceOutIn)
      .set_enable_scalar(true)
      .describe("Calculate Smooth L1 Loss(lhs, scalar)");
}

}  // namespace depengine::op
