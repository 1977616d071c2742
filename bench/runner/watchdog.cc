#include "runner/watchdog.h"

#include <cstdio>
#include <cstdlib>

namespace depengine::bench {

Watchdog::Watchdog(std::chrono::seconds limit) : limit_(limit), thread_([this] { Watch(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
}

void Watchdog::Arm(std::string what) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    armed_ = true;
    what_ = std::move(what);
    deadline_ = std::chrono::steady_clock::now() + limit_;
  }
  cv_.notify_one();
}

void Watchdog::Disarm() {
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = false;
}

void Watchdog::Watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (!armed_) {
      cv_.wait(lock);
      continue;
    }
    if (std::chrono::steady_clock::now() < deadline_) {
      cv_.wait_until(lock, deadline_);
      continue;
    }
    std::fprintf(stderr,
                 "depengine-bench: FAILED: %s did not finish within %lld s (an engine hang?); "
                 "raise the limit with --run-timeout if it is only slow\n",
                 what_.c_str(), static_cast<long long>(limit_.count()));
    std::fflush(stderr);
    // The engine's threads may hold any lock: leave without running destructors.
    std::_Exit(1);
  }
}

}  // namespace depengine::bench
