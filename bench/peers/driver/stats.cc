#include "driver/stats.h"

#include <algorithm>
#include <limits>

namespace depengine::bench::peers {

double Median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

double Min(const std::vector<double>& v) {
  return v.empty() ? std::numeric_limits<double>::quiet_NaN() : *std::min_element(v.begin(), v.end());
}

double Max(const std::vector<double>& v) {
  return v.empty() ? std::numeric_limits<double>::quiet_NaN() : *std::max_element(v.begin(), v.end());
}

}  // namespace depengine::bench::peers
