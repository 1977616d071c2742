// Resident memory of the calling process, as Linux reports it.
#pragma once

#include <cstddef>

namespace depengine::bench {

// The process's resident set now, in bytes (/proc/self/statm); 0 if unknown.
std::size_t CurrentRssBytes();

// The process's peak resident set since it started or since the last
// ResetPeakRss(), in bytes (VmHWM of /proc/self/status, else getrusage's
// ru_maxrss); 0 if unknown.
std::size_t PeakRssBytes();

// Lowers the peak that PeakRssBytes reports to the current resident set
// (writes 5 to /proc/self/clear_refs). Returns false where the kernel does
// not allow it; the peak then stays the process's lifetime peak.
bool ResetPeakRss();

}  // namespace depengine::bench
