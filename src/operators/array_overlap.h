// Whether two arrays are views whose element ranges overlap without
// coinciding: the case where an elementwise update must read one of them
// whole first to keep the serial result (a[1:4] += a[0:3]).
#pragma once

#include <cstddef>

#include "depengine/ndarray.h"

namespace depengine::internal {

// True when `a` and `b` are views of one storage whose element ranges
// overlap without coinciding (e.g. a.Slice(1, 4) and a.Slice(0, 3)).
inline bool OverlapsPartly(const NDArray& a, const NDArray& b) {
  if (!a.SharesStorageWith(b)) return false;
  const char* pa = static_cast<const char*>(a.data().dptr_);
  const char* pb = static_cast<const char*>(b.data().dptr_);
  const std::size_t na = a.Size() * TypeSize(a.dtype()), nb = b.Size() * TypeSize(b.dtype());
  return pa != pb && pa < pb + nb && pb < pa + na;
}

}  // namespace depengine::internal
