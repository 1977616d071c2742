// The profiler's other outputs: the statistics table and JSON, the dependency
// graph, tools/trace_to_svg.py's SVG, names that need escaping or are not
// UTF-8, the global locale, and dumps to files that cannot be written.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iomanip>
#include <ios>
#include <iterator>
#include <locale>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "depengine/engine.h"
#include "depengine/profiler.h"
#include "profiler_test_support.h"

namespace depengine::profiler_test {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

TEST_P(ProfilerTest, StatsTableAndJson) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  VarHandle v = e->NewVariable();
  for (int i = 0; i < 50; ++i)
    e->PushSync([](RunContext) {}, Context::CPU(), {}, {v}, FnProperty::kNormal, 0, "tick");
  e->WaitForAll();
  std::ostringstream table;
  const std::string path = TempPath("stats.json");
  DumpProfileStats(*e, table, path);
  EXPECT_THAT(table.str(), ::testing::HasSubstr("| tick | 50 |"));
  json stats = ReadJson(path);
  bool found = false;
  for (const json& f : stats["functions"]) {
    if (f["name"] == "tick") {
      found = true;
      EXPECT_EQ(f["count"], 50);
      for (const char* k : {"total", "mean", "p50", "p99", "max"}) {
        EXPECT_TRUE(f["run"].contains(k));
        EXPECT_TRUE(f["queue_wait"].contains(k));
      }
      EXPECT_LE(f["run"]["p50"].get<double>(), f["run"]["max"].get<double>());
    }
  }
  EXPECT_TRUE(found);
  ClearProfile(*e);
  EXPECT_EQ(ProfiledFunctionCount(*e), 0u);
  e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  std::remove(path.c_str());
}

TEST_P(ProfilerTest, DependencyGraphHasKindsAndCriticalPathAndRenders) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  // A = 2; B = 2; B = A + B; C = A + 2; (seed 003's second program, minus the delete)
  VarHandle a = e->NewVariable(), b = e->NewVariable(), c = e->NewVariable();
  e->PushSync([](RunContext) {}, Context::CPU(), {}, {a}, FnProperty::kNormal, 0, "A=2");
  e->PushSync([](RunContext) {}, Context::CPU(), {}, {b}, FnProperty::kNormal, 0, "B=2");
  e->PushSync([](RunContext) {}, Context::CPU(), {a}, {b}, FnProperty::kNormal, 0, "B=A+B");
  e->PushSync([](RunContext) {}, Context::CPU(), {a}, {c}, FnProperty::kNormal, 0, "C=A+2");
  e->PushSync([](RunContext) {}, Context::CPU(), {}, {a}, FnProperty::kNormal, 0, "A=0");
  e->WaitForAll();
  const std::string path = TempPath("graph.dot");
  DumpDependencyGraph(*e, path);
  const std::string dot = ReadFile(path);
  EXPECT_THAT(dot, ::testing::StartsWith("digraph"));
  EXPECT_THAT(dot, ::testing::HasSubstr("RAW"));  // A=2 -> B=A+B
  EXPECT_THAT(dot, ::testing::HasSubstr("WAW"));  // B=2 -> B=A+B
  EXPECT_THAT(dot, ::testing::HasSubstr("WAR"));  // B=A+B, C=A+2 -> A=0
  EXPECT_THAT(dot, ::testing::HasSubstr("color=red"));
  // Exactly those five edges: A=2 -> A=0 is implied by the reads between
  // them (no WAW edge when a reader came between, profiler.md).
  const auto count = [&](const std::string& needle) {
    int n = 0;
    for (std::size_t at = dot.find(needle); at != std::string::npos; at = dot.find(needle, at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count(" -> "), 5) << dot;
  EXPECT_EQ(count(" RAW\""), 2) << dot;
  EXPECT_EQ(count(" WAW\""), 1) << dot;
  EXPECT_EQ(count(" WAR\""), 2) << dot;
#ifdef DEPENGINE_DOT
  const std::string svg = path + ".svg";
  const std::string cmd = std::string(DEPENGINE_DOT) + " -Tsvg " + path + " -o " + svg;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream rendered(svg);
  EXPECT_TRUE(rendered.good());
  std::remove(svg.c_str());
#else
  GTEST_SKIP() << "graphviz `dot` not found: install the graphviz package to render the graph";
#endif
  for (VarHandle v : {a, b, c}) e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  std::remove(path.c_str());
}

// The red path is the chain with the largest sum of run times, not any
// chain: "join" waits for a long chain (two 20 ms bodies) and for a short
// function, and the path must come to it through the long chain.
TEST_P(ProfilerTest, DependencyGraphCriticalPathIsTheLongestChain) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  VarHandle a = e->NewVariable(), b = e->NewVariable(), c = e->NewVariable(), d = e->NewVariable();
  const auto sleep_ms = [](int ms) {
    return [ms](RunContext) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
  };
  e->PushSync(sleep_ms(20), Context::CPU(), {}, {a}, FnProperty::kNormal, 0, "long1");
  e->PushSync(sleep_ms(20), Context::CPU(), {a}, {b}, FnProperty::kNormal, 0, "long2");
  e->PushSync(sleep_ms(1), Context::CPU(), {}, {c}, FnProperty::kNormal, 0, "short");
  e->PushSync(sleep_ms(1), Context::CPU(), {b, c}, {d}, FnProperty::kNormal, 0, "join");
  e->WaitForAll();
  const std::string path = TempPath("critical.dot");
  DumpDependencyGraph(*e, path);
  const std::string dot = ReadFile(path);
  std::remove(path.c_str());
  // Node ids by name, then each edge's line by its two ends.
  const auto node = [&](const std::string& name) {
    std::smatch m;
    const std::regex re("  (f[0-9]+) \\[label=\"" + name + "\\\\n#");
    return std::regex_search(dot, m, re) ? m[1].str() : std::string("?");
  };
  const auto edge_line = [&](const std::string& from, const std::string& to) {
    const std::string head = "  " + node(from) + " -> " + node(to) + " [";
    const std::size_t at = dot.find(head);
    return at == std::string::npos ? std::string() : dot.substr(at, dot.find('\n', at) - at);
  };
  EXPECT_THAT(edge_line("long1", "long2"), HasSubstr("color=red")) << dot;
  EXPECT_THAT(edge_line("long2", "join"), HasSubstr("color=red")) << dot;
  EXPECT_THAT(edge_line("short", "join"), AllOf(HasSubstr("RAW"), Not(HasSubstr("color=red"))))
      << dot;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(dot, m, std::regex("critical path: ([0-9.]+) us"))) << dot;
  EXPECT_GE(std::stod(m[1].str()), 40'000.0) << "shorter than the two 20 ms bodies on it";
  for (VarHandle v : {a, b, c, d}) e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
}

