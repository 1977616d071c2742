// Order statistics of a few repetitions.
#pragma once

#include <vector>

namespace depengine::bench::peers {

// The middle value of `v` (the mean of the two middle ones for an even
// count); NaN when `v` is empty.
double Median(std::vector<double> v);
double Min(const std::vector<double>& v);  // NaN when empty
double Max(const std::vector<double>& v);  // NaN when empty

}  // namespace depengine::bench::peers
