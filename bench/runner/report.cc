#include "runner/report.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <utility>

#include "common/json_string.h"
#include "runner/cases.h"

namespace depengine::bench {
namespace {

std::string Format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// 1234567 -> "1,234,567".
std::string Grouped(std::size_t n) {
  const std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string NanosCell(double ns) { return Format(ns < 100 ? "%.1f" : "%.0f", ns); }

std::string JsonNumber(double v) { return Format("%.6g", v); }

}  // namespace

Summary ReportRow::NanosPerOp() const {
  Summary s = Summarize(seconds);
  const double scale = ops == 0 ? 0 : 1e9 / static_cast<double>(ops);
  return {s.median * scale, s.min * scale, s.max * scale};
}

double ReportRow::MedianCpuNanosPerOp() const {
  if (cpu_seconds.empty() || ops == 0) return 0;
  return Summarize(cpu_seconds).median * 1e9 / static_cast<double>(ops);
}

double ReportRow::MedianEfficiency() const {
  const double median = Summarize(seconds).median;
  if (median <= 0 || parallelism <= 0) return 0;
  return static_cast<double>(ops) * spin_us * 1e-6 / parallelism / median;
}

bool AllPassed(const std::vector<ReportRow>& rows) {
  return std::all_of(rows.begin(), rows.end(),
                     [](const ReportRow& r) { return r.ok && (!r.has_memory || r.memory.ok); });
}

void PrintMarkdown(std::ostream& out, const ReportSettings& settings,
                   const std::vector<ReportRow>& rows) {
  out << "depengine-bench: " << settings.workers << " worker thread(s) per engine, "
      << settings.hardware_threads << " hardware thread(s), median of " << settings.reps
      << " after 1 warm-up, n-scale " << settings.n_scale << "\n\n";
  out << "| workload | engine | ops | ns/op median | ns/op min | ns/op max | CPU ns/op "
         "| efficiency | peak RSS (MiB) | bytes/pending op |\n";
  out << "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n";
  for (const ReportRow& r : rows) {
    std::string median = "", min = "", max = "", cpu = "", efficiency = "";
    if (!r.ok) {
      median = "FAILED";
    } else if (r.HasTiming()) {
      const Summary ns = r.NanosPerOp();
      median = NanosCell(ns.median);
      min = NanosCell(ns.min);
      max = NanosCell(ns.max);
      if (!r.cpu_seconds.empty()) cpu = NanosCell(r.MedianCpuNanosPerOp());
      if (r.spin_us > 0) efficiency = Format("%.2f", r.MedianEfficiency());
    }
    std::string peak, pending;
    if (r.has_memory) {
      if (!r.memory.ok) {
        peak = "FAILED";
      } else {
        peak = Format("%.1f", static_cast<double>(r.memory.peak_rss_bytes) / (1 << 20));
        if (r.has_pending_memory) pending = Format("%.0f", r.memory.bytes_per_pending_op);
      }
    }
    out << "| " << r.title << " | " << r.engine << " | " << Grouped(r.ops) << " | " << median
        << " | " << min << " | " << max << " | " << cpu << " | " << efficiency << " | " << peak
        << " | " << pending << " |\n";
  }

  out << "\nNotes:\n";
  out << "- ns/op = wall / ops, wall from the first push to WaitForAll's return; W5: per push.\n";
  out << "- CPU ns/op = the process's CPU time over the same region (user + system, every "
         "thread: the pusher and the workers, their idle spin included) / ops, median over the "
         "repetitions; at most the machine's hardware threads x ns/op, to within about a "
         "millisecond per run (the kernel's accounting of threads running elsewhere).\n";
  out << "- efficiency (W4, T > 0) = (ops * T / P) / median wall; P = the worker threads, "
         "1 for NaiveEngine (it runs every function on the pushing thread).\n";
  // W4's cases share one DAG per size: one line per (ops, critical path).
  std::set<std::pair<std::size_t, std::size_t>> dags;
  std::set<int> parallelisms;
  for (const ReportRow& r : rows) {
    if (r.critical_path == 0) continue;
    dags.insert({r.ops, r.critical_path});
    parallelisms.insert(r.parallelism);
  }
  for (const auto& [ops, critical_path] : dags) {
    out << "- W4's DAG: critical path " << Grouped(critical_path) << " of " << Grouped(ops)
        << " ops; the best efficiency any schedule reaches is";
    for (int p : parallelisms) {
      const double bound =
          std::min(1.0, static_cast<double>(ops) / (static_cast<double>(p) * critical_path));
      out << " " << Format("%.2f", bound) << " with P = " << p
          << (p == *parallelisms.rbegin() ? "" : ",");
    }
    out << ".\n";
  }
  if (std::any_of(rows.begin(), rows.end(),
                  [](const ReportRow& r) { return r.engine == kBodiesOnlyEngine; })) {
    out << "- " << kBodiesOnlyEngine
        << " (W4, T > 0): the same functions' bodies on P plain threads, each taking every P-th "
           "function, in no order: the efficiency this machine allows any engine; the gap to an "
           "engine's row is that engine's cost and the order it keeps.\n";
  }
  if (std::any_of(rows.begin(), rows.end(),
                  [](const ReportRow& r) { return r.engine.ends_with(kPushedAheadSuffix); })) {
    out << "- pushed ahead (W4, T > 0; --pushed-ahead): the engine's run with every function "
           "pushed behind one async function that holds every var, the clock started at its "
           "release: the workers' side alone; the gap to the engine's own row is the pushing and "
           "what it costs the workers to run beside it.\n";
  }
  out << "- peak RSS: of a fresh child process that runs the row once (includes the harness's own "
         "data); bytes/pending op: resident growth with every op pushed behind one held var.\n";
  for (const ReportRow& r : rows) {
    if (!r.ok) out << "- FAILED " << r.title << " on " << r.engine << ": " << r.error << "\n";
    if (r.has_memory && !r.memory.ok) {
      out << "- FAILED memory of " << r.title << " on " << r.engine << ": " << r.memory.error
          << "\n";
    }
  }
}

bool WriteJson(const std::string& path, const ReportSettings& settings,
               const std::vector<ReportRow>& rows, std::string* error) {
  std::ofstream out(path);
  if (!out) {
    *error = "cannot open " + path + " for writing";
    return false;
  }
  out << "{\n  \"settings\": {\"workers\": " << settings.workers << ", \"reps\": " << settings.reps
      << ", \"n_scale\": " << JsonNumber(settings.n_scale)
      << ", \"hardware_threads\": " << settings.hardware_threads << "},\n  \"rows\": [";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const ReportRow& r = rows[i];
    out << (i == 0 ? "\n" : ",\n") << "    {\"case\": " << JsonString(r.case_id)
        << ", \"title\": " << JsonString(r.title) << ", \"engine\": " << JsonString(r.engine)
        << ", \"ops\": " << r.ops << ", \"ok\": " << (r.ok ? "true" : "false");
    if (!r.ok) out << ", \"error\": " << JsonString(r.error);
    if (r.ok && r.HasTiming()) {
      const Summary ns = r.NanosPerOp();
      out << ", \"ns_per_op\": {\"median\": " << JsonNumber(ns.median)
          << ", \"min\": " << JsonNumber(ns.min) << ", \"max\": " << JsonNumber(ns.max)
          << "}, \"seconds\": [";
      for (std::size_t k = 0; k < r.seconds.size(); ++k)
        out << (k ? ", " : "") << JsonNumber(r.seconds[k]);
      out << "]";
      if (!r.cpu_seconds.empty()) {
        out << ", \"cpu_ns_per_op_median\": " << JsonNumber(r.MedianCpuNanosPerOp())
            << ", \"cpu_seconds\": [";
        for (std::size_t k = 0; k < r.cpu_seconds.size(); ++k)
          out << (k ? ", " : "") << JsonNumber(r.cpu_seconds[k]);
        out << "]";
      }
      if (r.spin_us > 0) {
        out << ", \"spin_us\": " << r.spin_us << ", \"parallelism\": " << r.parallelism
            << ", \"efficiency\": " << JsonNumber(r.MedianEfficiency());
      }
    }
    if (r.critical_path > 0) out << ", \"critical_path\": " << r.critical_path;
    if (r.has_memory) {
      out << ", \"memory\": {\"ok\": " << (r.memory.ok ? "true" : "false");
      if (r.memory.ok) {
        out << ", \"peak_rss_bytes\": " << r.memory.peak_rss_bytes;
        if (r.has_pending_memory) {
          out << ", \"bytes_per_pending_op\": " << JsonNumber(r.memory.bytes_per_pending_op);
        }
      } else {
        out << ", \"error\": " << JsonString(r.memory.error);
      }
      out << "}";
    }
    out << "}";
  }
  out << "\n  ],\n  \"all_passed\": " << (AllPassed(rows) ? "true" : "false") << "\n}\n";
  if (!out) {
    *error = "error writing " + path;
    return false;
  }
  return true;
}

}  // namespace depengine::bench