// Bug: the outputs are small, so /dev/full's ENOSPC only shows when the file
// is flushed or closed, after the stream state was checked (DumpProfile),
// or never checked at all (DumpProfileStats' JSON, DumpDependencyGraph).
TEST_P(ProfilerTest, DumpsRaiseWhenTheFileCannotBeWritten) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  RunSeedProgram(*e);
  EXPECT_THROW(DumpProfile(*e, "/dev/full"), std::runtime_error);
  std::ostringstream table;
  EXPECT_THROW(DumpProfileStats(*e, table, "/dev/full"), std::runtime_error);
  EXPECT_THROW(DumpDependencyGraph(*e, "/dev/full"), std::runtime_error);
  try {
    DumpProfile(*e, "/dev/full");
  } catch (const std::runtime_error& error) {
    EXPECT_THAT(error.what(), ::testing::HasSubstr("/dev/full"));
  }
}

// A path whose directory does not exist: each dump raises, naming the path
// and the reason (before: only "cannot write <path>"), and the engine keeps
// working.
TEST_P(ProfilerTest, DumpsToAMissingDirectorySayWhy) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  RunSeedProgram(*e);
  const std::string path = TempPath("no_such_dir") + "/out";
  const std::string reason = std::strerror(ENOENT);
  std::ostringstream table;
  const std::function<void()> dumps[] = {[&] { DumpProfile(*e, path); },
                                         [&] { DumpProfileStats(*e, table, path); },
                                         [&] { DumpDependencyGraph(*e, path); }};
  for (const auto& dump : dumps) {
    try {
      dump();
      ADD_FAILURE() << "no error for " << path;
    } catch (const std::runtime_error& error) {
      EXPECT_THAT(error.what(), ::testing::HasSubstr(path));
      EXPECT_THAT(error.what(), ::testing::HasSubstr(reason));
    }
  }
  RunSeedProgram(*e);  // still working
  EXPECT_EQ(ProfiledFunctionCount(*e), 16u);
}

