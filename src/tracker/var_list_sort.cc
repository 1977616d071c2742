#include "tracker/var_list_sort.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

namespace depengine::internal {
namespace {

[[noreturn, gnu::cold]] void ThrowVarInBothLists(const char* call) {
  throw std::invalid_argument(std::string(call) +
                              ": a var appears in both const_vars and mutable_vars");
}

}  // namespace

std::uint32_t SortAndMergeVarKeys(std::uintptr_t* keys, std::uint32_t n, const char* call) {
  constexpr std::uintptr_t kVarBits = ~std::uintptr_t{1};
  if (n == 2) {
    // The most common several-var push (one read, one write: W3's fan, an
    // operator's input and output), without the loops below.
    std::uintptr_t a = keys[0];
    std::uintptr_t b = keys[1];
    if (b < a) std::swap(a, b);
    keys[0] = a;
    keys[1] = b;
    if (((a ^ b) & kVarBits) != 0) return 2;
    if (a != b && (a & kVarBits) != 0) ThrowVarInBothLists(call);
    return 1;  // one var listed twice (in the same list, or null in both)
  }
  if (n == 3) {
    // Two reads and a write (W4), by three compare-exchanges; duplicates go
    // on to the merge below.
    std::uintptr_t a = keys[0];
    std::uintptr_t b = keys[1];
    std::uintptr_t c = keys[2];
    if (b < a) std::swap(a, b);
    if (c < b) std::swap(b, c);
    if (b < a) std::swap(a, b);
    keys[0] = a;
    keys[1] = b;
    keys[2] = c;
    if (((a ^ b) & kVarBits) != 0 && ((b ^ c) & kVarBits) != 0) return 3;
  } else if (n <= 16) {
    // Insertion sort: typical functions use a handful of vars.
    for (std::uint32_t k = 1; k < n; ++k) {
      const std::uintptr_t key = keys[k];
      std::uint32_t j = k;
      for (; j > 0 && key < keys[j - 1]; --j) keys[j] = keys[j - 1];
      keys[j] = key;
    }
  } else {
    // A long list is often nearly in order, one way or the other: vars made
    // in a row come from the pool in address order, or in reverse when they
    // were freed in a row before (W3's gather of 64, from its second run
    // on). Such a list is put in ascending order and finished by insertion,
    // in time linear in its length; any other long list goes to std::sort,
    // and so does one whose insertion moves keys far (a budget of moves
    // bounds that work).
    std::uint32_t descents = 0;
    for (std::uint32_t k = 1; k < n; ++k) descents += keys[k] < keys[k - 1] ? 1 : 0;
    if (descents > n - 1 - n / 8) {
      std::reverse(keys, keys + n);
    } else if (descents > n / 8) {
      std::sort(keys, keys + n);
    }
    std::uint64_t budget = std::uint64_t{8} * n;
    for (std::uint32_t k = 1; k < n; ++k) {
      const std::uintptr_t key = keys[k];
      std::uint32_t j = k;
      for (; j > 0 && key < keys[j - 1]; --j) keys[j] = keys[j - 1];
      keys[j] = key;
      if (k - j > budget) {
        std::sort(keys, keys + n);
        break;
      }
      budget -= k - j;
    }
  }
  std::uint32_t out = 0;
  for (std::uint32_t k = 0; k < n; ++k) {
    const std::uintptr_t var_bits = keys[k] & ~std::uintptr_t{1};
    if (out > 0 && (keys[out - 1] & ~std::uintptr_t{1}) == var_bits) {
      if (keys[out - 1] != keys[k] && var_bits != 0) ThrowVarInBothLists(call);
      continue;
    }
    keys[out++] = keys[k];
  }
  return out;
}

}  // namespace depengine::internal
