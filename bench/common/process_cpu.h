// ProcessCpuSeconds: the CPU time the whole process has used so far, for the
// benchmark programs that report CPU beside wall time (depengine-bench's
// "CPU ns/op", depengine-idle-cost, depengine-ticket-proto).
#pragma once

#include <sys/resource.h>

namespace depengine::bench {

// User plus system time of every thread of the process, in seconds. The
// kernel's accounting has about a millisecond's resolution, so time a region
// long enough for that not to matter.
inline double ProcessCpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
}

}  // namespace depengine::bench