// Bug: the record's seq, which orders the graph, was taken before the push
// locked its vars, so with several pushers it could disagree with the order
// the engine queued the functions on a var (WAW edges pointing from a
// function to one that ran before it). Every function here writes one
// shared var, so the engine runs them one at a time in queue order, and the
// graph's WAW chain must be exactly the order they ran in.
TEST_P(ProfilerTest, GraphFollowsQueueOrderWithSeveralPushers) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  constexpr int kThreads = 4, kPerThread = 1000, kExtraReads = 200;
  VarHandle shared = e->NewVariable();
  std::vector<std::string> names(kThreads * kPerThread);
  for (std::size_t i = 0; i < names.size(); ++i) {
    char name[32];  // not "w" + to_string: GCC 12 warns (-Wrestrict) on it here, wrongly
    std::snprintf(name, sizeof name, "w%zu", i);
    names[i] = name;
  }
  std::vector<int> ran_at(names.size(), -1);  // written under `shared`'s write access
  int next_run = 0;
  // Half of the pushers also read private vars (the several-var path, and a
  // wider window between the record and the queueing); the others push
  // one-var functions.
  std::vector<std::vector<VarHandle>> reads(kThreads);
  for (int t = 0; t < kThreads; t += 2) {
    for (int i = 0; i < kExtraReads; ++i) reads[t].push_back(e->NewVariable());
  }
  std::vector<std::thread> pushers;
  for (int t = 0; t < kThreads; ++t) {
    pushers.emplace_back([&, t] {
      for (int k = 0; k < kPerThread; ++k) {
        const int id = t * kPerThread + k;
        e->PushSync([&, id](RunContext) { ran_at[id] = next_run++; }, Context::CPU(), reads[t],
                    {shared}, FnProperty::kNormal, 0, names[id].c_str());
      }
    });
  }
  for (std::thread& t : pushers) t.join();
  e->WaitForAll();
  const std::string path = TempPath("graph_mt.dot");
  DumpDependencyGraph(*e, path);
  const std::string dot = ReadFile(path);
  std::map<std::string, int> node_to_id;
  const std::regex node_re(R"re(\s(f\d+) \[label="w(\d+)\\n)re");
  for (std::sregex_iterator it(dot.begin(), dot.end(), node_re), end; it != end; ++it) {
    node_to_id[(*it)[1]] = std::stoi((*it)[2]);
  }
  ASSERT_EQ(node_to_id.size(), names.size());
  const std::regex edge_re(R"re((f\d+) -> (f\d+) \[label="v\d+ (\w+)")re");
  int edges = 0, out_of_order = 0;
  for (std::sregex_iterator it(dot.begin(), dot.end(), edge_re), end; it != end; ++it) {
    ++edges;
    EXPECT_EQ((*it)[3], "WAW");  // the private vars are only read
    const int from = node_to_id.at((*it)[1]), to = node_to_id.at((*it)[2]);
    if (ran_at[to] != ran_at[from] + 1) ++out_of_order;
  }
  EXPECT_EQ(edges, static_cast<int>(names.size()) - 1);
  EXPECT_EQ(out_of_order, 0) << "WAW edges that do not go from a function to the next one run";
  for (const auto& r : reads) {
    for (VarHandle v : r) e->DeleteVariable({}, Context::CPU(), v);
  }
  e->DeleteVariable({}, Context::CPU(), shared);
  e->WaitForAll();
  std::remove(path.c_str());
}

// Strict UTF-8 (RFC 3629: no overlong forms, no surrogates, at most
// U+10FFFF).
bool ValidUtf8(const std::string& s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n = 0;
    std::uint32_t cp = 0, min = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (i + static_cast<std::size_t>(n) >= s.size()) return false;
    for (int k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += static_cast<std::size_t>(n) + 1;
  }
  return true;
}

// Bug: a name holding '|' or a line break was written into the Markdown
// table as it was, which split its row into extra cells or two lines.
TEST_P(ProfilerTest, StatsTableKeepsEachNameInItsOwnCell) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  VarHandle v = e->NewVariable();
  for (const char* name : {"a|b", "two\nlines", "cr\rname", "plain"}) {
    e->PushSync([](RunContext) {}, Context::CPU(), {}, {v}, FnProperty::kNormal, 0, name);
  }
  e->WaitForAll();
  std::ostringstream table;
  DumpProfileStats(*e, table);
  std::istringstream lines(table.str());
  std::vector<std::string> rows;
  for (std::string line; std::getline(lines, line);) rows.push_back(line);
  ASSERT_EQ(rows.size(), 2u + 4u) << table.str();  // header, rule, one row per name
  std::set<std::string> names;
  for (std::size_t i = 2; i < rows.size(); ++i) {
    // Cells end at a '|' that is not escaped; every row has the header's 12.
    std::vector<std::string> cells;
    std::string cell;
    for (std::size_t j = 1; j < rows[i].size(); ++j) {
      if (rows[i][j] == '\\' && j + 1 < rows[i].size() && rows[i][j + 1] == '|') {
        cell += '|';
        ++j;
      } else if (rows[i][j] == '|') {
        cells.push_back(cell);
        cell.clear();
      } else if (rows[i][j] == '\r') {
        cell += "<CR>";  // a raw carriage return would also end the line for a reader
      } else {
        cell += rows[i][j];
      }
    }
    ASSERT_EQ(cells.size(), 12u) << rows[i];
    names.insert(cells[0]);
  }
  EXPECT_EQ(names, (std::set<std::string>{" a|b ", " two lines ", " cr name ", " plain "}));
  e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
}

