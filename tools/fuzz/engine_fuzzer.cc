// libFuzzer entry point: each input is a fuzz program (program.h), run on a
// fresh engine and checked against the serial model. A discrepancy aborts
// with the reason and the decoded program, so libFuzzer saves the input.
//
//   tools/ci/fuzz.sh                      # build and fuzz for about a minute
//   build-fuzz/tools/fuzz/depengine_fuzzer tools/fuzz/corpus -max_total_time=600
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "program.h"

namespace {

// Totals over the whole fuzzing run, printed every 2^14 programs and at exit.
struct Totals {
  std::atomic<std::uint64_t> programs{0}, functions{0}, ran{0}, skipped{0}, failures{0},
      waits{0}, rejected{0};
  void Print() const {
    std::fprintf(stderr,
                 "depengine-fuzz totals: %llu programs, %llu functions (%llu ran, %llu skipped), "
                 "%llu failures raised, %llu waits checked, %llu bad calls rejected\n",
                 static_cast<unsigned long long>(programs.load()),
                 static_cast<unsigned long long>(functions.load()),
                 static_cast<unsigned long long>(ran.load()),
                 static_cast<unsigned long long>(skipped.load()),
                 static_cast<unsigned long long>(failures.load()),
                 static_cast<unsigned long long>(waits.load()),
                 static_cast<unsigned long long>(rejected.load()));
  }
  ~Totals() {
    if (programs.load() > 0) Print();
  }
};
Totals totals;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 4096) return -1;  // keep programs small: more of them per second
  static const depengine::fuzz::RunOptions options = [] {
    depengine::fuzz::RunOptions o = depengine::fuzz::OptionsFromEnv();
    o.deadline_seconds = 30;
    return o;
  }();
  const depengine::fuzz::RunResult r = depengine::fuzz::RunProgram(data, size, options);
  if (!r.ok) {
    std::fprintf(stderr, "depengine-fuzz: %s\nprogram:\n%s", r.error.c_str(),
                 depengine::fuzz::DescribeProgram(data, size).c_str());
    std::fflush(stderr);
    std::abort();
  }
  totals.functions += r.stats.functions;
  totals.ran += r.stats.ran;
  totals.skipped += r.stats.skipped;
  totals.failures += r.stats.failures;
  totals.waits += r.stats.waits;
  totals.rejected += r.stats.rejected;
  if ((++totals.programs & 0x3fff) == 0) totals.Print();
  return 0;
}
