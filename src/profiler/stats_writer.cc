// DumpProfileStats: per function name, the count, run time and queue wait
// (total, mean, p50, p99, max), as a Markdown table and optionally JSON.
#include <algorithm>
#include <fstream>
#include <iomanip>
#include <locale>
#include <map>

#include "profiler/dump_format.h"
#include "profiler/profiler.h"

namespace depengine::internal {

using namespace dump;  // the text forms the dumps share

void Profiler::WriteStats(std::ostream& table, const std::string& json_path) {
  struct Acc {
    std::vector<double> run_us, wait_us;
  };
  std::map<std::string, Acc> by_name;
  for (const ProfileRecord* r : Snapshot()) {
    Acc& a = by_name[r->name];
    a.run_us.push_back(static_cast<double>(r->end_ns - r->start_ns) / 1000.0);
    a.wait_us.push_back(static_cast<double>(r->start_ns - r->ready_ns) / 1000.0);
  }
  struct Row {
    std::string name;
    std::size_t count;
    double total, mean, p50, p99, max;
    double wtotal, wmean, wp50, wp99, wmax;
  };
  std::vector<Row> rows;
  for (auto& [name, a] : by_name) {
    Row row{name, a.run_us.size(), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    for (double x : a.run_us) row.total += x;
    for (double x : a.wait_us) row.wtotal += x;
    row.mean = row.total / static_cast<double>(row.count);
    row.wmean = row.wtotal / static_cast<double>(row.count);
    row.p50 = Percentile(a.run_us, 0.50);
    row.p99 = Percentile(a.run_us, 0.99);
    row.max = a.run_us.back();
    row.wp50 = Percentile(a.wait_us, 0.50);
    row.wp99 = Percentile(a.wait_us, 0.99);
    row.wmax = a.wait_us.back();
    rows.push_back(row);
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.total > b.total; });
  {
    // The table's own format (decimal, 3 decimals), on the caller's stream.
    StreamFormatGuard keep_format(table);
    table.flags(std::ios_base::dec | std::ios_base::fixed);
    table.precision(3);
    table << "| function | count | run total us | run mean | run p50 | run p99 | run max | "
             "wait total us | wait mean | wait p50 | wait p99 | wait max |\n"
             "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const Row& r : rows) {
      table << "| " << MarkdownCell(r.name) << " | " << r.count << " | " << r.total << " | "
            << r.mean << " | " << r.p50 << " | " << r.p99 << " | " << r.max << " | " << r.wtotal
            << " | " << r.wmean << " | " << r.wp50 << " | " << r.wp99 << " | " << r.wmax << " |\n";
    }
  }
  if (json_path.empty()) return;
  std::ofstream out = OpenOrThrow("DumpProfileStats", json_path);
  // The table's numbers (3 decimals: the recorded ns), spelled as JSON
  // spells them whatever the global locale. The default 6 significant digits
  // wrote a 1234.567 us total as 1234.57, and 1.2 s as 1.20001e+06.
  out.imbue(std::locale::classic());
  out << std::fixed << std::setprecision(3);
  out << "{\"unit\":\"us\",\"functions\":[\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    out << (i ? ",\n" : "") << "{\"name\":" << JsonString(r.name) << ",\"count\":" << r.count
        << ",\"run\":{\"total\":" << r.total << ",\"mean\":" << r.mean << ",\"p50\":" << r.p50
        << ",\"p99\":" << r.p99 << ",\"max\":" << r.max
        << "},\"queue_wait\":{\"total\":" << r.wtotal << ",\"mean\":" << r.wmean
        << ",\"p50\":" << r.wp50 << ",\"p99\":" << r.wp99 << ",\"max\":" << r.wmax << "}}";
  }
  out << "\n]}\n";
  CloseOrThrow(out, "DumpProfileStats", json_path);
}

}  // namespace depengine::internal