// Bug: names were copied into the JSON byte for byte, so a name that is not
// valid UTF-8 made the trace and the stats JSON invalid. Invalid bytes now
// become U+FFFD; valid multi-byte characters are kept.
TEST_P(ProfilerTest, NamesThatAreNotUtf8StillGiveValidJson) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  VarHandle v = e->NewVariable();
  const char* names[] = {"caf\xe9",      "na\xc3\xafve",    "cut\xe2\x82",
                         "over\xc0\xaf", "sur\xed\xa0\x80", "\xf0\x9f\x98\x80"};
  for (const char* name : names) {
    e->PushSync([](RunContext) {}, Context::CPU(), {}, {v}, FnProperty::kNormal, 0, name);
  }
  e->WaitForAll();
  const std::string trace_path = TempPath("utf8.json"), stats_path = TempPath("utf8_stats.json");
  DumpProfile(*e, trace_path);
  std::ostringstream table;
  DumpProfileStats(*e, table, stats_path);
  const std::string expected[] = {
      "caf\uFFFD", "na\u00efve", "cut\uFFFD", "over\uFFFD\uFFFD", "sur\uFFFD\uFFFD\uFFFD",
      "\U0001F600"};
  const std::set<std::string> want(std::begin(expected), std::end(expected));
  for (const std::string& path : {trace_path, stats_path}) {
    const std::string text = ReadFile(path);
    EXPECT_TRUE(ValidUtf8(text)) << path;
    json doc;
    ASSERT_NO_THROW(doc = json::parse(text)) << path;
    std::set<std::string> got;
    if (path == trace_path) {
      for (const json& ev : doc["traceEvents"]) {
        if (IsFunctionEvent(ev)) got.insert(ev["name"].get<std::string>());
      }
    } else {
      for (const json& f : doc["functions"]) got.insert(f["name"].get<std::string>());
    }
    EXPECT_EQ(got, want) << path;
  }
  e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  std::remove(trace_path.c_str());
  std::remove(stats_path.c_str());
}

// Names with quotes, backslashes and control characters (a line break, a
// tab, an escape) are escaped in the trace and the statistics JSON, and read
// back as they were pushed.
TEST_P(ProfilerTest, NamesWithControlCharactersRoundTripThroughTheJson) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  VarHandle v = e->NewVariable();
  const std::set<std::string> names = {"line\nbreak", "tab\there", "quote\"and\\slash",
                                       std::string("esc\x1b[0m")};
  for (const std::string& name : names) {
    e->PushSync([](RunContext) {}, Context::CPU(), {}, {v}, FnProperty::kNormal, 0, name.c_str());
  }
  e->WaitForAll();
  const std::string trace_path = TempPath("controls.json");
  const std::string stats_path = TempPath("controls_stats.json");
  DumpProfile(*e, trace_path);
  std::ostringstream table;
  DumpProfileStats(*e, table, stats_path);
  std::set<std::string> in_trace, in_stats;
  // Held in named objects: a range-for over a member of a temporary json
  // would read it after the temporary is gone.
  const json trace = ReadJson(trace_path);
  const json stats = ReadJson(stats_path);
  for (const json& ev : trace["traceEvents"]) {
    if (IsFunctionEvent(ev)) in_trace.insert(ev["name"].get<std::string>());
  }
  for (const json& f : stats["functions"]) in_stats.insert(f["name"].get<std::string>());
  EXPECT_EQ(in_trace, names);
  EXPECT_EQ(in_stats, names);
  e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  std::remove(trace_path.c_str());
  std::remove(stats_path.c_str());
}

// Bug: DumpProfileStats left std::fixed and setprecision(3) on the caller's
// stream.
TEST_P(ProfilerTest, StatsLeaveTheCallersStreamFormatAlone) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  RunSeedProgram(*e);
  std::ostringstream table;
  table << std::hex << std::showbase << std::setprecision(9);
  const std::ios_base::fmtflags flags = table.flags();
  DumpProfileStats(*e, table);
  EXPECT_EQ(table.flags(), flags);
  EXPECT_EQ(table.precision(), 9);
  std::ostringstream plain;
  DumpProfileStats(*e, plain);
  plain.str("");
  plain << 0.5;
  EXPECT_EQ(plain.str(), "0.5");
}

