// depengine_stress: stress and soak programs (not unit tests). Each checks
// its results and prints its figures; exit status 1 when a check fails.
//
//   depengine_stress throughput [--functions 10000000] [--vars 100000]
//       random functions (1-2 reads, 1 write) over many vars, values checked
//       against the serial run; ns per function, peak RSS
//   depengine_stress live-vars [--vars 1000000]
//       a million live vars, each used once; bytes per var
//   depengine_stress pending [--functions 1000000]
//       a million functions pending behind one blocked var; bytes per
//       pending function, drain time
//   depengine_stress cycles [--cycles 50] [--functions 1000000] [--vars 1000]
//       the same work again and again; resident memory after cycle 5 and
//       after the last cycle must not grow
//   depengine_stress serializable [--functions 2000000] [--vars 64] [--threads 4]
//       threads pushing at once random reads and writes of shared vars; each
//       function runs once, no conflicting uses overlap, and the vars' orders
//       fit one serial program of the threads' pushes (SerialOrderLog)
//   depengine_stress all [--short]
//       all five, full size or the short CI size
// Common flags: --engine naive|pooled|perdevice (default perdevice),
// --workers N (default 2).
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/sanitizers.h"
#include "depengine/engine.h"
#include "hold.h"
#include "serial_order.h"

namespace {

using namespace depengine;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------- measurements

// Resident set size now, in bytes (/proc/self/statm).
std::size_t RssBytes() {
  std::ifstream in("/proc/self/statm");
  std::size_t pages_total = 0, pages_resident = 0;
  in >> pages_total >> pages_resident;
  return pages_resident * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

// Peak resident set size, in bytes (VmHWM in /proc/self/status).
std::size_t PeakRssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  }
  return 0;
}

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

