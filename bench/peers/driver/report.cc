#include "driver/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <set>

#include "common/json_string.h"
#include "driver/stats.h"

namespace depengine::bench::peers {
namespace {

bool Better(const JobSpec& spec, double a, double b) {
  return spec.higher_is_better ? a > b : a < b;
}

std::string Fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// A figure as the tables print it.
std::string FigureText(const std::string& figure, double v) {
  if (std::isnan(v)) return "-";
  if (figure == "efficiency") return Fmt("%.2f", v);
  if (figure == "gflops") return Fmt("%.1f", v);
  if (figure == "bytes_per_op") return Fmt("%.0f", v);
  return Fmt(v < 100 ? "%.1f" : "%.0f", v);
}

std::string RatioText(double r) {
  if (std::isnan(r)) return "-";
  return Fmt(r < 0.1 ? "%.3f" : "%.2f", r);
}

std::string FigureUnit(const JobSpec& s) {
  if (s.figure == "ns_per_op") return "ns/op";
  if (s.figure == "efficiency") return "efficiency";
  if (s.figure == "gflops") return "GFLOP/s";
  if (s.figure == "bytes_per_op") return "bytes/op";
  return s.figure;
}

std::string Json(const std::string& s) { return JsonString(s); }

std::string JsonNumber(double v) {
  if (std::isnan(v) || std::isinf(v)) return "null";
  return Fmt("%.6g", v);
}

std::string JsonArray(const std::vector<double>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + JsonNumber(v[i]);
  return s + "]";
}

std::vector<double> Valid(const std::vector<double>& v) {
  std::vector<double> out;
  for (double x : v) {
    if (!std::isnan(x)) out.push_back(x);
  }
  return out;
}

const Engine* FindEngine(const std::vector<Engine>& engines, const std::string& name) {
  for (const Engine& e : engines) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::string Label(const Report& r, const std::string& name) {
  const Engine* e = FindEngine(r.engines, name);
  std::string label = e ? e->label : name;
  if (name == "starpu") {
    const auto it = r.engine_info.find(name);
    if (it != r.engine_info.end() && it->second.count("scheduler"))
      label += " (" + it->second.at("scheduler") + ")";
  }
  return label;
}

// Engines that appear in any job of `groups`, in column order.
std::vector<std::string> Columns(const Report& r, const std::set<std::string>& groups,
                                 bool limits) {
  std::vector<std::string> cols;
  for (const Engine& e : r.engines) {
    if (e.limit != limits) continue;
    for (const JobRun& j : r.jobs) {
      if (groups.count(j.spec.group) && j.Find(e.name)) {
        cols.push_back(e.name);
        break;
      }
    }
  }
  return cols;
}

std::string Cell(const JobRun& j, const std::string& engine) {
  const EngineRun* run = j.Find(engine);
  if (run == nullptr) return "";
  if (run->status != "ok") return run->status.rfind("skipped", 0) == 0 ? "skipped" : "n/a";
  return FigureText(j.spec.figure, run->median);
}

std::string Row(const std::vector<std::string>& cells) {
  std::string s = "|";
  for (const std::string& c : cells) s += " " + c + " |";
  return s + "\n";
}

std::string Rule(std::size_t text_cols, std::size_t num_cols) {
  std::string s = "|";
  for (std::size_t i = 0; i < text_cols; ++i) s += "---|";
  for (std::size_t i = 0; i < num_cols; ++i) s += "---:|";
  return s + "\n";
}

}  // namespace

const EngineRun* JobRun::Find(const std::string& engine) const {
  for (const EngineRun& r : runs) {
    if (r.engine == engine) return &r;
  }
  return nullptr;
}

const EngineRun* JobRun::BestPeer(const std::vector<Engine>& engines) const {
  const EngineRun* best = nullptr;
  for (const EngineRun& r : runs) {
    const Engine* e = FindEngine(engines, r.engine);
    if (e == nullptr || e->depengine || e->limit || r.status != "ok") continue;
    if (best == nullptr || Better(spec, r.median, best->median)) best = &r;
  }
  return best;
}

void Summarize(JobRun& job) {
  for (EngineRun& r : job.runs) {
    const std::vector<double> ok = Valid(r.values);
    if (r.status == "ok" && (ok.size() != r.values.size() || ok.empty())) r.status = "check failed";
    if (r.status == "ok") {
      r.median = Median(ok);
      r.min = Min(ok);
      r.max = Max(ok);
    }
  }
  const EngineRun* ref = job.Find(kReferenceEngine);
  for (EngineRun& r : job.runs) {
    r.has_ratio = false;
    if (ref == nullptr || &r == ref || ref->status != "ok" || r.status != "ok") continue;
    std::vector<double> ratios;
    const std::size_t n = std::min(ref->values.size(), r.values.size());
    for (std::size_t i = 0; i < n; ++i) {
      if (!std::isnan(ref->values[i]) && !std::isnan(r.values[i]) && r.values[i] != 0) {
        ratios.push_back(ref->values[i] / r.values[i]);
      }
    }
    if (!ratios.empty()) {
      r.ratio = Median(ratios);
      r.ratio_low = Min(ratios);
      r.ratio_high = Max(ratios);
      r.has_ratio = true;
    }
  }
}

bool WriteJson(const Report& report, const std::string& path) {
  std::ofstream out(path);
  if (!out) return false;
  out << "{\n\"meta\": {";
  bool first = true;
  for (const auto& [k, v] : report.meta) {
    out << (first ? "" : ", ") << Json(k) << ": " << Json(v);
    first = false;
  }
  out << "},\n\"engines\": [\n";
  for (std::size_t i = 0; i < report.engines.size(); ++i) {
    const Engine& e = report.engines[i];
    out << "{\"engine\": " << Json(e.name) << ", \"label\": " << Json(Label(report, e.name))
        << ", \"depengine\": " << (e.depengine ? "true" : "false")
        << ", \"limit\": " << (e.limit ? "true" : "false");
    const auto it = report.engine_info.find(e.name);
    if (it != report.engine_info.end()) {
      for (const char* key : {"runtime", "detail", "scheduler", "threads"}) {
        if (it->second.count(key)) out << ", " << Json(key) << ": " << Json(it->second.at(key));
      }
    }
    out << "}" << (i + 1 < report.engines.size() ? "," : "") << "\n";
  }
  out << "],\n\"results\": [\n";
  std::size_t count = 0;
  std::size_t total = 0;
  for (const JobRun& j : report.jobs) total += j.runs.size();
  for (const JobRun& j : report.jobs) {
    for (const EngineRun& r : j.runs) {
      const bool ok = r.status == "ok";
      out << "{\"job\": " << Json(j.spec.id) << ", \"group\": " << Json(j.spec.group)
          << ", \"title\": " << Json(j.spec.title) << ", \"params\": " << Json(j.spec.params)
          << ", \"series\": " << Json(j.spec.series) << ", \"x\": " << JsonNumber(j.spec.x)
          << ", \"figure\": " << Json(j.spec.figure)
          << ", \"better\": " << Json(j.spec.higher_is_better ? "higher" : "lower")
          << ", \"engine\": " << Json(r.engine) << ", \"status\": " << Json(r.status)
          << ", \"median\": " << (ok ? JsonNumber(r.median) : "null")
          << ", \"min\": " << (ok ? JsonNumber(r.min) : "null")
          << ", \"max\": " << (ok ? JsonNumber(r.max) : "null")
          << ", \"ratio_vs_depengine\": " << (r.has_ratio ? JsonNumber(r.ratio) : "null")
          << ", \"ratio_min\": " << (r.has_ratio ? JsonNumber(r.ratio_low) : "null")
          << ", \"ratio_max\": " << (r.has_ratio ? JsonNumber(r.ratio_high) : "null")
          << ", \"seconds_median\": " << (ok ? JsonNumber(Median(Valid(r.seconds))) : "null")
          << ", \"peak_rss_median\": " << (ok ? JsonNumber(Median(Valid(r.peak_rss))) : "null");
      for (const auto& [k, v] : r.extra)
        out << ", " << Json(k) << ": " << (ok ? JsonNumber(Median(Valid(v))) : "null");
      out << ", \"reps\": " << JsonArray(r.values) << "}" << (++count < total ? "," : "") << "\n";
    }
  }
  out << "]\n}\n";
  out.flush();
  return static_cast<bool>(out);
}

std::string Markdown(const Report& r) {
  std::string md;
  const auto meta = [&](const char* k) {
    const auto it = r.meta.find(k);
    return it == r.meta.end() ? std::string() : it->second;
  };
  md += "Measured " + meta("date") + " on " + meta("cpu") + " (" + meta("cores") + " cores), " +
        meta("threads") + " worker threads per engine; median of " + meta("reps") +
        " repetitions after " + meta("warmup") + " warm-up (memory: " + meta("mem_reps") +
        " fresh processes), engines interleaved (A B C A B C ...). Load average " +
        meta("loadavg_start") + " at the start, " + meta("loadavg_end") + " at the end; " +
        meta("wall_s") + " s in all.\n\n";

  // ------------------------------------------------------------ main table
  const std::set<std::string> main_groups = {"table", "memory"};
  const std::vector<std::string> cols = Columns(r, main_groups, false);
  if (!cols.empty()) {
    std::vector<std::string> head = {"workload", "size", "figure"};
    for (const std::string& c : cols) head.push_back(Label(r, c));
    md += Row(head) + Rule(3, cols.size());
    for (const JobRun& j : r.jobs) {
      if (!main_groups.count(j.spec.group)) continue;
      std::vector<std::string> row = {
          j.spec.title, j.spec.params,
          FigureUnit(j.spec) + (j.spec.higher_is_better ? " (higher is better)" : "")};
      for (const std::string& c : cols) row.push_back(Cell(j, c));
      md += Row(row);
    }
    md += "\n";
  }

  // ------------------------------------------------------------ ratios
  const std::set<std::string> ratio_groups = {"table", "memory", "w6"};
  std::vector<std::string> others;
  for (const std::string& c : Columns(r, ratio_groups, false)) {
    if (c != kReferenceEngine) others.push_back(c);
  }
  if (r.engines.size() > 1) {
    md +=
        "depengine per-device / each engine, the median of the repetition-by-repetition ratios "
        "(below 1 is better for depengine on ns/op and bytes/op, above 1 on efficiency and "
        "GFLOP/s); beside the best peer's, the lowest and highest of those ratios:\n\n";
    std::vector<std::string> head = {"workload", "figure"};
    for (const std::string& c : others) head.push_back(Label(r, c));
    head.push_back("best peer");
    head.push_back("vs best peer");
    head.push_back("repetitions' range");
    head.push_back("target (issue 4)");
    std::string rule = Rule(2, others.size());
    rule.pop_back();
    md += Row(head) + rule + "---|---:|---:|---|\n";  // best peer, its ratio and range, the target
    for (const JobRun& j : r.jobs) {
      if (!ratio_groups.count(j.spec.group)) continue;
      std::vector<std::string> row = {j.spec.title, FigureUnit(j.spec)};
      for (const std::string& c : others) {
        const EngineRun* run = j.Find(c);
        row.push_back(run && run->has_ratio ? RatioText(run->ratio) : (run ? "-" : ""));
      }
      const EngineRun* best = j.BestPeer(r.engines);
      row.push_back(best ? Label(r, best->engine) : "-");
      row.push_back(best && best->has_ratio ? RatioText(best->ratio) : "-");
      row.push_back(best && best->has_ratio
                        ? RatioText(best->ratio_low) + " - " + RatioText(best->ratio_high)
                        : "-");
      row.push_back(j.spec.target);
      md += Row(row);
    }
    md += "\n";
  }

  // ------------------------------------------------------------ W6
  const std::vector<std::string> w6_engines = Columns(r, {"w6"}, false);
  const std::vector<std::string> w6_limits = Columns(r, {"w6"}, true);
  if (!w6_engines.empty()) {
    md += "W6 tiled Cholesky, GFLOP/s = n^3 / 3 / wall, with its two limits:\n\n";
    std::vector<std::string> head = {"workload", "size"};
    for (const std::string& c : w6_engines) head.push_back(Label(r, c));
    for (const std::string& c : w6_limits) head.push_back(Label(r, c));
    head.push_back("depengine / LAPACKE_dpotrf");
    md += Row(head) + Rule(2, w6_engines.size() + w6_limits.size() + 1);
    for (const JobRun& j : r.jobs) {
      if (j.spec.group != "w6") continue;
      std::vector<std::string> row = {j.spec.title, j.spec.params};
      for (const std::string& c : w6_engines) row.push_back(Cell(j, c));
      for (const std::string& c : w6_limits) row.push_back(Cell(j, c));
      const EngineRun* potrf = j.Find("lapacke-dpotrf");
      row.push_back(potrf && potrf->has_ratio ? RatioText(potrf->ratio) : "-");
      md += Row(row);
    }
    md += "\n";
  }

  // ------------------------------------------------------------ scaling
  for (const std::string series : {"W1", "W2"}) {
    std::vector<const JobRun*> points;
    for (const JobRun& j : r.jobs) {
      if (j.spec.series == series) points.push_back(&j);
    }
    if (points.size() < 2) continue;
    std::sort(points.begin(), points.end(),
              [](const JobRun* a, const JobRun* b) { return a->spec.x < b->spec.x; });
    std::vector<std::string> engines;
    for (const Engine& e : r.engines) {
      for (const JobRun* p : points) {
        if (p->spec.group == "scale" && p->Find(e.name)) {
          engines.push_back(e.name);
          break;
        }
      }
    }
    md += series == "W1"
              ? "Scaling, W1 chain: ns/op as N grows (it should stay flat):\n\n"
              : "Scaling, W2 parallel: ns/op as the number of vars K grows, N fixed:\n\n";
    std::vector<std::string> head = {series == "W1" ? "N" : "K"};
    for (const std::string& e : engines) head.push_back(Label(r, e));
    md += Row(head) + Rule(1, engines.size());
    for (const JobRun* p : points) {
      std::vector<std::string> row = {Fmt("%.0f", p->spec.x)};
      for (const std::string& e : engines) row.push_back(Cell(*p, e));
      md += Row(row);
    }
    md += "\n";
  }

  // ------------------------------------------------------------ peak memory
  if (!cols.empty()) {
    md +=
        "Peak resident memory during a run (MB, the process's high-water mark, reset before each "
        "run):\n\n";
    std::vector<std::string> head = {"workload"};
    for (const std::string& c : cols) head.push_back(Label(r, c));
    md += Row(head) + Rule(1, cols.size());
    for (const JobRun& j : r.jobs) {
      if (j.spec.group != "table" ||
          (j.spec.id != "W1" && j.spec.id != "W2" && j.spec.id.rfind("W4", 0) != 0))
        continue;
      std::vector<std::string> row = {j.spec.title};
      for (const std::string& c : cols) {
        const EngineRun* run = j.Find(c);
        row.push_back(run && run->status == "ok" ? Fmt("%.0f", Median(Valid(run->peak_rss)) / 1e6)
                                                 : "-");
      }
      md += Row(row);
    }
    md += "\n";
  }

  // ------------------------------------------------------------ W4's bound
  // Beside the efficiencies (T = 1 and 10 us share one DAG): printed from
  // the first W4 job with an efficiency that has it, whichever was run.
  bool printed_bound = false;
  for (const JobRun& j : r.jobs) {
    if (printed_bound || j.spec.id.rfind("W4.", 0) != 0 || j.spec.figure != "efficiency") continue;
    for (const EngineRun& run : j.runs) {
      const auto cp = run.extra.find("critical_path");
      const auto be = run.extra.find("best_efficiency");
      if (run.status == "ok" && cp != run.extra.end() && be != run.extra.end()) {
        md += "W4's DAG has a critical path of " + Fmt("%.0f", Median(cp->second)) +
              " functions, so no schedule on these workers beats an efficiency of " +
              Fmt("%.2f", Median(be->second)) + ".\n\n";
        printed_bound = true;
        break;
      }
    }
  }

  // ------------------------------------------------------------ runtimes and notes
  md += "Engines:\n\n";
  for (const Engine& e : r.engines) {
    const auto it = r.engine_info.find(e.name);
    if (it == r.engine_info.end()) continue;
    const Fields& f = it->second;
    md += "- **" + Label(r, e.name) + "** (`" + e.name +
          "`): " + (f.count("runtime") ? f.at("runtime") : "") +
          (f.count("detail") ? "; " + f.at("detail") : "") + "\n";
  }
  std::string notes;
  for (const JobRun& j : r.jobs) {
    for (const EngineRun& run : j.runs) {
      if (run.status != "ok")
        notes += "- " + j.spec.title + " (" + j.spec.params + "), " + Label(r, run.engine) + ": " +
                 run.status + "\n";
    }
  }
  if (!notes.empty()) md += "\nNo figure:\n\n" + notes;
  return md;
}

}  // namespace depengine::bench::peers
