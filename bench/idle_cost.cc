// depengine-idle-cost: what a trickle of work costs in CPU time, for each
// EngineOptions::worker_spin_us given. Pushes --functions functions on one
// var, one every --gap-us microseconds (the pusher sleeps in between), and
// prints, per spin value, the median over --reps runs of the process's CPU
// time (user + system, every thread) per function, and the wall time per
// function. The runs of the spin values are interleaved (A B C A B C ...).
//
//   build/bench/depengine-idle-cost [--spins=0,50,200,1000] [--functions=1000]
//                                   [--gap-us=1000] [--reps=3] [--workers=N]
//
// Exit status: 0, or 1 when a run's count is wrong, 2 on bad flags.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/process_cpu.h"
#include "depengine/engine.h"

namespace {

using namespace depengine;
using depengine::bench::ProcessCpuSeconds;

struct Run {
  double cpu_us_per_function;
  double wall_us_per_function;
};

// One run: a fresh engine, so that no earlier run's threads are spinning.
bool RunOnce(int spin_us, int functions, int gap_us, int workers, Run* out) {
  EngineOptions o;
  o.worker_spin_us = spin_us;
  o.cpu_worker_threads = workers;
  auto engine = CreateEngine(o);
  VarHandle v = engine->NewVariable();
  int count = 0;  // written by the functions, in push order (one var)
  engine->WaitForAll();
  const double cpu0 = ProcessCpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < functions; ++i) {
    engine->PushSync([&count](RunContext) { ++count; }, Context::CPU(), {}, {v});
    std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
  }
  engine->WaitForAll();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = ProcessCpuSeconds() - cpu0;
  engine->DeleteVariable(nullptr, Context::CPU(), v);
  engine->WaitForAll();
  if (count != functions) {
    std::fprintf(stderr, "depengine-idle-cost: spin %d us: %d of %d functions ran\n", spin_us,
                 count, functions);
    return false;
  }
  out->cpu_us_per_function = cpu * 1e6 / functions;
  out->wall_us_per_function = wall * 1e6 / functions;
  return true;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

bool ParseInt(const std::string& arg, const char* flag, int min, int max, int* out) {
  const std::string prefix = std::string(flag) + "=";
  if (arg.rfind(prefix, 0) != 0) return false;
  char* end = nullptr;
  const long v = std::strtol(arg.c_str() + prefix.size(), &end, 10);
  if (*end != '\0' || end == arg.c_str() + prefix.size() || v < min || v > max) {
    std::fprintf(stderr, "depengine-idle-cost: %s: expected an integer in [%d, %d]\n", arg.c_str(),
                 min, max);
    std::exit(2);
  }
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> spins = {0, EngineOptions::kDefaultWorkerSpinUs, 200, 1000};
  int functions = 1000, gap_us = 1000, reps = 3, workers = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--spins=", 0) == 0) {
      spins.clear();
      std::string list = arg.substr(8) + ",";
      for (std::size_t start = 0, comma; (comma = list.find(',', start)) != std::string::npos;
           start = comma + 1) {
        int s = 0;
        ParseInt("s=" + list.substr(start, comma - start), "s", 0, EngineOptions::kMaxWorkerSpinUs,
                 &s);
        spins.push_back(s);
      }
    } else if (!ParseInt(arg, "--functions", 1, 100'000'000, &functions) &&
               !ParseInt(arg, "--gap-us", 0, 10'000'000, &gap_us) &&
               !ParseInt(arg, "--reps", 1, 1000, &reps) &&
               !ParseInt(arg, "--workers", 0, 1024, &workers)) {
      std::fprintf(stderr,
                   "usage: depengine-idle-cost [--spins=0,50,200,1000] [--functions=1000] "
                   "[--gap-us=1000] [--reps=3] [--workers=N]\n");
      return 2;
    }
  }
  std::vector<std::vector<double>> cpu(spins.size()), wall(spins.size());
  for (int r = 0; r < reps; ++r) {
    for (std::size_t s = 0; s < spins.size(); ++s) {
      Run run{};
      if (!RunOnce(spins[s], functions, gap_us, workers, &run)) return 1;
      cpu[s].push_back(run.cpu_us_per_function);
      wall[s].push_back(run.wall_us_per_function);
    }
  }
  std::printf("%d functions, one every %d us, per-device engine, median of %d\n\n", functions,
              gap_us, reps);
  std::printf("| worker_spin_us | CPU us per function | wall us per function |\n");
  std::printf("|--:|--:|--:|\n");
  for (std::size_t s = 0; s < spins.size(); ++s) {
    std::printf("| %d | %.1f | %.1f |\n", spins[s], Median(cpu[s]), Median(wall[s]));
  }
  return 0;
}
