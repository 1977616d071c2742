#include "runner/profile_run.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "depengine/profiler.h"
#include "runner/cases.h"

namespace depengine::bench {
namespace {
// Small enough that a trace opens quickly (W1: 2,000 functions).
constexpr double kProfileScale = 0.002;
}  // namespace

int RunProfiled(const BenchOptions& options, std::ostream& out) {
  std::filesystem::create_directories(options.profile_dir);
  const auto cases = MakeBenchCases(options.n_scale * kProfileScale,
                                    [&](const std::string& id, const std::string& workload) {
                                      return options.Selected(id, workload);
                                    });
  int status = 0;
  for (const BenchCase& c : cases) {
    for (EngineKind kind : options.engines) {
      EngineOptions eo;
      eo.kind = kind;
      eo.cpu_worker_threads = options.workers;
      eo.max_in_flight = c.max_in_flight;  // BP's bound, as its timed runs have it
      auto engine = CreateEngine(eo);
      SetProfiling(*engine, true);
      const WorkloadResult r = c.run(*engine);
      SetProfiling(*engine, false);
      if (!r.ok) {
        out << c.id << " on " << EngineKindName(kind) << ": FAILED: " << r.check_error << "\n";
        status = 1;
        continue;
      }
      const std::string base = options.profile_dir + "/" + c.id + "." + EngineFlagName(kind);
      DumpProfile(*engine, base + ".trace.json");
      std::ofstream table(base + ".stats.md");
      DumpProfileStats(*engine, table, base + ".stats.json");
      DumpDependencyGraph(*engine, base + ".graph.dot");
      out << c.id << " on " << EngineKindName(kind) << ": " << ProfiledFunctionCount(*engine)
          << " functions -> " << base << ".{trace.json,stats.md,stats.json,graph.dot}\n";
    }
  }
  return status;
}

}  // namespace depengine::bench