// Bug: tools/trace_to_svg.py wrote function and row names into the SVG as
// they were, so a name holding markup (`<`, `&`) or a control character made
// an SVG that no XML parser accepts; and a trace with no function made it
// crash (min() of nothing).
TEST_P(ProfilerTest, TraceToSvgGivesWellFormedSvg) {
#if defined(DEPENGINE_PYTHON) && defined(DEPENGINE_TRACE_TO_SVG)
  auto e = MakeEngine();
  SetProfiling(*e, true);
  const std::string empty_trace = TempPath("svg_empty.json");
  DumpProfile(*e, empty_trace);
  VarHandle v = e->NewVariable();
  for (const char* name : {"a < b", "x && y", "<tag attr=\"q\">", "ctl\x01", "new\nline"}) {
    e->PushSync([](RunContext) {}, Context::CPU(), {}, {v}, FnProperty::kNormal, 0, name);
  }
  e->WaitForAll();
  const std::string trace = TempPath("svg.json");
  DumpProfile(*e, trace);
  for (const std::string& in : {trace, empty_trace}) {
    const std::string svg = in + ".svg";
    const std::string render =
        std::string(DEPENGINE_PYTHON) + " " + DEPENGINE_TRACE_TO_SVG + " " + in + " " + svg;
    ASSERT_EQ(std::system(render.c_str()), 0) << render;
    // Parsed as XML; the names come back as they were (the control
    // character as U+FFFD).
    const std::string names = svg + ".names";
    const std::string parse = std::string(DEPENGINE_PYTHON) +
                              " -c \"import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); "
                              "open(sys.argv[2], 'w', encoding='utf-8').write('|'.join(sorted("
                              "t.firstChild.data.rsplit(' ', 2)[0] for t in "
                              "d.getElementsByTagName('title'))))\" " +
                              svg + " " + names;
    ASSERT_EQ(std::system(parse.c_str()), 0) << parse;
    // The trace's WaitForAll is drawn on the waiting thread's row too.
    EXPECT_EQ(ReadFile(names),
              in == trace ? "<tag attr=\"q\">|WaitForAll|a < b|ctl\uFFFD|new\nline|x && y" : "")
        << in;
    std::remove(svg.c_str());
    std::remove(names.c_str());
  }
  e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  std::remove(trace.c_str());
  std::remove(empty_trace.c_str());
#else
  GTEST_SKIP() << "python3 not found: tools/trace_to_svg.py is not tested";
#endif
}

// A locale whose numbers JSON and DOT do not accept: ',' as the decimal point
// and '.' between groups of three digits (as de_DE spells them).
struct CommaDecimals : std::numpunct<char> {
  char do_decimal_point() const override { return ','; }
  char do_thousands_sep() const override { return '.'; }
  std::string do_grouping() const override { return "\3"; }
};

// Sets the global locale for its scope.
class GlobalLocale {
 public:
  explicit GlobalLocale(const std::locale& l) : old_(std::locale::global(l)) {}
  ~GlobalLocale() { std::locale::global(old_); }
  GlobalLocale(const GlobalLocale&) = delete;
  GlobalLocale& operator=(const GlobalLocale&) = delete;

 private:
  const std::locale old_;
};

