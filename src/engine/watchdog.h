// Watchdog: a debugging aid, off by default (EngineOptions::watchdog_seconds,
// DEPENGINE_WATCHDOG_SECONDS). It tracks the functions that have started and
// not finished, and reports to stderr, once each, the names and ages of
// those running longer than the limit. It looks every quarter of the limit
// (between 10 ms and 1 s), so a report comes at most 1.25 limits (or the
// limit plus a second) after the function started: an async function whose
// callback is never called shows up here instead of as a silent hang. The
// report names the vars the function reads and writes (as the profiler's
// dumps name them, SetVarName's names included) and how many functions the
// engine holds: those that use the same vars wait for this one.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace depengine::internal {

class Watchdog {
 public:
  // What only the engine knows, for the report; called by the watchdog's
  // thread with its own lock released (so these may take the engine's
  // locks, and a slow stderr holds up no function's start or end).
  struct EngineView {
    std::function<std::string(std::uint64_t)> var_label;  // a var id as the dumps show it
    std::function<std::int64_t()> pending;  // functions pushed and not finished (about)
  };
  Watchdog(double limit_seconds, EngineView view);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // `key` identifies one execution until Finished(key); `reads` and
  // `writes` are its vars' ids (Var::profile_id).
  void Started(const void* key, const char* name, std::vector<std::uint64_t> reads,
               std::vector<std::uint64_t> writes);
  void Finished(const void* key);

 private:
  struct Entry {
    std::string name;
    std::vector<std::uint64_t> reads, writes;
    std::chrono::steady_clock::time_point start;
    bool reported = false;
  };
  void Run();
  // "[a, b]": the vars' labels.
  std::string Labels(const std::vector<std::uint64_t>& ids) const;

  const std::chrono::duration<double> limit_;
  const EngineView view_;
  const std::chrono::milliseconds scan_period_;  // how often Run looks
  std::mutex mu_;
  std::condition_variable cv_;                      // waited on with mu_
  std::unordered_map<const void*, Entry> running_;  // guarded by mu_
  bool stop_ = false;                               // guarded by mu_
  const pid_t creator_pid_;
  std::unique_ptr<std::thread> thread_;  // started last; leaked in a forked child
};

}  // namespace depengine::internal
