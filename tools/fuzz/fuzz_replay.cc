// Runs fuzz programs without libFuzzer (any compiler, any sanitizer): the
// committed corpus, crash inputs, or random byte strings.
//
//   depengine_fuzz_replay FILE|DIR...          run each file (each file in DIR)
//   depengine_fuzz_replay --random N [--seed S] [--max-len L] [--emit DIR]
//                                              run N random programs; --emit
//                                              writes each input to DIR
//   depengine_fuzz_replay --describe FILE      print the program FILE decodes to
// Exits non-zero on the first program that disagrees with the model, after
// printing the reason, the input's name and the decoded program.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "program.h"

namespace {

namespace fs = std::filesystem;
using depengine::fuzz::RunProgram;
using depengine::fuzz::RunResult;

std::vector<std::uint8_t> ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct Totals {
  std::uint64_t programs = 0, functions = 0, ran = 0, skipped = 0, failures = 0, waits = 0,
                rejected = 0;
  void Add(const RunResult& r) {
    ++programs;
    functions += r.stats.functions;
    ran += r.stats.ran;
    skipped += r.stats.skipped;
    failures += r.stats.failures;
    waits += r.stats.waits;
    rejected += r.stats.rejected;
  }
};

bool RunOne(const std::string& name, const std::vector<std::uint8_t>& bytes, Totals* totals) {
  static const depengine::fuzz::RunOptions options = depengine::fuzz::OptionsFromEnv();
  const RunResult r = RunProgram(bytes.data(), bytes.size(), options);
  if (!r.ok) {
    std::fprintf(stderr, "FAILED %s: %s\nprogram:\n%s", name.c_str(), r.error.c_str(),
                 depengine::fuzz::DescribeProgram(bytes.data(), bytes.size()).c_str());
    return false;
  }
  totals->Add(r);
  return true;
}

int Usage() {
  std::fprintf(stderr,
               "usage: depengine_fuzz_replay FILE|DIR...\n"
               "       depengine_fuzz_replay --random N [--seed S] [--max-len L] [--emit DIR]\n"
               "       depengine_fuzz_replay --describe FILE\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> inputs;
  long random_n = 0;
  unsigned long seed = 1;
  std::size_t max_len = 512;
  std::string emit;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--random") {
      const char* v = value();
      if (v == nullptr) return Usage();
      random_n = std::atol(v);
    } else if (a == "--seed") {
      const char* v = value();
      if (v == nullptr) return Usage();
      seed = std::strtoul(v, nullptr, 10);
    } else if (a == "--max-len") {
      const char* v = value();
      if (v == nullptr) return Usage();
      max_len = std::strtoul(v, nullptr, 10);
    } else if (a == "--emit") {
      const char* v = value();
      if (v == nullptr) return Usage();
      emit = v;
    } else if (a == "--describe") {
      const char* v = value();
      if (v == nullptr) return Usage();
      const auto bytes = ReadFile(v);
      std::printf("%s", depengine::fuzz::DescribeProgram(bytes.data(), bytes.size()).c_str());
      return 0;
    } else if (a.rfind("--", 0) == 0) {
      return Usage();
    } else {
      inputs.push_back(a);
    }
  }
  if (inputs.empty() && random_n == 0) return Usage();

  const auto start = std::chrono::steady_clock::now();
  Totals totals;
  int failed = 0;
  for (const std::string& in : inputs) {
    std::vector<fs::path> files;
    if (fs::is_directory(in)) {
      for (const auto& e : fs::directory_iterator(in)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
      std::sort(files.begin(), files.end());
    } else {
      files.push_back(in);
    }
    for (const fs::path& f : files) failed += RunOne(f.string(), ReadFile(f), &totals) ? 0 : 1;
  }
  std::mt19937_64 rng(seed);
  if (!emit.empty()) fs::create_directories(emit);
  for (long i = 0; i < random_n; ++i) {
    std::vector<std::uint8_t> bytes(1 + rng() % max_len);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    std::string name = "random-seed";
    name += std::to_string(seed);
    name += '-';
    name += std::to_string(i);
    if (!emit.empty()) {
      std::ofstream(fs::path(emit) / name, std::ios::binary)
          .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    }
    failed += RunOne(name, bytes, &totals) ? 0 : 1;
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "depengine-fuzz-replay: %llu programs in %.1f s, %llu functions (%llu ran, %llu skipped), "
      "%llu failures raised, %llu waits checked, %llu bad calls rejected\n",
      static_cast<unsigned long long>(totals.programs), secs,
      static_cast<unsigned long long>(totals.functions), static_cast<unsigned long long>(totals.ran),
      static_cast<unsigned long long>(totals.skipped),
      static_cast<unsigned long long>(totals.failures),
      static_cast<unsigned long long>(totals.waits),
      static_cast<unsigned long long>(totals.rejected));
  std::printf("%llu passed, %d failed\n", static_cast<unsigned long long>(totals.programs), failed);
  return failed == 0 ? 0 : 1;
}
