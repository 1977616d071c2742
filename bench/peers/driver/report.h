// What depengine-peers measured, and its two outputs: a JSON file (one
// result per line, so that tools/plot/plot_peers.sh can read it with awk)
// and Markdown tables.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "driver/child.h"
#include "driver/plan.h"

namespace depengine::bench::peers {

// One engine in one job.
struct EngineRun {
  std::string engine;
  // "ok"; or why there is no figure: "check failed: ...", "unsupported: ...",
  // "skipped: ...", "error: ...".
  std::string status = "ok";
  std::vector<double> values;    // the job's figure, per repetition (NaN: the run failed)
  std::vector<double> seconds;   // timed region, per repetition
  std::vector<double> peak_rss;  // bytes, per repetition
  std::map<std::string, std::vector<double>> extra;  // other numeric fields, per repetition
  double median = 0, min = 0, max = 0;  // of values, when status is "ok"
  // kReferenceEngine's figure over this one's, the median of the
  // repetition-by-repetition ratios (NaN when not both ran).
  double ratio = 0;
  // The lowest and highest of those repetition-by-repetition ratios: how
  // far the machine moved the comparison within the run.
  double ratio_low = 0, ratio_high = 0;
  bool has_ratio = false;
};

struct JobRun {
  JobSpec spec;
  std::vector<EngineRun> runs;
  double wall_s = 0;

  const EngineRun* Find(const std::string& engine) const;
  // The best figure among the peers (not depengine, not a limit), or null.
  const EngineRun* BestPeer(const std::vector<Engine>& engines) const;
};

struct Report {
  std::vector<Engine> engines;                 // those built, in column order
  std::map<std::string, Fields> engine_info;   // each engine's ready line
  std::vector<JobRun> jobs;
  std::map<std::string, std::string> meta;     // machine, date, settings
};

// Fills median/min/max, status and the pairwise ratios of `job`.
void Summarize(JobRun& job);

// Writes the JSON file; false when it cannot be written.
bool WriteJson(const Report& report, const std::string& path);
std::string Markdown(const Report& report);

}  // namespace depengine::bench::peers
