// EngineOptions::FromEnv: the one place that reads the environment.
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>

#include "depengine/engine.h"

namespace depengine {
namespace {

// Reads a non-negative integer variable; unset or empty leaves `out` as is.
template <class T>
void ReadCount(const char* name, T* out) {
  const char* s = std::getenv(name);
  if (s == nullptr || *s == '\0') return;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < 0) {
    throw std::invalid_argument(std::string(name) + "=" + s +
                                ": expected a non-negative integer (0 = default)");
  }
  // Compared as unsigned: T may be wider than long long's positive range or
  // narrower (int), and a value that does not fit must not wrap.
  if (static_cast<unsigned long long>(v) >
      static_cast<unsigned long long>(std::numeric_limits<T>::max())) {
    throw std::invalid_argument(std::string(name) + "=" + s + ": too large (at most " +
                                std::to_string(std::numeric_limits<T>::max()) + ")");
  }
  *out = static_cast<T>(v);
}

}  // namespace

EngineOptions EngineOptions::FromEnv() {
  EngineOptions o;
  if (const char* s = std::getenv("DEPENGINE_ENGINE_TYPE"); s != nullptr && *s != '\0') {
    const std::string type = s;
    if (type == "NaiveEngine") {
      o.kind = EngineKind::kNaive;
    } else if (type == "ThreadedEnginePooled" || type == "ThreadedEngine") {
      o.kind = EngineKind::kPooled;
    } else if (type == "ThreadedEnginePerDevice") {
      o.kind = EngineKind::kPerDevice;
    } else {
      throw std::invalid_argument("DEPENGINE_ENGINE_TYPE=" + type +
                                  ": expected one of NaiveEngine, ThreadedEnginePooled, "
                                  "ThreadedEngine (MXNet's alias of ThreadedEnginePooled), "
                                  "ThreadedEnginePerDevice");
    }
  }
  ReadCount("DEPENGINE_CPU_WORKER_NTHREADS", &o.cpu_worker_threads);
  ReadCount("DEPENGINE_CPU_PRIORITY_NTHREADS", &o.cpu_priority_threads);
  ReadCount("DEPENGINE_GPU_WORKER_NTHREADS", &o.gpu_worker_threads);
  ReadCount("DEPENGINE_GPU_COPY_NTHREADS", &o.gpu_copy_threads);
  ReadCount("DEPENGINE_MAX_IN_FLIGHT", &o.max_in_flight);
  ReadCount("DEPENGINE_SIMULATED_GPUS", &o.simulated_gpus);
  if (const char* s = std::getenv("DEPENGINE_PROFILE"); s != nullptr) o.profile_path = s;
  if (const char* s = std::getenv("DEPENGINE_WATCHDOG_SECONDS"); s != nullptr && *s != '\0') {
    char* end = nullptr;
    o.watchdog_seconds = std::strtod(s, &end);
    if (*end != '\0' || !(o.watchdog_seconds >= 0)) {
      throw std::invalid_argument(std::string("DEPENGINE_WATCHDOG_SECONDS=") + s +
                                  ": expected a non-negative number of seconds (0 = off)");
    }
  }
  return o;
}

}  // namespace depengine
