// Elementwise simple ops: array-array add/sub/mul/div, array-scalar
// arithmetic, and a few unary functions that exercise each gradient kind
// (out_grad only, output value, input).
#include <cmath>

#include "operators/kernels.h"
#include "operators/registry.h"

namespace depengine::op {
namespace {

using internal::BinaryMap;
using internal::UnaryMap;

// in_grad loops over one or two gradients, reading every input of element
// i before writing it, so a gradient may alias out_grad.
template <class F>
void UnaryGradLoop(const TBlob& g, const TBlob& aux, TBlob* gx, OpReqType req, F f) {
  if (req == kNullOp) return;
  SwitchType(gx->type_flag_, [&](auto tag) {
    using T = decltype(tag);
    const T* gp = g.dptr<T>();
    const T* ap = aux.empty() ? nullptr : aux.dptr<T>();
    T* out = gx->dptr<T>();
    for (std::size_t i = 0, n = gx->Size(); i < n; ++i) {
      const T v = f(gp[i], ap ? ap[i] : T(0));
      Assign(out[i], req, v);
    }
  });
}

template <class F>
void BinaryGradLoop(const TBlob& g, const TBlob& lhs, const TBlob& rhs, TBlob* gl, TBlob* gr,
                    OpReqType req_l, OpReqType req_r, F f) {
  SwitchType(g.type_flag_, [&](auto tag) {
    using T = decltype(tag);
    const T* gp = g.dptr<T>();
    const T* lp = lhs.empty() ? nullptr : lhs.dptr<T>();
    const T* rp = rhs.empty() ? nullptr : rhs.dptr<T>();
    T* lo = req_l == kNullOp ? nullptr : gl->dptr<T>();
    T* ro = req_r == kNullOp ? nullptr : gr->dptr<T>();
    for (std::size_t i = 0, n = g.Size(); i < n; ++i) {
      const auto [dl, dr] = f(gp[i], lp ? lp[i] : T(0), rp ? rp[i] : T(0));
      if (lo) Assign(lo[i], req_l, static_cast<T>(dl));
      if (ro) Assign(ro[i], req_r, static_cast<T>(dr));
    }
  });
}

template <class Op>
void BinaryForward(const TBlob& lhs, const TBlob& rhs, const EnvArguments&, TBlob* ret,
                   OpReqType req, RunContext) {
  BinaryMap(lhs, rhs, *ret, req, Op{});
}

void AddGrad(const OutputGrad& g, const EnvArguments&, TBlob* gl, TBlob* gr, OpReqType rl,
             OpReqType rr, RunContext) {
  BinaryGradLoop(g.data, TBlob(), TBlob(), gl, gr, rl, rr, [](auto gi, auto, auto) {
    return std::pair{gi, gi};
  });
}
void SubGrad(const OutputGrad& g, const EnvArguments&, TBlob* gl, TBlob* gr, OpReqType rl,
             OpReqType rr, RunContext) {
  BinaryGradLoop(g.data, TBlob(), TBlob(), gl, gr, rl, rr, [](auto gi, auto, auto) {
    return std::pair{gi, -gi};
  });
}
void MulGrad(const OutputGrad& g, const Input0& l, const Input1& r, const EnvArguments&, TBlob* gl,
             TBlob* gr, OpReqType rl, OpReqType rr, RunContext) {
  BinaryGradLoop(g.data, l.data, r.data, gl, gr, rl, rr, [](auto gi, auto a, auto b) {
    return std::pair{gi * b, gi * a};
  });
}
void DivGrad(const OutputGrad& g, const Input0& l, const Input1& r, const EnvArguments&, TBlob* gl,
             TBlob* gr, OpReqType rl, OpReqType rr, RunContext) {
  BinaryGradLoop(g.data, l.data, r.data, gl, gr, rl, rr, [](auto gi, auto a, auto b) {
    return std::pair{gi / b, -gi * a / (b * b)};
  });
}

// Array-scalar ops: y = f(x, s).
enum ScalarKind { kPlus, kMinus, kRMinus, kTimes, kOver, kROver };

template <ScalarKind kKind>
void ScalarOp(const TBlob& src, const EnvArguments& env, TBlob* ret, OpReqType req, RunContext) {
  const double s = env.scalar;
  UnaryMap(src, *ret, req, [s](auto x) {
    if constexpr (kKind == kPlus) return x + s;
    if constexpr (kKind == kMinus) return x - s;
    if constexpr (kKind == kRMinus) return s - x;
    if constexpr (kKind == kTimes) return x * s;
    if constexpr (kKind == kOver) return x / s;
    if constexpr (kKind == kROver) return s / x;
  });
}

void IdentityGrad(const OutputGrad& g, const EnvArguments&, TBlob* gx, OpReqType req, RunContext) {
  UnaryGradLoop(g.data, TBlob(), gx, req, [](auto gi, auto) { return gi; });
}
void NegateGrad(const OutputGrad& g, const EnvArguments&, TBlob* gx, OpReqType req, RunContext) {
  UnaryGradLoop(g.data, TBlob(), gx, req, [](auto gi, auto) { return -gi; });
}
void MulScalarGrad(const OutputGrad& g, const EnvArguments& env, TBlob* gx, OpReqType req,
                   RunContext) {
  const double s = env.scalar;
  UnaryGradLoop(g.data, TBlob(), gx, req,
                [s](auto gi, auto) { return static_cast<decltype(gi)>(gi * s); });
}
void DivScalarGrad(const OutputGrad& g, const EnvArguments& env, TBlob* gx, OpReqType req,
                   RunContext) {
  const double s = env.scalar;
  UnaryGradLoop(g.data, TBlob(), gx, req,
                [s](auto gi, auto) { return static_cast<decltype(gi)>(gi / s); });
}
void RDivScalarGrad(const OutputGrad& g, const Input0& x, const EnvArguments& env, TBlob* gx,
                    OpReqType req, RunContext) {
  const double s = env.scalar;
  UnaryGradLoop(g.data, x.data, gx, req,
                [s](auto gi, auto xi) { return static_cast<decltype(gi)>(-gi * s / (xi * xi)); });
}

// Unary functions, one per gradient kind.
void Negative(const TBlob& src, const EnvArguments&, TBlob* ret, OpReqType req, RunContext) {
  UnaryMap(src, *ret, req, [](auto x) { return -x; });
}
void Exp(const TBlob& src, const EnvArguments&, TBlob* ret, OpReqType req, RunContext) {
  UnaryMap(src, *ret, req, [](auto x) { return std::exp(x); });
}
void ExpGrad(const OutputGrad& g, const OutputValue& y, const EnvArguments&, TBlob* gx,
             OpReqType req, RunContext) {
  UnaryGradLoop(g.data, y.data, gx, req, [](auto gi, auto yi) { return gi * yi; });
}
void Square(const TBlob& src, const EnvArguments&, TBlob* ret, OpReqType req, RunContext) {
  UnaryMap(src, *ret, req, [](auto x) { return x * x; });
}
void SquareGrad(const OutputGrad& g, const Input0& x, const EnvArguments&, TBlob* gx, OpReqType req,
                RunContext) {
  UnaryGradLoop(g.data, x.data, gx, req, [](auto gi, auto xi) { return 2 * xi * gi; });
}

}  // namespace

void RegisterElemwiseOps() {
  constexpr DeviceType cpu = DeviceType::kCPU;
  using internal::AddSimpleOp;
  AddSimpleOp("elemwise_add")
      .set_function(cpu, BinaryForward<internal::Plus>, kInplaceLhsOut)
      .set_gradient(cpu, AddGrad, kInplaceOutLhs)
      .describe("lhs + rhs");
  AddSimpleOp("elemwise_sub")
      .set_function(cpu, BinaryForward<internal::Minus>, kInplaceLhsOut)
      .set_gradient(cpu, SubGrad, kInplaceOutLhs)
      .describe("lhs - rhs");
  AddSimpleOp("elemwise_mul")
      .set_function(cpu, BinaryForward<internal::Mul>, kInplaceLhsOut)
      .set_gradient(cpu, MulGrad, kInplaceOutLhs)
      .describe("lhs * rhs");
  AddSimpleOp("elemwise_div")
      .set_function(cpu, BinaryForward<internal::Div>, kInplaceLhsOut)
      .set_gradient(cpu, DivGrad, kInplaceOutLhs)
      .describe("lhs / rhs");
  AddSimpleOp("_plus_scalar")
      .set_function(cpu, ScalarOp<kPlus>, kInplaceInOut)
      .set_gradient(cpu, IdentityGrad, kInplaceOutIn)
      .set_enable_scalar(true)
      .describe("data + scalar");
  AddSimpleOp("_minus_scalar")
      .set_function(cpu, ScalarOp<kMinus>, kInplaceInOut)
      .set_gradient(cpu, IdentityGrad, kInplaceOutIn)
      .set_enable_scalar(true)
      .describe("data - scalar");
  AddSimpleOp("_rminus_scalar")
      .set_function(cpu, ScalarOp<kRMinus>, kInplaceInOut)
      .set_gradient(cpu, NegateGrad, kInplaceOutIn)
      .set_enable_scalar(true)
      .describe("scalar - data");
  AddSimpleOp("_mul_scalar")
      .set_function(cpu, ScalarOp<kTimes>, kInplaceInOut)
      .set_gradient(cpu, MulScalarGrad, kInplaceOutIn)
      .set_enable_scalar(true)
      .describe("data * scalar");
  AddSimpleOp("_div_scalar")
      .set_function(cpu, ScalarOp<kOver>, kInplaceInOut)
      .set_gradient(cpu, DivScalarGrad, kInplaceOutIn)
      .set_enable_scalar(true)
      .describe("data / scalar");
  AddSimpleOp("_rdiv_scalar")
      .set_function(cpu, ScalarOp<kROver>, kNoInplace)  // the gradient reads the input
      .set_gradient(cpu, RDivScalarGrad, kInplaceOutIn)
      .set_enable_scalar(true)
      .describe("scalar / data");
  AddSimpleOp("negative")
      .set_function(cpu, Negative, kInplaceInOut)
      .set_gradient(cpu, NegateGrad, kInplaceOutIn)
      .describe("-data (gradient from out_grad only)");
  AddSimpleOp("exp")
      .set_function(cpu, Exp, kInplaceInOut)
      .set_gradient(cpu, ExpGrad, kInplaceOutIn)
      .describe("e^data (gradient from the output value)");
  AddSimpleOp("square")
      .set_function(cpu, Square, kNoInplace)
      .set_gradient(cpu, SquareGrad, kInplaceOutIn)
      .describe("data^2 (gradient from the input)");
}

}  // namespace depengine::op
