// depengine-bench: the workload runner. Runs W1-W5 of WORKLOADS.md on each
// engine kind, checks every result, and prints a Markdown table (and JSON
// with --json). Exit status: 0 when every check passed, 1 when one failed,
// 2 on bad flags. See --help.
#include <cstdio>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "runner/bench_options.h"
#include "runner/interleaved_run.h"
#include "runner/memory_probe.h"
#include "runner/profile_run.h"
#include "runner/report.h"

int main(int argc, char** argv) {
  using namespace depengine::bench;
  BenchOptions options;
  try {
    options = ParseBenchOptions(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "depengine-bench: %s\n", e.what());
    return 2;
  }
  if (options.help) {
    std::fputs(BenchUsage().c_str(), stdout);
    return 0;
  }
  if (!options.probe_case.empty()) return RunProbe(options);
  if (!options.profile_dir.empty()) return RunProfiled(options, std::cout);

  try {
    const std::vector<ReportRow> rows = RunInterleaved(options, std::cerr);
    ReportSettings settings;
    settings.workers = options.workers;
    settings.reps = options.reps;
    settings.n_scale = options.n_scale;
    settings.hardware_threads = std::thread::hardware_concurrency();
    std::cout << "\n";
    PrintMarkdown(std::cout, settings, rows);
    if (!options.json_path.empty()) {
      std::string error;
      if (!WriteJson(options.json_path, settings, rows, &error)) {
        std::fprintf(stderr, "depengine-bench: %s\n", error.c_str());
        return 1;
      }
    }
    return AllPassed(rows) ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "depengine-bench: %s\n", e.what());
    return 1;
  }
}
