// Async functions finished by a thread outside the engine (docs/guide.md,
// "Async functions").
//
// A program reads 16 chunks from a slow "device", sums each chunk and adds
// the sums up. Written serially it waits for each read in turn. Pushed to
// the engine, each read is an async function: its body only hands the
// request and the callback to the device's thread and returns, so no engine
// worker waits, and the reads overlap. The device's thread calls the
// callback when the data is there; the engine then runs what depends on it.
//
// Checks its result against the serial program and exits 1 on a mismatch.
// Usage: async_io
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>
#include <numeric>
#include <queue>
#include <thread>
#include <vector>

#include "depengine/engine.h"

using namespace depengine;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kChunks = 16;
constexpr int kChunkSize = 4096;
constexpr auto kLatency = std::chrono::milliseconds(5);

// What chunk `i` holds, so that the result can be checked.
int ValueAt(int chunk, int k) { return (chunk * 31 + k) % 97; }

// A device that answers every request kLatency after it was made, from a
// thread of its own, however many requests are outstanding.
class SlowDevice {
 public:
  SlowDevice() : thread_([this] { Serve(); }) {}
  ~SlowDevice() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  // Fills `*out` with chunk `chunk`, then calls `done`: later, on the
  // device's thread.
  void Read(int chunk, std::vector<int>* out, std::function<void()> done) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.push({Clock::now() + kLatency, chunk, out, std::move(done)});
    }
    cv_.notify_one();
  }

 private:
  struct Request {
    Clock::time_point due;
    int chunk;
    std::vector<int>* out;
    std::function<void()> done;
    bool operator>(const Request& other) const { return due > other.due; }
  };

  void Serve() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (requests_.empty()) {
        if (stop_) return;
        cv_.wait(lock);
        continue;
      }
      // A copy: wait_until keeps a reference to its deadline while the lock
      // is released, and a Read meanwhile may move the queue's storage.
      const Clock::time_point due = requests_.top().due;
      if (Clock::now() < due) {
        cv_.wait_until(lock, due);
        continue;
      }
      Request r = requests_.top();
      requests_.pop();
      lock.unlock();
      r.out->resize(kChunkSize);
      for (int k = 0; k < kChunkSize; ++k) (*r.out)[static_cast<std::size_t>(k)] = ValueAt(r.chunk, k);
      r.done();  // the engine's callback: finishes the read
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  // Guarded by mu_.
  std::priority_queue<Request, std::vector<Request>, std::greater<>> requests_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;  // last: starts once the fields above exist
};

long long Expected() {
  long long total = 0;
  for (int i = 0; i < kChunks; ++i) {
    for (int k = 0; k < kChunkSize; ++k) total += ValueAt(i, k);
  }
  return total;
}

}  // namespace

int main() {
  SlowDevice device;
  // The engine kind and its threads come from DEPENGINE_ENGINE_TYPE and the
  // like (EngineOptions::FromEnv), so every kind can run this program.
  auto engine = CreateEngine(EngineOptions::FromEnv());
  const Context cpu = Context::CPU();

  std::vector<std::vector<int>> chunk(kChunks);
  std::vector<long long> chunk_sum(kChunks);
  long long total = 0;
  std::vector<VarHandle> chunk_var(kChunks), sum_var(kChunks);
  for (int i = 0; i < kChunks; ++i) {
    chunk_var[i] = engine->NewVariable();
    sum_var[i] = engine->NewVariable();
  }
  VarHandle total_var = engine->NewVariable();

  const auto start = Clock::now();
  for (int i = 0; i < kChunks; ++i) {
    // The read writes chunk[i]. Its body returns at once; the device's
    // thread finishes it by calling `done`, a copy of the callback.
    engine->PushAsync(
        [&, i](RunContext, CallbackOnComplete done) {
          device.Read(i, &chunk[static_cast<std::size_t>(i)], [done] { done(); });
        },
        cpu, {}, {chunk_var[i]}, FnProperty::kNormal, 0, "read");
    // Runs once that read is finished, on an engine worker.
    engine->PushSync(
        [&, i](RunContext) {
          const auto& c = chunk[static_cast<std::size_t>(i)];
          chunk_sum[static_cast<std::size_t>(i)] = std::accumulate(c.begin(), c.end(), 0LL);
        },
        cpu, {chunk_var[i]}, {sum_var[i]}, FnProperty::kNormal, 0, "sum");
    // Every add writes `total`: they run one at a time, in push order.
    engine->PushSync([&, i](RunContext) { total += chunk_sum[static_cast<std::size_t>(i)]; }, cpu,
                     {sum_var[i]}, {total_var}, FnProperty::kNormal, 0, "add");
  }
  // Every push above returned at once; this waits for the last add.
  engine->WaitForVar(total_var);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();

  std::printf("%d reads of %lld ms each, overlapped: %.1f ms in all (one after the other: %lld ms or more)\n",
              kChunks, static_cast<long long>(kLatency.count()), ms,
              static_cast<long long>(kLatency.count()) * kChunks);
  for (int i = 0; i < kChunks; ++i) {
    engine->DeleteVariable({}, cpu, chunk_var[i]);
    engine->DeleteVariable({}, cpu, sum_var[i]);
  }
  engine->DeleteVariable({}, cpu, total_var);
  engine->WaitForAll();

  const long long expected = Expected();
  std::printf("total %lld, serial program %lld: %s\n", total, expected,
              total == expected ? "equal" : "DIFFERENT");
  return total == expected ? 0 : 1;
}
