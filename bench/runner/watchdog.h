// Watchdog: ends the process when one run takes longer than its limit, so
// that an engine that never finishes (a lost wake-up, a deadlock) fails the
// benchmark with a message naming the run instead of hanging it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace depengine::bench {

class Watchdog {
 public:
  // Starts the watching thread; `limit` applies to each armed run.
  explicit Watchdog(std::chrono::seconds limit);
  // Stops the watching thread.
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Starts timing a run named `what` (e.g. "W2 parallel on
  // ThreadedEnginePooled"). If it is not disarmed within the limit, prints
  // what hung to stderr and exits the process with status 1.
  void Arm(std::string what);
  // The run finished.
  void Disarm();

 private:
  void Watch();

  const std::chrono::seconds limit_;
  std::mutex mu_;
  std::condition_variable cv_;  // waited on with mu_; notified on Arm, Disarm and stop
  bool armed_ = false;          // guarded by mu_
  bool stop_ = false;           // guarded by mu_
  std::string what_;            // guarded by mu_
  std::chrono::steady_clock::time_point deadline_;  // guarded by mu_
  std::thread thread_;          // started last, after every field above
};

// Arms `dog` for the life of the scope.
class WatchdogScope {
 public:
  WatchdogScope(Watchdog& dog, std::string what) : dog_(dog) { dog_.Arm(std::move(what)); }
  ~WatchdogScope() { dog_.Disarm(); }
  WatchdogScope(const WatchdogScope&) = delete;
  WatchdogScope& operator=(const WatchdogScope&) = delete;

 private:
  Watchdog& dog_;
};

}  // namespace depengine::bench
