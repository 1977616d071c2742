// DumpDependencyGraph: the recorded functions as a Graphviz digraph, one
// edge per dependency of serial semantics (RAW, WAR, WAW) labelled with its
// var, and the critical path of run times in red.
#include <fstream>
#include <iomanip>
#include <locale>
#include <unordered_map>
#include <vector>

#include "profiler/dump_format.h"
#include "profiler/profiler.h"

namespace depengine::internal {

using namespace dump;  // the text forms the dumps share

void Profiler::WriteGraph(const std::string& path) {
  const auto records = Snapshot();
  const VarNameMap var_names = VarNames();
  struct Edge {
    std::size_t from, to;
    std::uint64_t var;
    const char* kind;
  };
  std::vector<Edge> edges;
  // Serial semantics in push order: per var, the last writer and the
  // readers since it.
  struct VarState {
    long last_writer = -1;
    std::vector<std::size_t> readers;
  };
  std::unordered_map<std::uint64_t, VarState> vars;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const ProfileRecord* r = records[i];
    for (std::uint64_t v : r->reads) {
      VarState& s = vars[v];
      if (s.last_writer >= 0)
        edges.push_back({static_cast<std::size_t>(s.last_writer), i, v, "RAW"});
      s.readers.push_back(i);
    }
    for (std::uint64_t v : r->writes) {
      VarState& s = vars[v];
      if (!s.readers.empty()) {
        for (std::size_t rd : s.readers) {
          if (rd != i) edges.push_back({rd, i, v, "WAR"});
        }
      } else if (s.last_writer >= 0) {
        edges.push_back({static_cast<std::size_t>(s.last_writer), i, v, "WAW"});
      }
      s.last_writer = static_cast<long>(i);
      s.readers.clear();
    }
  }
  // Critical path: the longest chain of run times (edges go forward in
  // push order, so one pass in that order suffices).
  std::vector<double> dist(records.size(), 0);
  std::vector<long> pred(records.size(), -1);
  std::vector<std::vector<std::size_t>> incoming(records.size());
  for (std::size_t e = 0; e < edges.size(); ++e) incoming[edges[e].to].push_back(e);
  long end = -1;
  for (std::size_t i = 0; i < records.size(); ++i) {
    double best = 0;
    for (std::size_t e : incoming[i]) {
      if (dist[edges[e].from] > best) {
        best = dist[edges[e].from];
        pred[i] = static_cast<long>(edges[e].from);
      }
    }
    dist[i] = best + static_cast<double>(records[i]->end_ns - records[i]->start_ns) / 1000.0;
    if (end < 0 || dist[i] > dist[static_cast<std::size_t>(end)]) end = static_cast<long>(i);
  }
  std::vector<bool> on_path(records.size(), false);
  for (long i = end; i >= 0; i = pred[static_cast<std::size_t>(i)])
    on_path[static_cast<std::size_t>(i)] = true;

  std::ofstream out = OpenOrThrow("DumpDependencyGraph", path);
  out.imbue(std::locale::classic());  // node ids and numbers, whatever the global locale
  out << "digraph depengine {\n  rankdir=TB;\n  node [shape=box, fontname=\"Helvetica\"];\n";
  out << "  label=\"critical path: " << std::fixed << std::setprecision(3)
      << (end >= 0 ? dist[static_cast<std::size_t>(end)] : 0.0) << " us (red)\";\n";
  for (std::size_t i = 0; i < records.size(); ++i) {
    const ProfileRecord* r = records[i];
    out << "  f" << r->seq << " [label=\"" << DotLabelText(r->name) << "\\n#" << r->seq << " "
        << Us(r->end_ns - r->start_ns) << " us\"" << (on_path[i] ? ", color=red, penwidth=2" : "")
        << (r->failed || r->skipped ? ", style=dashed" : "") << "];\n";
  }
  for (const Edge& e : edges) {
    const bool critical =
        on_path[e.from] && on_path[e.to] && pred[e.to] == static_cast<long>(e.from);
    out << "  f" << records[e.from]->seq << " -> f" << records[e.to]->seq << " [label=\""
        << DotLabelText(LabelOf(var_names, e.var)) << " " << e.kind << "\""
        << (critical ? ", color=red, penwidth=2" : "") << "];\n";
  }
  out << "}\n";
  CloseOrThrow(out, "DumpDependencyGraph", path);
}

}  // namespace depengine::internal