// Bug: the streams the dumps write with took the program's global locale, so
// a program that had set one wrote "seq":1.000 for 1000 in the trace (valid
// JSON, wrong number), "count":1.100 and "total":5,204 in the stats JSON
// (invalid) and node ids "f1.000" in the graph.
TEST_P(ProfilerTest, OutputsIgnoreTheGlobalLocale) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  VarHandle v = e->NewVariable();
  constexpr int kFunctions = 1100;  // seqs past 999, which the locale groups
  for (int i = 0; i < kFunctions; ++i) {
    e->PushSync([](RunContext) {}, Context::CPU(), {}, {v}, FnProperty::kNormal, 0, "f");
  }
  e->WaitForAll();
  const std::string trace_path = TempPath("locale.json"),
                    stats_path = TempPath("locale_stats.json"), graph_path = TempPath("locale.dot");
  {
    GlobalLocale comma(std::locale(std::locale::classic(), new CommaDecimals));
    DumpProfile(*e, trace_path);
    std::ostringstream table;
    DumpProfileStats(*e, table, stats_path);
    DumpDependencyGraph(*e, graph_path);
  }
  json trace;
  ASSERT_NO_THROW(trace = json::parse(ReadFile(trace_path)));
  std::set<std::uint64_t> seqs;
  for (const json& ev : trace["traceEvents"]) {
    if (!IsFunctionEvent(ev)) continue;
    ASSERT_TRUE(ev["args"]["seq"].is_number_unsigned()) << ev.dump();
    seqs.insert(ev["args"]["seq"].get<std::uint64_t>());
  }
  ASSERT_EQ(seqs.size(), static_cast<std::size_t>(kFunctions));
  EXPECT_EQ(*seqs.rbegin() - *seqs.begin(), static_cast<std::uint64_t>(kFunctions - 1));
  json stats;
  ASSERT_NO_THROW(stats = json::parse(ReadFile(stats_path)));
  ASSERT_EQ(stats["functions"].size(), 1u);
  EXPECT_EQ(stats["functions"][0]["count"], kFunctions);
  // Every node: f<seq> with the seq as digits only.
  const std::string dot = ReadFile(graph_path);
  const std::regex node("^  f([0-9]+) \\[label=\"f\\\\n#([0-9]+) [0-9]+\\.[0-9]{3} us\"");
  std::size_t nodes = 0;
  std::istringstream lines(dot);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("[label=") == std::string::npos || line.find("->") != std::string::npos) continue;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(line, m, node)) << line;
    EXPECT_EQ(m[1], m[2]) << line;
    ++nodes;
  }
  EXPECT_EQ(nodes, static_cast<std::size_t>(kFunctions));
  e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  for (const std::string& path : {trace_path, stats_path, graph_path}) std::remove(path.c_str());
}

// Bug: the table had no total of queue wait, which DumpProfileStats promises
// (count, total, mean, p50, p99 and max of run time and of queue wait) and
// the JSON has.
TEST_P(ProfilerTest, StatsTableHasEveryPromisedColumn) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  RunSeedProgram(*e);
  std::ostringstream table;
  DumpProfileStats(*e, table);
  std::string header = table.str().substr(0, table.str().find('\n'));
  std::vector<std::string> columns;
  std::istringstream cells(header.substr(1));
  for (std::string cell; std::getline(cells, cell, '|');)
    columns.push_back(cell.substr(1, cell.size() - 2));
  EXPECT_EQ(columns, (std::vector<std::string>{"function", "count", "run total us", "run mean",
                                               "run p50", "run p99", "run max", "wait total us",
                                               "wait mean", "wait p50", "wait p99", "wait max"}));
}

// Bug: the stats JSON wrote its numbers with the stream's default 6
// significant digits, so it did not hold the table's numbers ("the same as
// JSON"): a 10234.567 us total came out as 10234.6, 1.2 s as 1.20001e+06.
TEST_P(ProfilerTest, StatsJsonHoldsTheTablesNumbers) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  VarHandle v = e->NewVariable();
  // Run times of more than 10 ms: 8 digits or more at the table's 3 decimals.
  for (const char* name : {"slow a", "slow b", "slow c"}) {
    e->PushSync([](RunContext) { std::this_thread::sleep_for(std::chrono::milliseconds(10)); },
                Context::CPU(), {}, {v}, FnProperty::kNormal, 0, name);
  }
  e->WaitForAll();
  std::ostringstream table;
  const std::string path = TempPath("stats_digits.json");
  DumpProfileStats(*e, table, path);
  const json stats = ReadJson(path);
  std::map<std::string, const json*> by_name;
  for (const json& f : stats["functions"]) by_name[f["name"].get<std::string>()] = &f;
  std::istringstream lines(table.str());
  std::string line;
  std::getline(lines, line);  // header
  std::getline(lines, line);  // rule
  int rows = 0;
  while (std::getline(lines, line)) {
    std::vector<std::string> cells;
    std::istringstream row(line.substr(1));
    for (std::string cell; std::getline(row, cell, '|');)
      cells.push_back(cell.substr(1, cell.size() - 2));
    ASSERT_EQ(cells.size(), 12u) << line;
    ASSERT_EQ(by_name.count(cells[0]), 1u) << cells[0];
    const json& f = *by_name[cells[0]];
    EXPECT_EQ(std::to_string(f["count"].get<int>()), cells[1]);
    const json numbers[] = {f["run"]["total"],       f["run"]["mean"],
                            f["run"]["p50"],         f["run"]["p99"],
                            f["run"]["max"],         f["queue_wait"]["total"],
                            f["queue_wait"]["mean"], f["queue_wait"]["p50"],
                            f["queue_wait"]["p99"],  f["queue_wait"]["max"]};
    for (int k = 0; k < 10; ++k) {
      // The table's cell, read as JSON, is the JSON's number.
      EXPECT_EQ(json::parse(cells[static_cast<std::size_t>(k + 2)]), numbers[k])
          << cells[0] << " column " << k + 2 << ": table " << cells[static_cast<std::size_t>(k + 2)]
          << ", JSON " << numbers[k];
    }
    EXPECT_GE(f["run"]["total"].get<double>(), 10000.0);
    ++rows;
  }
  EXPECT_EQ(rows, 3);
  e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  std::remove(path.c_str());
}

