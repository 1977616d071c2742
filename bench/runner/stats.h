// Order statistics of a few repetitions.
#pragma once

#include <vector>

namespace depengine::bench {

struct Summary {
  double median = 0;  // the middle value; the mean of the two middle ones for an even count
  double min = 0;
  double max = 0;
};

// Summarizes `samples`; all zero when there are none.
Summary Summarize(std::vector<double> samples);

}  // namespace depengine::bench