double MiB(std::size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

// Whether freed memory stays resident for a while: AddressSanitizer keeps it
// in its quarantine (256 MiB by default) to catch uses after free, so RSS
// grows from cycle to cycle with no leak. ASAN_OPTIONS=quarantine_size_mb=0
// turns the quarantine off.
bool FreedMemoryStaysResident() {
  if (!DEPENGINE_ASAN) return false;
  const char* options = std::getenv("ASAN_OPTIONS");
  const char* key = "quarantine_size_mb=";
  const char* at = options != nullptr ? std::strstr(options, key) : nullptr;
  return at == nullptr || std::strtol(at + std::strlen(key), nullptr, 10) != 0;
}

std::uint64_t Mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t z = a + 0x9e3779b97f4a7c15ull + (b << 6) + (b >> 2);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

struct Config {
  EngineKind kind = EngineKind::kPerDevice;
  int workers = 2;
  std::map<std::string, long> flags;  // --functions, --vars, --cycles
  bool short_run = false;

  long Get(const char* name, long full, long short_value) const {
    auto it = flags.find(name);
    if (it != flags.end()) return it->second;
    return short_run ? short_value : full;
  }
  std::unique_ptr<Engine> MakeEngine(std::size_t max_in_flight = 0) const {
    EngineOptions o;
    o.kind = kind;
    o.cpu_worker_threads = workers;
    o.max_in_flight = max_in_flight;
    return CreateEngine(o);
  }
};

bool Check(bool ok, const char* what) {
  if (!ok) std::printf("  CHECK FAILED: %s\n", what);
  return ok;
}

using support::Hold;  // keeps vars busy until Release() (tools/common/hold.h)

// ---------------------------------------------------------------- programs

// Random functions over many vars; the values are checked against the
// serial run computed while pushing.
bool Throughput(const Config& c) {
  const long n = c.Get("functions", 10'000'000, 500'000);
  const long nvars = c.Get("vars", 100'000, 10'000);
  std::printf("throughput: %ld functions over %ld vars (%s, %d workers)\n", n, nvars,
              EngineKindName(c.kind), c.workers);
  // Backpressure keeps memory bounded while the pusher runs ahead.
  auto engine = c.MakeEngine(1 << 20);
  std::vector<VarHandle> vars(static_cast<std::size_t>(nvars));
  for (auto& v : vars) v = engine->NewVariable();
  std::vector<std::uint64_t> value(static_cast<std::size_t>(nvars), 0);  // plain on purpose
  std::vector<std::uint64_t> expect(static_cast<std::size_t>(nvars), 0);
  std::mt19937_64 rng(42);
  const auto t0 = Clock::now();
  for (long i = 0; i < n; ++i) {
    const auto w = static_cast<std::size_t>(rng() % static_cast<std::uint64_t>(nvars));
    auto r = static_cast<std::size_t>(rng() % static_cast<std::uint64_t>(nvars));
    if (r == w) r = (r + 1) % static_cast<std::size_t>(nvars);
    const auto k = static_cast<std::uint64_t>(i);
    engine->PushSync([&value, w, r, k](RunContext) { value[w] = Mix(value[w], value[r] ^ k); },
                     Context::CPU(), {vars[r]}, {vars[w]});
    expect[w] = Mix(expect[w], expect[r] ^ k);
  }
  engine->WaitForAll();
  const double secs = Seconds(t0);
  bool ok = Check(value == expect, "final values equal the serial run");
  for (auto v : vars) engine->DeleteVariable(nullptr, Context::CPU(), v);
  engine->WaitForAll();
  engine.reset();
  std::printf("  %.1f s, %.0f ns per function, peak RSS %.1f MiB%s\n", secs,
              secs * 1e9 / static_cast<double>(n), MiB(PeakRssBytes()), ok ? "" : "  FAILED");
  return ok;
}

// A million live vars, each used by one function.
bool LiveVars(const Config& c) {
  const long n = c.Get("vars", 1'000'000, 100'000);
  std::printf("live-vars: %ld live vars (%s)\n", n, EngineKindName(c.kind));
  auto engine = c.MakeEngine();
  const std::size_t rss0 = RssBytes();
  std::vector<VarHandle> vars;
  vars.reserve(static_cast<std::size_t>(n));
  const std::size_t rss_vec = RssBytes();
  const auto t0 = Clock::now();
  for (long i = 0; i < n; ++i) vars.push_back(engine->NewVariable());
  const double create_s = Seconds(t0);
  const std::size_t rss1 = RssBytes();
  std::atomic<long> ran{0};
  for (auto v : vars) engine->PushSync([&ran](RunContext) { ran++; }, Context::CPU(), {}, {v});
  engine->WaitForAll();
  const std::size_t rss2 = RssBytes();
  bool ok = Check(ran.load() == n, "one function per var ran");
  const auto t1 = Clock::now();
  for (auto v : vars) engine->DeleteVariable(nullptr, Context::CPU(), v);
  engine->WaitForAll();
  const double delete_s = Seconds(t1);
  const std::size_t rss3 = RssBytes();
  engine.reset();
  (void)rss0;
  std::printf(
      "  %.0f bytes per live var (RSS +%.1f MiB for %ld vars), created in %.2f s, "
      "used: RSS +%.1f MiB more, deleted in %.2f s, RSS after deleting %.1f MiB%s\n",
      static_cast<double>(rss1 - rss_vec) / static_cast<double>(n), MiB(rss1 - rss_vec), n,
      create_s, MiB(rss2 > rss1 ? rss2 - rss1 : 0), delete_s, MiB(rss3), ok ? "" : "  FAILED");
  return ok;
}

// A million functions pending behind one blocked var.
bool Pending(const Config& c) {
  const long n = c.Get("functions", 1'000'000, 100'000);
  std::printf("pending: %ld functions behind one blocked var (%s)\n", n, EngineKindName(c.kind));
  auto engine = c.MakeEngine();
  VarHandle v = engine->NewVariable();
  // Warm up the engine's pools and threads so that they are not counted.
  for (int i = 0; i < 1000; ++i) engine->PushSync([](RunContext) {}, Context::CPU(), {}, {v});
  engine->WaitForAll();
  Hold blocker(*engine, {}, {v});
  long counter = 0;  // plain: the functions form one chain on v
  const std::size_t rss0 = RssBytes();
  const auto t0 = Clock::now();
  for (long i = 0; i < n; ++i) {
    engine->PushSync([&counter](RunContext) { ++counter; }, Context::CPU(), {}, {v});
  }
  const double push_s = Seconds(t0);
  const std::size_t rss1 = RssBytes();
  const auto t1 = Clock::now();
  blocker.Release();
  engine->WaitForAll();
  const double drain_s = Seconds(t1);
  bool ok = Check(counter == n, "every pending function ran once, in order");
  engine->DeleteVariable(nullptr, Context::CPU(), v);
  engine->WaitForAll();
  engine.reset();
  std::printf(
      "  %.0f bytes per pending function (RSS +%.1f MiB), pushed in %.2f s "
      "(%.0f ns each), drained in %.2f s%s\n",
      static_cast<double>(rss1 - rss0) / static_cast<double>(n), MiB(rss1 - rss0), push_s,
      push_s * 1e9 / static_cast<double>(n), drain_s, ok ? "" : "  FAILED");
  return ok;
}

// The same work, cycle after cycle: memory must not grow.
bool Cycles(const Config& c) {
  const long cycles = c.Get("cycles", 50, 12);
  const long n = c.Get("functions", 1'000'000, 100'000);
  const long nvars = c.Get("vars", 1000, 1000);
  std::printf("cycles: %ld cycles of %ld functions over %ld vars (%s)\n", cycles, n, nvars,
              EngineKindName(c.kind));
  // The engine keeps its blocks in pools that never shrink, so resident
  // memory follows the most objects ever taken from each pool. Bound that
  // and reach the bound once before measuring: any growth after that is a
  // leak, not a scheduling accident. The cycles run with at most kInFlight
  // functions in flight (max_in_flight). A pool holds those functions'
  // objects plus the free ones its threads' caches keep (up to 256 a thread:
  // the pusher and the workers), so each pool is filled once with
  // kInFlight + kCacheSlack objects in use at once:
  //   - blocks of one var and of several (two pools);
  //   - ReaderGroups: a run of reads waiting on a var takes one group per 11
  //     reads after its first, so kInFlight functions that each read one var
  //     use at most kInFlight / 2 groups at once (runs of two).
  // This is done on an engine of its own with no bound on functions in
  // flight: the pools are the process's, not an engine's. Without the
  // slack, a pool's next chunk was sometimes taken after cycle 5, on a new
  // 2 MiB huge page of its region: resident memory rose by exactly 2.0 MiB
  // in 4 of 20 short runs.
  constexpr std::size_t kInFlight = 1 << 16;
  constexpr std::size_t kCacheSlack = 4 * 256;
  {
    auto warm = c.MakeEngine();
    VarHandle x = warm->NewVariable();
    VarHandle y = warm->NewVariable();
    const auto nothing = [](RunContext) {};
    // One phase per pool, each drained before the next, to keep the peak low.
    const auto phase = [&](auto push) {
      Hold blocker(*warm, {}, {x});
      push();
      blocker.Release();
      warm->WaitForAll();
    };
    phase([&] {
      for (std::size_t i = 0; i < kInFlight + kCacheSlack; ++i) {
        warm->PushSync(nothing, Context::CPU(), {}, {x});
      }
    });
    phase([&] {
      for (std::size_t i = 0; i < kInFlight + kCacheSlack; ++i) {
        warm->PushSync(nothing, Context::CPU(), {y}, {x});
      }
    });
    phase([&] {
      for (std::size_t g = 0; g < kInFlight / 2 + kCacheSlack; ++g) {
        warm->PushSync(nothing, Context::CPU(), {x}, {});
        warm->PushSync(nothing, Context::CPU(), {x}, {});
        warm->PushSync(nothing, Context::CPU(), {}, {x});
      }
    });
    for (VarHandle v : {x, y}) warm->DeleteVariable(nullptr, Context::CPU(), v);
    warm->WaitForAll();
  }
  auto engine = c.MakeEngine(kInFlight);
  std::vector<VarHandle> vars(static_cast<std::size_t>(nvars));
  for (auto& v : vars) v = engine->NewVariable();
  std::vector<std::uint64_t> value(static_cast<std::size_t>(nvars), 0);
  std::vector<std::uint64_t> expect(static_cast<std::size_t>(nvars), 0);
  // Each function's vars and key, written before its push and read by its
  // body, so that a closure holds two pointers and fits in std::function's
  // own storage. With the three values in the closure, each push allocated
  // it from malloc, and the heap's high-water mark followed how far the
  // pusher ran ahead of the workers: resident memory rose by up to 2.9 MiB
  // after cycle 5 in some short runs (malloc's arena grew while the bytes
  // in use at each check stayed the same), which is this program's memory,
  // not the engine's. Reused every cycle: the previous cycle's functions
  // have all finished (WaitForAll) before its entries are written again.
  struct Use {
    std::size_t w, r;
    std::uint64_t k;
  };
  std::vector<Use> uses(static_cast<std::size_t>(n));
  std::mt19937_64 rng(7);
  std::size_t rss5 = 0, rss_last = 0;
  bool ok = true;
  const auto t0 = Clock::now();
  for (long cycle = 1; cycle <= cycles; ++cycle) {
    for (long i = 0; i < n; ++i) {
      Use& u = uses[static_cast<std::size_t>(i)];
      u.w = static_cast<std::size_t>(rng() % static_cast<std::uint64_t>(nvars));
      u.r = static_cast<std::size_t>(rng() % static_cast<std::uint64_t>(nvars));
      u.k = static_cast<std::uint64_t>(i);
      std::uint64_t* const v = value.data();
      const Use* const use = &u;
      if (u.r == u.w) {
        engine->PushSync([v, use](RunContext) { v[use->w] = Mix(v[use->w], use->k); },
                         Context::CPU(), {}, {vars[u.w]});
        expect[u.w] = Mix(expect[u.w], u.k);
      } else {
        engine->PushSync([v, use](RunContext) { v[use->w] = Mix(v[use->w], v[use->r] ^ use->k); },
                         Context::CPU(), {vars[u.r]}, {vars[u.w]});
        expect[u.w] = Mix(expect[u.w], expect[u.r] ^ u.k);
      }
    }
    // Some churn: an operator made, pushed and deleted.
    OprHandle op =
        engine->NewOperator([](RunContext, CallbackOnComplete cb) { cb(); }, {}, {vars[0]});
    for (int i = 0; i < 100; ++i) engine->Push(op, Context::CPU());
    engine->DeleteOperator(op);
    engine->WaitForAll();
    if (!Check(value == expect, "values equal the serial run")) {
      ok = false;
      break;
    }
    // More churn, with nothing in flight: a var replaced every cycle.
    const auto slot = static_cast<std::size_t>(cycle % nvars);
    engine->DeleteVariable(nullptr, Context::CPU(), vars[slot]);
    vars[slot] = engine->NewVariable();
    value[slot] = expect[slot] = 0;
    const std::size_t rss = RssBytes();
    if (cycle == 5) rss5 = rss;
    rss_last = rss;
    if (cycle == 1 || cycle == 5 || cycle == cycles || cycle % 10 == 0) {
      std::printf("  after cycle %ld: RSS %.1f MiB (%.1f s)\n", cycle, MiB(rss), Seconds(t0));
      std::fflush(stdout);
    }
  }
  for (auto v : vars) engine->DeleteVariable(nullptr, Context::CPU(), v);
  engine->WaitForAll();
  engine.reset();
  if (ok && cycles >= 5 && FreedMemoryStaysResident()) {
    std::printf(
        "  RSS growth not checked: built with AddressSanitizer, whose quarantine keeps freed "
        "memory resident (ASAN_OPTIONS=quarantine_size_mb=0 checks it)\n");
  } else if (ok && cycles >= 5) {
    // Allow allocator noise (2% or 2 MiB), no more.
    const double limit = static_cast<double>(rss5) * 1.02 + 2.0 * 1024 * 1024;
    ok = Check(static_cast<double>(rss_last) <= limit, "resident memory does not grow");
    std::printf("  RSS after cycle 5: %.1f MiB, after cycle %ld: %.1f MiB (%+.1f%%)%s\n", MiB(rss5),
                cycles, MiB(rss_last),
                100.0 * (static_cast<double>(rss_last) - static_cast<double>(rss5)) /
                    static_cast<double>(rss5),
                ok ? "" : "  FAILED");
  }
  return ok;
}

// Several threads push, all at once, functions of one to three shared vars,
// each read or written, some async; see SerialOrderLog for the check.
bool Serializable(const Config& c) {
  const long n = c.Get("functions", 2'000'000, 200'000);
  const long nvars = c.Get("vars", 64, 64);
  const long nthreads = c.Get("threads", 4, 4);
  if (n <= 0 || nvars < 3 || nthreads <= 0 || n > (1L << 30)) {
    std::printf("serializable: need --functions in [1, 2^30], --vars >= 3, --threads >= 1\n");
    return false;
  }
  std::printf("serializable: %ld functions from %ld threads over %ld shared vars (%s, %d workers)\n",
              n, nthreads, nvars, EngineKindName(c.kind), c.workers);
  const long per_thread = n / nthreads;
  const long total = per_thread * nthreads;
  // Bounded, so that the pushers do not run far ahead of the workers.
  auto engine = c.MakeEngine(1 << 16);
  std::vector<VarHandle> vars(static_cast<std::size_t>(nvars));
  for (auto& v : vars) v = engine->NewVariable();
  support::SerialOrderLog log(static_cast<int>(nvars), static_cast<int>(total));
  std::vector<std::atomic<std::uint8_t>> runs(static_cast<std::size_t>(total));
  std::vector<std::vector<int>> pushed(static_cast<std::size_t>(nthreads));
  struct Use {
    int var;
    bool write;
  };
  const auto t0 = Clock::now();
  std::vector<std::thread> threads;
  for (long t = 0; t < nthreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(7 + t));
      auto& order = pushed[static_cast<std::size_t>(t)];
      order.reserve(static_cast<std::size_t>(per_thread));
      std::vector<VarHandle> reads, writes;  // reused: PushSync copies what it needs
      for (long i = 0; i < per_thread; ++i) {
        const int fn = static_cast<int>(t * per_thread + i);
        std::array<Use, 3> uses{};
        const int k = 1 + static_cast<int>(rng() % 3);
        for (int j = 0; j < k; ++j) {
          int v;
          do {
            v = static_cast<int>(rng() % static_cast<std::uint64_t>(nvars));
          } while (std::any_of(uses.begin(), uses.begin() + j, [v](const Use& u) { return u.var == v; }));
          uses[static_cast<std::size_t>(j)] = {v, rng() % 2 == 0};
        }
        reads.clear();
        writes.clear();
        for (int j = 0; j < k; ++j) {
          const Use& u = uses[static_cast<std::size_t>(j)];
          (u.write ? writes : reads).push_back(vars[static_cast<std::size_t>(u.var)]);
        }
        auto body = [&log, &runs, fn, uses, k] {
          for (int j = 0; j < k; ++j) log.Start(uses[j].var, fn, uses[j].write);
          for (int j = 0; j < k; ++j) log.Finish(uses[j].var, uses[j].write);
          runs[static_cast<std::size_t>(fn)].fetch_add(1, std::memory_order_relaxed);
        };
        if (i % 4 == 0) {
          engine->PushAsync([body](RunContext, CallbackOnComplete done) { body(); done(); },
                            Context::CPU(), reads, writes);
        } else {
          engine->PushSync([body](RunContext) { body(); }, Context::CPU(), reads, writes);
        }
        order.push_back(fn);
      }
    });
  }
  for (auto& th : threads) th.join();
  engine->WaitForAll();
  const double secs = Seconds(t0);
  long wrong_runs = 0;
  for (const auto& r : runs) wrong_runs += r.load() != 1 ? 1 : 0;
  bool ok = Check(wrong_runs == 0, "every function ran exactly once");
  ok = Check(log.overlaps() == 0, "no conflicting uses of a var ran at the same time") && ok;
  const int on_cycles = log.FunctionsOnCycles(pushed);
  ok = Check(on_cycles == 0, "the vars' orders fit one serial program of the threads' pushes") && ok;
  for (auto v : vars) engine->DeleteVariable(nullptr, Context::CPU(), v);
  engine->WaitForAll();
  std::printf("  %.1f s, %.0f ns per function; %ld ran other than once, %d overlaps, %d on cycles%s\n",
              secs, secs * 1e9 / static_cast<double>(total), wrong_runs, log.overlaps(), on_cycles,
              ok ? "" : "  FAILED");
  return ok;
}

int Usage() {
  std::fprintf(stderr,
               "usage: depengine_stress throughput|live-vars|pending|cycles|serializable|all\n"
               "         [--short] [--engine naive|pooled|perdevice] [--workers N]\n"
               "         [--functions N] [--vars N] [--cycles N] [--threads N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Usage();
  const std::string mode = argv[1];
  Config c;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--short") {
      c.short_run = true;
    } else if (a == "--engine" && i + 1 < argc) {
      const std::string k = argv[++i];
      if (k == "naive") {
        c.kind = EngineKind::kNaive;
      } else if (k == "pooled") {
        c.kind = EngineKind::kPooled;
      } else if (k == "perdevice") {
        c.kind = EngineKind::kPerDevice;
      } else {
        return Usage();
      }
    } else if (a == "--workers" && i + 1 < argc) {
      c.workers = std::atoi(argv[++i]);
    } else if (a.rfind("--", 0) == 0 && i + 1 < argc) {
      c.flags[a.substr(2)] = std::atol(argv[++i]);
    } else {
      return Usage();
    }
  }
  std::vector<std::pair<std::string, std::function<bool(const Config&)>>> programs = {
      {"throughput", Throughput},
      {"live-vars", LiveVars},
      {"pending", Pending},
      {"cycles", Cycles},
      {"serializable", Serializable}};
  int passed = 0, failed = 0;
  for (auto& [name, fn] : programs) {
    if (mode != "all" && mode != name) continue;
    (fn(c) ? passed : failed) += 1;
    std::fflush(stdout);
  }
  if (passed + failed == 0) return Usage();
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