// The text of a Graphviz quoted label, as Graphviz reads it: a backslash
// before '"' or before a backslash stands for that character, \n (and \l,
// \r) for a line break, and a backslash before anything else is dropped.
std::string DotLabelAsShown(const std::string& quoted) {
  std::string out;
  for (std::size_t i = 0; i < quoted.size(); ++i) {
    if (quoted[i] != '\\' || i + 1 == quoted.size()) {
      out += quoted[i];
      continue;
    }
    const char next = quoted[++i];
    out += next == 'n' || next == 'l' || next == 'r' ? '\n' : next;
  }
  return out;
}

// Bug: the graph's node labels were JSON string literals, which Graphviz
// does not read as JSON: a tab or another control character (JSON's
// "\u0009") showed as "u0009" in the rendered label.
TEST_P(ProfilerTest, GraphLabelsShowTheNames) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  VarHandle v = e->NewVariable();
  const std::pair<const char*, const char*> names[] = {
      {"tab\there", "tab here"}, {"ctl\x01\x1f\x7f", "ctl   "},
      {"cr\rx", "cr x"},         {"two\nlines", "two\nlines"},
      {"q\"uote", "q\"uote"},    {"back\\slash", "back\\slash"},
      {"ends\\", "ends\\"},      {"\\n", "\\n"},
      {"bad\xff", "bad\uFFFD"},  {"caf\xc3\xa9", "caf\xc3\xa9"}};
  for (const auto& [name, shown] : names) {
    e->PushSync([](RunContext) {}, Context::CPU(), {v}, {}, FnProperty::kNormal, 0, name);
  }
  e->WaitForAll();
  const std::string path = TempPath("labels.dot");
  DumpDependencyGraph(*e, path);
  const std::string dot = ReadFile(path);
  // A node's label: its name, then "\n#<seq> <time> us".
  const std::regex node("\\n  f[0-9]+ \\[label=\"((?:[^\"\\\\]|\\\\.)*)\\\\n#[0-9]+ [0-9.]+ us\"");
  std::multiset<std::string> got, want;
  for (auto it = std::sregex_iterator(dot.begin(), dot.end(), node); it != std::sregex_iterator();
       ++it) {
    got.insert(DotLabelAsShown((*it)[1]));
  }
  for (const auto& [name, shown] : names) want.insert(shown);
  EXPECT_EQ(got, want) << dot;
#ifdef DEPENGINE_DOT
  const std::string cmd = std::string(DEPENGINE_DOT) + " -Tsvg " + path + " -o /dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
#endif
  e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  std::remove(path.c_str());
}

