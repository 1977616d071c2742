#include "runner/interleaved_run.h"

#include <chrono>
#include <cstdio>
#include <string>

#include "runner/cases.h"
#include "runner/memory_probe.h"
#include "runner/watchdog.h"
#include "workloads/workloads.h"

namespace depengine::bench {
namespace {

EngineOptions OptionsFor(EngineKind kind, int workers, const BenchCase& c) {
  EngineOptions o;
  o.kind = kind;
  o.cpu_worker_threads = workers;
  o.max_in_flight = c.max_in_flight;
  return o;
}

// The threads that run functions: NaiveEngine runs them on the pushing thread.
int Parallelism(EngineKind kind, int workers) { return kind == EngineKind::kNaive ? 1 : workers; }

// Records one run of `r` in `row`: a failed check empties the row for good.
void Record(const WorkloadResult& r, bool timed, ReportRow& row) {
  if (!r.ok) {
    row.ok = false;
    row.error = r.check_error;
    row.seconds.clear();
    row.cpu_seconds.clear();
  } else if (timed) {
    row.seconds.push_back(r.seconds);
    row.cpu_seconds.push_back(r.cpu_seconds);
  }
}

// `bodies` (when c.bodies_only is set) takes the bodies-alone run as one
// more engine of each round, after the real ones. `ahead` (when not empty:
// --pushed-ahead and c.pushed_ahead) has one row per engine, run on a fresh
// engine right after that engine's own run.
void RunCase(const BenchCase& c, const BenchOptions& options, Watchdog& watchdog,
             std::vector<ReportRow>& rows, ReportRow* bodies, std::vector<ReportRow>& ahead) {
  for (int round = 0; round <= options.reps; ++round) {  // round 0 is the warm-up
    if (bodies != nullptr) {
      WatchdogScope watch(watchdog, c.title + " bodies alone");
      const double seconds = c.bodies_only(bodies->parallelism);
      if (round > 0) bodies->seconds.push_back(seconds);
    }
    for (std::size_t e = 0; e < options.engines.size(); ++e) {
      ReportRow& row = rows[e];
      if (!row.ok) continue;
      WatchdogScope watch(watchdog, c.title + " on " + row.engine);
      auto engine = CreateEngine(OptionsFor(options.engines[e], options.workers, c));
      const WorkloadResult r = c.run(*engine);
      engine.reset();
      Record(r, round > 0, row);
      if (ahead.empty() || !ahead[e].ok) continue;
      WatchdogScope watch_ahead(watchdog, c.title + " on " + ahead[e].engine);
      engine = CreateEngine(OptionsFor(options.engines[e], options.workers, c));
      const WorkloadResult pushed_first = c.pushed_ahead(*engine);
      engine.reset();
      Record(pushed_first, round > 0, ahead[e]);
    }
  }
}

void PrintProgress(std::ostream& progress, const std::string& title, const std::vector<ReportRow>& rows) {
  progress << title << ":";
  for (const ReportRow& r : rows) {
    progress << "  " << r.engine << " ";
    if (!r.ok) {
      progress << "FAILED";
    } else if (r.HasTiming()) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.1f ns/op", r.NanosPerOp().median);
      progress << buf;
    }
    if (r.has_memory && !r.memory.ok) {
      progress << " (memory FAILED)";
    } else if (r.has_pending_memory) {
      char buf[48];
      std::snprintf(buf, sizeof buf, "%.0f bytes/pending op", r.memory.bytes_per_pending_op);
      progress << buf;
    }
  }
  progress << std::endl;
}

}  // namespace

std::vector<ReportRow> RunInterleaved(const BenchOptions& options, std::ostream& progress) {
  std::vector<ReportRow> all;
  Watchdog watchdog(std::chrono::seconds(options.run_timeout_s));
  const std::vector<BenchCase> cases = MakeBenchCases(
      options.n_scale, [&](const std::string& id, const std::string& workload) {
        return options.Selected(id, workload);
      });
  for (const BenchCase& c : cases) {
    std::vector<ReportRow> rows(options.engines.size());
    for (std::size_t e = 0; e < rows.size(); ++e) {
      ReportRow& row = rows[e];
      row.case_id = c.id;
      row.title = c.title;
      row.engine = EngineKindName(options.engines[e]);
      row.ops = c.ops;
      row.spin_us = c.spin_us;
      row.parallelism = Parallelism(options.engines[e], options.workers);
      row.critical_path = c.critical_path;
    }
    // The machine's ceiling on this case: as many plain threads as the
    // threaded engines have workers.
    ReportRow bodies;
    const bool with_bodies = static_cast<bool>(c.bodies_only);
    if (with_bodies) {
      bodies = rows.front();
      bodies.engine = kBodiesOnlyEngine;
      bodies.parallelism = options.workers;
      bodies.critical_path = 0;  // the note on the DAG comes from the engines' rows
    }
    std::vector<ReportRow> ahead;
    if (options.pushed_ahead && c.pushed_ahead) {
      ahead = rows;
      for (ReportRow& row : ahead) row.engine += kPushedAheadSuffix;
    }
    RunCase(c, options, watchdog, rows, with_bodies ? &bodies : nullptr, ahead);
    if (options.memory) {
      for (std::size_t e = 0; e < rows.size(); ++e) {
        rows[e].has_memory = true;
        rows[e].memory = ProbeInChild(c.id, options.engines[e], options);
      }
    }
    rows.insert(rows.end(), ahead.begin(), ahead.end());
    if (with_bodies) rows.push_back(bodies);
    PrintProgress(progress, c.title, rows);
    all.insert(all.end(), rows.begin(), rows.end());
  }

  if (options.memory && options.Selected(kPendingMemoryId, kPendingMemoryId)) {
    std::vector<ReportRow> rows;
    for (EngineKind kind : options.engines) {
      ReportRow row;
      row.case_id = kPendingMemoryId;
      row.title = "MEM pending ops behind 1 held var";
      row.engine = EngineKindName(kind);
      row.ops = PendingMemorySize(options.n_scale).ops;
      row.has_memory = true;
      row.has_pending_memory = true;
      row.memory = ProbeInChild(kPendingMemoryId, kind, options);
      rows.push_back(row);
    }
    PrintProgress(progress, rows.front().title, rows);
    all.insert(all.end(), rows.begin(), rows.end());
  }
  return all;
}

}  // namespace depengine::bench
