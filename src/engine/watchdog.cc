#include "engine/watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace depengine::internal {

Watchdog::Watchdog(double limit_seconds, EngineView view)
    : limit_(limit_seconds),
      view_(std::move(view)),
      // A quarter of the limit, so that a report comes at most 1.25 limits
      // after the function started; at least 10 ms (a tiny limit must not
      // make the thread spin) and at most a second.
      // (Clamped as a double: a huge limit must not overflow the cast.)
      scan_period_(static_cast<std::int64_t>(1000 * std::clamp(limit_seconds / 4, 0.01, 1.0))),
      creator_pid_(getpid()),
      thread_(std::make_unique<std::thread>([this] { Run(); })) {}

Watchdog::~Watchdog() {
  if (getpid() != creator_pid_) {
    (void)thread_.release();  // a forked child: the thread stayed in the parent
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_->join();
}

void Watchdog::Started(const void* key, const char* name, std::vector<std::uint64_t> reads,
                       std::vector<std::uint64_t> writes) {
  std::lock_guard<std::mutex> lock(mu_);
  running_[key] = Entry{name != nullptr ? name : "<unnamed>", std::move(reads), std::move(writes),
                        std::chrono::steady_clock::now()};
}

std::string Watchdog::Labels(const std::vector<std::uint64_t>& ids) const {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ", ";
    out += view_.var_label(ids[i]);
  }
  return out + "]";
}

void Watchdog::Finished(const void* key) {
  std::lock_guard<std::mutex> lock(mu_);
  running_.erase(key);
}

void Watchdog::Run() {
  // A report is written with mu_ released: every function's start and end
  // takes mu_, and a write to a stderr that nobody reads (a full pipe, a
  // stopped terminal) would otherwise stop the whole engine. Under mu_ the
  // scan only copies what it reports and marks it reported.
  struct Report {
    std::string name;
    std::vector<std::uint64_t> reads, writes;
    double age_seconds;
  };
  std::vector<Report> due;
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, scan_period_, [this] { return stop_; })) {
    const auto now = std::chrono::steady_clock::now();
    for (auto& [key, e] : running_) {
      const std::chrono::duration<double> age = now - e.start;
      if (age < limit_ || e.reported) continue;
      e.reported = true;
      due.push_back(Report{e.name, e.reads, e.writes, age.count()});
    }
    if (due.empty()) continue;
    lock.unlock();
    for (const Report& r : due) {
      const std::string reads = Labels(r.reads), writes = Labels(r.writes);
      std::fprintf(stderr,
                   "depengine watchdog: function '%s' has been running for %.1f s "
                   "(limit %.1f s); it reads %s and writes %s; about %lld functions pushed "
                   "to its engine have not finished, and those that use its vars wait for it; "
                   "an async function whose callback is never called never finishes\n",
                   r.name.c_str(), r.age_seconds, limit_.count(), reads.c_str(), writes.c_str(),
                   static_cast<long long>(view_.pending()));
    }
    due.clear();
    lock.lock();
  }
}

}  // namespace depengine::internal
