// AddressOrderedStock: free objects of an ObjectPool that no thread has
// asked for lately, handed out lowest address first.
//
// Why: a program that pushed far ahead once (a million functions behind
// busy vars) leaves that many blocks in the pool, freed in whatever order
// the workers finished them. Handed out again in that order, a later deep
// queue (a chain pushed far ahead of its worker) is a random walk through
// tens of MiB, and every function the worker takes is a miss that the
// hardware cannot foresee: W5 with one operator took 110-130 ns per
// function after W2 or W4 had run in the same process, against 50-60 on
// fresh memory (docs/performance.md, "The pool's order after a burst"). In
// address order the same queue is a stream that the prefetchers follow.
//
// Each region keeps one bit per object (set: the object is in the stock).
// Put finds the region by a binary search over the regions' bases and sets
// a bit; Take scans from the lowest region and word that may hold a set
// bit. What that costs a burst's objects, and what it saves a deep queue,
// is measured by depengine-micro's BM_PoolBurstFreeThenAllocate and
// BM_PoolWalkAfterBurst. Not thread-safe: the owning pool's stock mutex
// guards every call.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace depengine::internal {

// Objects lie kStride bytes apart from the start of regions of
// kRegionBytes bytes (constants, so that finding an object's index is a
// shift or a multiplication, not a division).
template <std::size_t kStride, std::size_t kRegionBytes>
class AddressOrderedStock {
 public:
  // Makes room for one more region, so that the next AddRegion cannot
  // throw. May throw std::bad_alloc; nothing changes then.
  void ReserveRegion() {
    regions_.reserve(regions_.size() + 1);
    bases_.reserve(regions_.size() + 1);
    if (spare_bits_.size() != kWords) spare_bits_.assign(kWords, 0);
  }

  // Registers a region of the pool; none of its objects is in the stock.
  // Throws only where ReserveRegion was not called first.
  void AddRegion(const void* base) {
    ReserveRegion();
    const auto* b = static_cast<const char*>(base);
    const auto at = std::upper_bound(regions_.begin(), regions_.end(), b,
                                     [](const char* p, const Region& r) { return p < r.base; });
    const auto index = static_cast<std::size_t>(at - regions_.begin());
    regions_.insert(at, Region{b, std::move(spare_bits_)});
    bases_.insert(bases_.begin() + static_cast<std::ptrdiff_t>(index), b);
    spare_bits_.clear();
    // Regions at or above the insertion moved up by one.
    if (index <= first_region_ && size_ > 0) ++first_region_;
  }

  // Adds a free object, which lies in a registered region and is not in
  // the stock already.
  void Put(const void* object) {
    const auto* p = static_cast<const char*>(object);
    const std::size_t region = FindRegion(p);
    Region& r = regions_[region];
    const std::size_t i = static_cast<std::size_t>(p - r.base) / kStride;
    const std::size_t word = i / 64;
    const std::uint64_t bit = std::uint64_t{1} << (i % 64);
    assert((r.bits[word] & bit) == 0);
    r.bits[word] |= bit;
    ++r.count;
    r.first_word = std::min(r.first_word, word);
    if (size_ == 0 || region < first_region_) first_region_ = region;
    ++size_;
  }

  // Moves up to n objects out of the stock into `out`, in ascending address
  // order, and returns how many.
  std::size_t Take(void** out, std::size_t n) {
    std::size_t got = 0;
    while (got < n && size_ > 0) {
      Region& r = regions_[first_region_];
      if (r.count == 0) {
        ++first_region_;
        continue;
      }
      std::size_t w = r.first_word;
      for (; w < kWords && got < n; ++w) {
        std::uint64_t bits = r.bits[w];
        while (bits != 0 && got < n) {
          const auto b = static_cast<std::size_t>(__builtin_ctzll(bits));
          bits &= bits - 1;
          out[got++] = const_cast<char*>(r.base + (w * 64 + b) * kStride);
          --r.count;
          --size_;
        }
        r.bits[w] = bits;
        if (bits != 0 || r.count == 0) break;  // n reached inside this word, or nothing left here
      }
      r.first_word = w;
    }
    return got;
  }

  std::size_t size() const { return size_; }

 private:
  static constexpr std::size_t kWords = (kRegionBytes / kStride + 63) / 64;

  struct Region {
    const char* base;
    std::vector<std::uint64_t> bits;  // bit i: object i is in the stock
    std::size_t count = 0;            // bits set
    std::size_t first_word = 0;       // no word below it has a bit set
  };

  // The last region whose base is at or below p: a binary search over the
  // bases alone (a few lines), without branches to mispredict, since a
  // burst's objects come back in no order.
  std::size_t FindRegion(const char* p) const {
    const char* const* first = bases_.data();
    std::size_t n = bases_.size();
    assert(n > 0 && first[0] <= p);
    while (n > 1) {
      const std::size_t half = n / 2;
      first = first[half] <= p ? first + half : first;
      n -= half;
    }
    return static_cast<std::size_t>(first - bases_.data());
  }

  std::vector<Region> regions_;            // sorted by base
  std::vector<const char*> bases_;         // regions_[i].base, for FindRegion
  std::vector<std::uint64_t> spare_bits_;  // the next region's bits (ReserveRegion)
  std::size_t size_ = 0;
  std::size_t first_region_ = 0;  // no region below it holds an object of the stock
};

}  // namespace depengine::internal
