// CounterArray: the counters that the bodies of W1, W2 and W5 increment, in
// storage of their own cache lines (64-byte aligned, its size rounded up to
// whole lines), for every runtime alike.
//
// Why: a counter that shares a line with data the pushing thread reads on
// every push moves between the cores twice per function, and the workload
// then measures that false sharing instead of the runtime. W1's counter
// once sat on depengine's stack beside the var list that each push reads,
// which cost it about a tenth of its time per function (docs/benchmarks.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace depengine::bench {

template <class T>
struct LineAlignedAllocator {
  using value_type = T;
  static constexpr std::size_t kLine = 64;

  LineAlignedAllocator() = default;
  template <class U>
  explicit LineAlignedAllocator(const LineAlignedAllocator<U>& /*other*/) {}

  T* allocate(std::size_t n) {
    const std::size_t bytes = (n * sizeof(T) + kLine - 1) / kLine * kLine;
    return static_cast<T*>(::operator new(bytes, std::align_val_t{kLine}));
  }
  void deallocate(T* p, std::size_t /*n*/) { ::operator delete(p, std::align_val_t{kLine}); }

  template <class U>
  bool operator==(const LineAlignedAllocator<U>& /*other*/) const {
    return true;
  }
};

using CounterArray = std::vector<std::uint64_t, LineAlignedAllocator<std::uint64_t>>;

}  // namespace depengine::bench
