// EngineOptions::FromEnv: the one place that reads the environment.
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "depengine/engine.h"

namespace depengine {
namespace {

// The value of `name` without surrounding whitespace (an exported "4 "
// reads as "4", like " 4"); nullopt when unset, empty or blank.
std::optional<std::string> ReadTrimmed(const char* name) {
  // getenv races only with a setenv elsewhere, which would be the caller's.
  const char* s = std::getenv(name);  // NOLINT(concurrency-mt-unsafe)
  if (s == nullptr) return std::nullopt;
  std::string v = s;
  const auto blank = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!v.empty() && blank(v.back())) v.pop_back();
  std::size_t first = 0;
  while (first < v.size() && blank(v[first])) ++first;
  v.erase(0, first);
  if (v.empty()) return std::nullopt;
  return v;
}

// Reads a non-negative decimal integer variable (an optional leading '+'),
// at most `max`; unset, empty or blank leaves `out` as is. `zero` says what
// 0 means, for the message.
template <class T>
void ReadCount(const char* name, T* out, T max = std::numeric_limits<T>::max(),
               const char* zero = "0 = default") {
  const std::optional<std::string> s = ReadTrimmed(name);
  if (!s) return;
  const auto fail = [&](const std::string& why) {
    throw std::invalid_argument(std::string(name) + "=" + *s + ": " + why);
  };
  const std::size_t digits = (*s)[0] == '+' ? 1 : 0;
  if (digits == s->size() || s->find_first_not_of("0123456789", digits) != std::string::npos) {
    fail(std::string("expected a non-negative integer (") + zero + ")");
  }
  // Digits only: strtoull neither negates nor skips anything, and a value
  // beyond unsigned long long is ERANGE rather than a wrapped number.
  errno = 0;
  const unsigned long long v = std::strtoull(s->c_str() + digits, nullptr, 10);
  // Compared as unsigned: T may be as wide as unsigned long long (size_t)
  // or narrower (int), and a value that does not fit must not wrap.
  if (errno == ERANGE || v > static_cast<unsigned long long>(max)) {
    fail("too large (at most " + std::to_string(max) + ")");
  }
  *out = static_cast<T>(v);
}

}  // namespace

EngineOptions EngineOptions::FromEnv() {
  EngineOptions o;
  if (const std::optional<std::string> s = ReadTrimmed("DEPENGINE_ENGINE_TYPE")) {
    const std::string& type = *s;
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
  ReadCount("DEPENGINE_WORKER_SPIN_US", &o.worker_spin_us, EngineOptions::kMaxWorkerSpinUs,
            "0 = sleep at once");
  // NOLINTNEXTLINE(concurrency-mt-unsafe): as in ReadTrimmed
  if (const char* s = std::getenv("DEPENGINE_PROFILE"); s != nullptr) o.profile_path = s;
  if (const std::optional<std::string> s = ReadTrimmed("DEPENGINE_WATCHDOG_SECONDS")) {
    char* end = nullptr;
    o.watchdog_seconds = std::strtod(s->c_str(), &end);
    if (*end != '\0' || !(o.watchdog_seconds >= 0)) {
      throw std::invalid_argument("DEPENGINE_WATCHDOG_SECONDS=" + *s +
                                  ": expected a non-negative number of seconds (0 = off)");
    }
  }
  return o;
}

}  // namespace depengine