// SetVarName: a named var shows its name wherever the dumps show a var (a
// function's reads and writes, a dependency arrow, a WaitForVar, a graph
// edge), escaped for each format; a var left unnamed keeps "v<number>";
// a name given after its functions ran still applies, an empty one takes
// it back, and a name outlives its var.
TEST_P(ProfilerTest, VarNamesShowInTheTraceAndTheGraph) {
  auto e = MakeEngine();
  SetProfiling(*e, true);
  VarHandle weights = e->NewVariable(), odd = e->NewVariable(), plain = e->NewVariable();
  VarHandle renamed = e->NewVariable();
  const std::string odd_name = "q\"x\\y\nz";  // a quote, a backslash, a line break
  SetVarName(*e, weights, "weights");
  SetVarName(*e, renamed, "temporary");
  // On a threaded engine "init" holds until every function is pushed, so
  // that its successors wait for it and the trace has arrows: "use" is
  // released by init's write of weights, "sum" by use's write of odd. (The
  // naive engine runs each function at its push.)
  std::atomic<bool> go{GetParam() == EngineKind::kNaive};
  e->PushSync(
      [&go](RunContext) {
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      },
      Context::CPU(), {}, {weights, renamed}, FnProperty::kNormal, 0, "init");
  e->PushSync([](RunContext) {}, Context::CPU(), {weights}, {odd}, FnProperty::kNormal, 0, "use");
  e->PushSync([](RunContext) {}, Context::CPU(), {odd, renamed}, {plain}, FnProperty::kNormal, 0,
              "sum");
  e->PushSync([](RunContext) {}, Context::CPU(), {}, {plain}, FnProperty::kNormal, 0, "reset");
  go.store(true, std::memory_order_release);
  e->WaitForVar(weights);
  e->WaitForAll();
  SetVarName(*e, odd, odd_name);  // after its functions ran
  SetVarName(*e, renamed, "");    // back to its number
  e->DeleteVariable({}, Context::CPU(), weights);
  e->WaitForAll();  // the name outlives the var

  const std::string trace_path = TempPath("var_names.json");
  DumpProfile(*e, trace_path);
  const json trace = ReadJson(trace_path);
  std::map<std::string, json> fn;
  std::set<std::string> flow_vars;
  std::string waited;
  for (const json& ev : trace["traceEvents"]) {
    if (IsFunctionEvent(ev)) fn[ev["name"]] = ev["args"];
    if (ev["ph"] == "s") flow_vars.insert(ev["args"]["var"].get<std::string>());
    if (ev["ph"] == "X" && ev["cat"] == "wait" && ev["name"] == "WaitForVar") {
      waited = ev["args"]["var"];
    }
  }
  ASSERT_EQ(fn.count("sum"), 1u) << trace.dump();
  EXPECT_THAT(fn["init"]["writes"].get<std::vector<std::string>>(),
              ::testing::UnorderedElementsAre("weights", ::testing::MatchesRegex("v[0-9]+")));
  EXPECT_EQ(fn["use"]["reads"], json::array({"weights"}));
  EXPECT_EQ(fn["use"]["writes"], json::array({odd_name}));
  EXPECT_THAT(fn["sum"]["writes"][0].get<std::string>(), ::testing::MatchesRegex("v[0-9]+"));
  for (const json& v : fn["sum"]["reads"]) {
    EXPECT_THAT(v.get<std::string>(),
                ::testing::AnyOf(odd_name, ::testing::MatchesRegex("v[0-9]+")))
        << "renamed back to its number";
  }
  EXPECT_EQ(waited, "weights");
  if (GetParam() != EngineKind::kNaive) {  // it runs each function at its push: no arrows
    EXPECT_EQ(flow_vars.count("weights"), 1u) << "init releases use";
    EXPECT_EQ(flow_vars.count(odd_name), 1u) << "use releases sum";
  }

  const std::string graph_path = TempPath("var_names.dot");
  DumpDependencyGraph(*e, graph_path);
  const std::string dot = ReadFile(graph_path);
  EXPECT_THAT(dot, HasSubstr("[label=\"weights RAW\""));                   // init -> use
  EXPECT_THAT(dot, HasSubstr("[label=\"q\\\"x\\\\y\\nz RAW\""));           // use -> sum, escaped
  EXPECT_THAT(dot, ::testing::ContainsRegex("\\[label=\"v[0-9]+ WAW\""));  // sum -> reset
  EXPECT_THAT(dot, Not(HasSubstr("temporary")));
#ifdef DEPENGINE_DOT
  const std::string cmd = std::string(DEPENGINE_DOT) + " -Tsvg " + graph_path + " -o /dev/null";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
#endif
  for (VarHandle v : {odd, plain, renamed}) e->DeleteVariable({}, Context::CPU(), v);
  e->WaitForAll();
  std::remove(trace_path.c_str());
  std::remove(graph_path.c_str());
}

// The message of the std::invalid_argument `f` raises, or what it did instead.
template <class F>
std::string InvalidArgumentMessage(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  } catch (...) {
    return "<another exception>";
  }
  return "<no exception>";
}

TEST_P(ProfilerTest, SetVarNameRefusesAVarItCannotName) {
  auto e = MakeEngine();
  auto other = MakeEngine();
  EXPECT_THAT(InvalidArgumentMessage([&] { SetVarName(*e, nullptr, "x"); }),
              AllOf(HasSubstr("SetVarName"), HasSubstr("null var")));
  VarHandle foreign = other->NewVariable();
  EXPECT_THAT(InvalidArgumentMessage([&] { SetVarName(*e, foreign, "x"); }),
              AllOf(HasSubstr("SetVarName"), HasSubstr("another engine")));
  VarHandle v = e->NewVariable();
  e->DeleteVariable({}, Context::CPU(), v);
  EXPECT_THAT(InvalidArgumentMessage([&] { SetVarName(*e, v, "x"); }),
              AllOf(HasSubstr("SetVarName"), HasSubstr("deleted")));
  e->WaitForAll();
  other->DeleteVariable({}, Context::CPU(), foreign);
  other->WaitForAll();
}

}  // namespace
}  // namespace depengine::profiler_test
