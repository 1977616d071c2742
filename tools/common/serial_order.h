// SerialOrderLog: checks that functions pushed from several threads ran as
// some serial program would, one that interleaves the threads' pushes, each
// thread's in its own order (the serializability of issue 2, point 3).
//
// Each function calls Start for each of its vars when it starts and Finish
// when it ends. A var's log is then the order of its conflicting uses: a
// write runs alone, so it starts after the uses before it finished and
// before the uses after it start. Conflicting uses that overlap are counted.
// After every function ran, FunctionsOnCycles builds the graph of the vars'
// orders plus each thread's push order: a cycle means two functions ran one
// way round on one var and the other way round on another, or against a
// thread's own order, and no serial program runs them so.
// Used by tests/threads_test.cc and tools/stress (`serializable`).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace depengine::support {

class SerialOrderLog {
 public:
  // Vars are 0 .. vars - 1, functions 0 .. functions - 1.
  SerialOrderLog(int vars, int functions)
      : vars_(std::make_unique<VarLog[]>(static_cast<std::size_t>(vars))),
        var_count_(vars),
        function_count_(functions) {}

  // Function `fn` starts using `var`, reading it or writing it.
  void Start(int var, int fn, bool write) {
    VarLog& log = vars_[static_cast<std::size_t>(var)];
    if (write) {
      if (log.writers.fetch_add(1) != 0 || log.readers.load() != 0) overlaps_.fetch_add(1);
    } else {
      log.readers.fetch_add(1);
      if (log.writers.load() != 0) overlaps_.fetch_add(1);
    }
    std::lock_guard<std::mutex> lock(log.mu);
    log.uses.push_back({fn, write});
  }

  // The function that called Start(var, ..., write) is done with `var`.
  void Finish(int var, bool write) {
    VarLog& log = vars_[static_cast<std::size_t>(var)];
    (write ? log.writers : log.readers).fetch_sub(1);
  }

  // Conflicting uses of one var seen running at the same time.
  int overlaps() const { return overlaps_.load(); }

  // Once every function has finished: `thread_orders[t]` lists the
  // functions thread t pushed, in push order. Returns how many functions
  // lie on or behind a cycle (0: the run is serializable).
  int FunctionsOnCycles(const std::vector<std::vector<int>>& thread_orders) const {
    const auto n = static_cast<std::size_t>(function_count_);
    std::vector<std::vector<int>> after(n);
    for (const auto& order : thread_orders) {
      for (std::size_t i = 0; i + 1 < order.size(); ++i) {
        after[static_cast<std::size_t>(order[i])].push_back(order[i + 1]);
      }
    }
    // On each var: a use after the write before it; a write also after the
    // reads since that write.
    for (int v = 0; v < var_count_; ++v) {
      VarLog& log = vars_[static_cast<std::size_t>(v)];
      std::lock_guard<std::mutex> lock(log.mu);
      int last_write = -1;
      std::vector<int> reads_since;
      for (const Use& u : log.uses) {
        if (last_write >= 0) after[static_cast<std::size_t>(last_write)].push_back(u.fn);
        if (u.write) {
          for (int r : reads_since) after[static_cast<std::size_t>(r)].push_back(u.fn);
          reads_since.clear();
          last_write = u.fn;
        } else {
          reads_since.push_back(u.fn);
        }
      }
    }
    // Kahn's algorithm: every function leaves the graph exactly when none
    // of its predecessors lies on a cycle.
    std::vector<int> indegree(n, 0);
    for (const auto& out : after) {
      for (int g : out) ++indegree[static_cast<std::size_t>(g)];
    }
    std::vector<int> ready;
    for (std::size_t f = 0; f < n; ++f) {
      if (indegree[f] == 0) ready.push_back(static_cast<int>(f));
    }
    int ordered = 0;
    while (!ready.empty()) {
      const int f = ready.back();
      ready.pop_back();
      ++ordered;
      for (int g : after[static_cast<std::size_t>(f)]) {
        if (--indegree[static_cast<std::size_t>(g)] == 0) ready.push_back(g);
      }
    }
    return function_count_ - ordered;
  }

 private:
  struct Use {
    int fn;
    bool write;
  };
  struct VarLog {
    std::mutex mu;
    std::vector<Use> uses;                    // guarded by mu
    std::atomic<int> readers{0}, writers{0};  // uses running now
  };
  std::unique_ptr<VarLog[]> vars_;
  const int var_count_;
  const int function_count_;
  std::atomic<int> overlaps_{0};
};

}  // namespace depengine::support
