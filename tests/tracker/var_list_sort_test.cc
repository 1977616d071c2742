// SortAndMergeVarKeys on its own: a function's var list, as keys
// (`Var* | 1` for a write), sorted into lock order with duplicates merged.
// It has five paths (two keys, three keys, a short insertion sort, a long
// list that is nearly in order either way, and a long list in no order, with
// a budget that sends a costly insertion to std::sort), and each must give
// what a plain sort and merge gives. The engine's tests reach it only
// through pushes of a handful of vars.
#include "tracker/var_list_sort.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace depengine::internal {
namespace {

constexpr std::uintptr_t kWrite = 1;

// Keys for var number v (0 is the null handle), read or written: vars are
// at least 2-aligned, so bit 0 is free for the write flag.
std::uintptr_t Read(std::uintptr_t v) { return v * 64; }
std::uintptr_t Write(std::uintptr_t v) { return v * 64 | kWrite; }

// What the sort must give: keys in ascending order, one per var; a var
// listed both read and written (not null) is an error.
struct Expected {
  std::vector<std::uintptr_t> keys;
  bool in_both = false;
};
Expected Reference(std::vector<std::uintptr_t> keys) {
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  Expected e;
  for (std::size_t k = 0; k < keys.size(); ++k) {
    const std::uintptr_t var = keys[k] & ~kWrite;
    if (!e.keys.empty() && (e.keys.back() & ~kWrite) == var) {
      if (var != 0) e.in_both = true;
      continue;
    }
    e.keys.push_back(keys[k]);
  }
  return e;
}

// Runs the sort on `keys` and checks it against the reference; `what`
// names the case in a failure.
void ExpectSortedLikeReference(std::vector<std::uintptr_t> keys, const std::string& what) {
  const Expected e = Reference(keys);
  std::uint32_t count = 0;
  try {
    count = SortAndMergeVarKeys(keys.data(), static_cast<std::uint32_t>(keys.size()), "Test");
  } catch (const std::invalid_argument& error) {
    EXPECT_TRUE(e.in_both) << what << ": threw '" << error.what() << "' for a valid list";
    EXPECT_STREQ(error.what(), "Test: a var appears in both const_vars and mutable_vars") << what;
    return;
  }
  ASSERT_FALSE(e.in_both) << what << ": a var in both lists was not rejected";
  ASSERT_EQ(count, e.keys.size()) << what;
  EXPECT_EQ(std::vector<std::uintptr_t>(keys.begin(), keys.begin() + count), e.keys) << what;
}

TEST(VarListSortTest, TwoKeys) {
  ExpectSortedLikeReference({Read(2), Write(1)}, "in reverse");
  ExpectSortedLikeReference({Read(1), Write(2)}, "in order");
  ExpectSortedLikeReference({Write(3), Write(3)}, "one write listed twice");
  ExpectSortedLikeReference({Read(3), Read(3)}, "one read listed twice");
  ExpectSortedLikeReference({Read(3), Write(3)}, "read and written");
  ExpectSortedLikeReference({Read(0), Write(0)}, "null in both lists");
}

TEST(VarListSortTest, ThreeKeysInEveryOrder) {
  std::vector<std::uintptr_t> keys = {Read(1), Read(2), Write(3)};
  std::sort(keys.begin(), keys.end());
  do {
    ExpectSortedLikeReference(keys, "distinct vars");
  } while (std::next_permutation(keys.begin(), keys.end()));
  keys = {Read(1), Read(1), Write(2)};
  std::sort(keys.begin(), keys.end());
  do {
    ExpectSortedLikeReference(keys, "a read listed twice");
  } while (std::next_permutation(keys.begin(), keys.end()));
  keys = {Read(1), Read(2), Write(2)};
  std::sort(keys.begin(), keys.end());
  do {
    ExpectSortedLikeReference(keys, "read and written");
  } while (std::next_permutation(keys.begin(), keys.end()));
}

// Lists of every length through all the paths, from vars drawn so that
// duplicates (and now and then a var in both lists) occur.
TEST(VarListSortTest, RandomListsMatchAPlainSortAndMerge) {
  std::mt19937_64 rng(20261123);
  for (int round = 0; round < 4000; ++round) {
    const std::size_t n = 1 + rng() % 300;
    const std::uintptr_t vars = 1 + rng() % (2 * n);
    const bool with_writes_of_reads = rng() % 4 == 0;
    std::vector<std::uintptr_t> keys;
    for (std::size_t k = 0; k < n; ++k) {
      const std::uintptr_t v = 1 + rng() % vars;
      // Reads of odd vars, writes of even ones: no var in both lists, unless
      // this round mixes them.
      const bool write = with_writes_of_reads ? rng() % 2 == 0 : v % 2 == 0;
      keys.push_back(write ? Write(v) : Read(v));
    }
    ExpectSortedLikeReference(keys, "round " + std::to_string(round) + ", " + std::to_string(n) +
                                        " keys over " + std::to_string(vars) + " vars");
  }
}

// Long lists that are nearly in order, one way or the other (vars made in a
// row), which the sort finishes by insertion, and lists that insertion
// would move far, which must still come out sorted.
TEST(VarListSortTest, LongListsNearlyInOrderEitherWay) {
  std::mt19937_64 rng(7);
  for (std::size_t n : {17u, 64u, 65u, 200u, 1000u}) {
    std::vector<std::uintptr_t> ascending;
    for (std::size_t k = 0; k < n; ++k)
      ascending.push_back(k % 3 == 0 ? Write(k + 1) : Read(k + 1));
    ExpectSortedLikeReference(ascending, "ascending, " + std::to_string(n));
    std::vector<std::uintptr_t> descending(ascending.rbegin(), ascending.rend());
    ExpectSortedLikeReference(descending, "descending, " + std::to_string(n));
    for (int swaps : {1, 3, static_cast<int>(n / 10)}) {
      std::vector<std::uintptr_t> near = ascending;
      for (int s = 0; s < swaps; ++s) std::swap(near[rng() % n], near[rng() % n]);
      ExpectSortedLikeReference(near, "ascending with swaps, " + std::to_string(n));
      std::vector<std::uintptr_t> near_down(near.rbegin(), near.rend());
      ExpectSortedLikeReference(near_down, "descending with swaps, " + std::to_string(n));
    }
    // In order but for its smallest key at the end: an insertion that moves
    // every key, past the budget.
    std::vector<std::uintptr_t> rotated = ascending;
    std::rotate(rotated.begin(), rotated.begin() + 1, rotated.end());
    ExpectSortedLikeReference(rotated, "rotated, " + std::to_string(n));
  }
}

}  // namespace
}  // namespace depengine::internal
