// The fuzz programs under ctest: the committed seed corpus, every input the
// fuzzer ever failed on (tools/fuzz/regressions), and a batch of random
// programs, each checked against the serial model (tools/fuzz/program.h).
// In the sanitizer builds this puts the whole corpus through TSan and ASan.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "program.h"
#include "reliability_util.h"

namespace depengine::reliability {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> FilesIn(const char* dir) {
  std::vector<fs::path> files;
  if (!fs::is_directory(dir)) return files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().filename().string()[0] != '.') files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

void RunFile(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  const std::vector<std::uint8_t> bytes{std::istreambuf_iterator<char>(in),
                                        std::istreambuf_iterator<char>()};
  const fuzz::RunResult r = fuzz::RunProgram(bytes.data(), bytes.size(), fuzz::OptionsFromEnv());
  EXPECT_TRUE(r.ok) << f << ": " << r.error << "\nprogram:\n"
                    << fuzz::DescribeProgram(bytes.data(), bytes.size());
}

TEST(FuzzCorpus, SeedCorpus) {
  const auto files = FilesIn(DEPENGINE_FUZZ_CORPUS_DIR);
  ASSERT_FALSE(files.empty()) << "no seed corpus in " << DEPENGINE_FUZZ_CORPUS_DIR;
  for (const auto& f : files) RunFile(f);
}

TEST(FuzzCorpus, Regressions) {
  for (const auto& f : FilesIn(DEPENGINE_FUZZ_REGRESSION_DIR)) RunFile(f);
}

TEST(FuzzCorpus, RandomPrograms) {
  const int n = Scaled(300, 20);
  const unsigned seed = static_cast<unsigned>(::testing::UnitTest::GetInstance()->random_seed());
  std::mt19937_64 rng(seed);
  for (int i = 0; i < n; ++i) {
    std::vector<std::uint8_t> bytes(1 + rng() % 600);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    const fuzz::RunResult r = fuzz::RunProgram(bytes.data(), bytes.size(), fuzz::OptionsFromEnv());
    ASSERT_TRUE(r.ok) << "random program " << i << " (gtest seed " << seed << "): " << r.error
                      << "\nprogram:\n" << fuzz::DescribeProgram(bytes.data(), bytes.size());
  }
}

}  // namespace
}  // namespace depengine::reliability
