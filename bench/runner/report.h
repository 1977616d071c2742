// depengine-bench's output: the Markdown table and the JSON file.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "runner/memory_probe.h"
#include "runner/stats.h"

namespace depengine::bench {

// One (case, engine) pair: its timed repetitions and memory figures.
struct ReportRow {
  std::string case_id;  // "W4.T10", or kPendingMemoryId
  std::string title;    // "W4 random DAG, T=10 us"
  std::string engine;   // EngineKindName
  std::size_t ops = 0;  // functions per run
  bool ok = true;       // every run's check passed
  std::string error;    // the first failed check, when !ok
  std::vector<double> seconds;  // the timed repetitions, in run order
  // Each repetition's process CPU time (WorkloadResult::cpu_seconds); empty
  // for a row that does not measure it (bodies alone).
  std::vector<double> cpu_seconds;
  int spin_us = 0;      // W4's T: efficiency is reported when > 0
  int parallelism = 0;  // P of the efficiency: threads that run functions
  std::size_t critical_path = 0;  // W4 only
  bool has_memory = false;        // `memory` was measured
  bool has_pending_memory = false;  // the MEM row: memory.bytes_per_pending_op
  MemoryFigures memory;

  bool HasTiming() const { return !seconds.empty(); }
  Summary NanosPerOp() const;
  double MedianCpuNanosPerOp() const;  // 0 without cpu_seconds
  double MedianEfficiency() const;  // (ops * T / P) / median wall
};

// The run's settings, printed above the table and stored in the JSON.
struct ReportSettings {
  int workers = 0;
  int reps = 0;
  double n_scale = 1;
  unsigned hardware_threads = 0;
};

// Whether every check and every memory probe passed.
bool AllPassed(const std::vector<ReportRow>& rows);

// Writes the Markdown table, then notes: W4's critical paths and every
// failure with its reason.
void PrintMarkdown(std::ostream& out, const ReportSettings& settings, const std::vector<ReportRow>& rows);

// Writes every row, with its raw repetitions, as JSON to `path`. Returns
// false and sets `error` when the file cannot be written.
bool WriteJson(const std::string& path, const ReportSettings& settings,
               const std::vector<ReportRow>& rows, std::string* error);

}  // namespace depengine::bench
