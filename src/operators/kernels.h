// Elementwise loops shared by NDArray arithmetic and the simple ops. Each
// runs inside an engine function; `out` may alias an input (every element
// is read before it is written).
#pragma once

#include <cstddef>

#include "depengine/operator.h"
#include "depengine/tensor.h"

namespace depengine::internal {

// out[i] (as req says) = f(in[i]).
template <class F>
void UnaryMap(const TBlob& in, const TBlob& out, OpReqType req, F f) {
  if (req == kNullOp) return;
  SwitchType(out.type_flag_, [&](auto tag) {
    using T = decltype(tag);
    const T* a = in.dptr<T>();
    T* o = out.dptr<T>();
    const std::size_t n = out.Size();
    for (std::size_t i = 0; i < n; ++i) Assign(o[i], req, static_cast<T>(f(a[i])));
  });
}

// out[i] (as req says) = f(lhs[i], rhs[i]).
template <class F>
void BinaryMap(const TBlob& lhs, const TBlob& rhs, const TBlob& out, OpReqType req, F f) {
  if (req == kNullOp) return;
  SwitchType(out.type_flag_, [&](auto tag) {
    using T = decltype(tag);
    const T* a = lhs.dptr<T>();
    const T* b = rhs.dptr<T>();
    T* o = out.dptr<T>();
    const std::size_t n = out.Size();
    for (std::size_t i = 0; i < n; ++i) Assign(o[i], req, static_cast<T>(f(a[i], b[i])));
  });
}

struct Plus {
  template <class T>
  T operator()(T a, T b) const {
    return a + b;
  }
};
struct Minus {
  template <class T>
  T operator()(T a, T b) const {
    return a - b;
  }
};
struct Mul {
  template <class T>
  T operator()(T a, T b) const {
    return a * b;
  }
};
struct Div {
  template <class T>
  T operator()(T a, T b) const {
    return a / b;
  }
};

}  // namespace depengine::internal
