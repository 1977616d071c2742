// TestScale: a factor for loop counts in slow builds (sanitizers, valgrind).
// DEPENGINE_TEST_SCALE=0.25 runs a quarter of the iterations; the CI's
// sanitizer phases set it (tools/ci/sanitizers.sh). Unset, empty or not a
// positive number: 1.
#pragma once

#include <cstdlib>

namespace depengine::support {

inline double TestScale() {
  const char* s = std::getenv("DEPENGINE_TEST_SCALE");
  if (s == nullptr || *s == '\0') return 1.0;
  const double v = std::atof(s);
  return v > 0 ? v : 1.0;
}

// n scaled by TestScale(), and at least `min`.
template <class Int>
Int Scaled(Int n, Int min = 1) {
  const auto v = static_cast<Int>(static_cast<double>(n) * TestScale());
  return v < min ? min : v;
}

}  // namespace depengine::support
