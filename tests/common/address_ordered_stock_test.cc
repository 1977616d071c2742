// AddressOrderedStock on its own: whatever order objects are put in, and
// whatever order regions are registered in, Take hands them out lowest
// address first, exactly once each. The stock only does address
// arithmetic, so the regions here are plain buffers it never touches.
#include "common/address_ordered_stock.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

namespace depengine::internal {
namespace {

constexpr std::size_t kStride = 128;
constexpr std::size_t kRegionBytes = 300 * kStride;  // 300 objects: 5 words, the last partial
using Stock = AddressOrderedStock<kStride, kRegionBytes>;

// Regions at known addresses, kept alive for the test.
class Regions {
 public:
  explicit Regions(int count) {
    for (int i = 0; i < count; ++i) {
      buffers_.push_back(std::make_unique<char[]>(kRegionBytes));
    }
  }
  char* base(int i) const { return buffers_[static_cast<std::size_t>(i)].get(); }
  void* object(int region, std::size_t index) const { return base(region) + index * kStride; }
  int count() const { return static_cast<int>(buffers_.size()); }

 private:
  std::vector<std::unique_ptr<char[]>> buffers_;
};

std::vector<void*> TakeAll(Stock& stock, std::size_t batch) {
  std::vector<void*> taken;
  std::vector<void*> out(batch);
  for (;;) {
    const std::size_t n = stock.Take(out.data(), batch);
    if (n == 0) break;
    EXPECT_LE(n, batch);
    taken.insert(taken.end(), out.begin(), out.begin() + static_cast<std::ptrdiff_t>(n));
  }
  return taken;
}

TEST(AddressOrderedStockTest, TakeHandsOutEveryObjectOnceInAscendingOrder) {
  Regions regions(4);
  Stock stock;
  // Registered in an order unrelated to their addresses.
  for (int i : {2, 0, 3, 1}) stock.AddRegion(regions.base(i));
  std::vector<void*> all;
  for (int r = 0; r < regions.count(); ++r) {
    for (std::size_t i = 0; i < 300; ++i) {
      if (i % 3 != 1) all.push_back(regions.object(r, i));  // gaps inside words
    }
  }
  std::vector<void*> shuffled = all;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64(42));
  for (void* p : shuffled) stock.Put(p);
  EXPECT_EQ(stock.size(), all.size());

  // Batches of 7 stop inside words and regions; the order goes on across them.
  const std::vector<void*> taken = TakeAll(stock, 7);
  std::sort(all.begin(), all.end());
  EXPECT_EQ(taken, all);
  EXPECT_EQ(stock.size(), 0u);
}

TEST(AddressOrderedStockTest, AnObjectPutBelowWhatIsLeftComesNext) {
  Regions regions(2);
  const int low = regions.base(0) < regions.base(1) ? 0 : 1;
  const int high = 1 - low;
  Stock stock;
  stock.AddRegion(regions.base(0));
  stock.AddRegion(regions.base(1));
  for (std::size_t i = 100; i < 110; ++i) stock.Put(regions.object(high, i));
  void* out[3];
  ASSERT_EQ(stock.Take(out, 3), 3u);
  EXPECT_EQ(out[0], regions.object(high, 100));
  EXPECT_EQ(out[2], regions.object(high, 102));

  // Below the scan's position in the same word, in an earlier word, and in
  // a lower region: each is found before what was left.
  stock.Put(regions.object(high, 101));
  stock.Put(regions.object(high, 3));
  stock.Put(regions.object(low, 299));
  std::vector<void*> expected = {regions.object(low, 299), regions.object(high, 3),
                                 regions.object(high, 101)};
  for (std::size_t i = 103; i < 110; ++i) expected.push_back(regions.object(high, i));
  EXPECT_EQ(TakeAll(stock, 4), expected);
}

TEST(AddressOrderedStockTest, ARegionAddedLaterTakesItsPlaceByAddress) {
  Regions regions(3);
  std::vector<int> by_address = {0, 1, 2};
  std::sort(by_address.begin(), by_address.end(),
            [&](int a, int b) { return regions.base(a) < regions.base(b); });
  Stock stock;
  // The middle region first, with objects in it; then the others, one
  // below it and one above: the stock's positions shift under its objects.
  stock.AddRegion(regions.base(by_address[1]));
  stock.Put(regions.object(by_address[1], 7));
  stock.AddRegion(regions.base(by_address[0]));
  stock.Put(regions.object(by_address[1], 250));
  stock.AddRegion(regions.base(by_address[2]));
  stock.Put(regions.object(by_address[2], 0));
  stock.Put(regions.object(by_address[0], 299));
  const std::vector<void*> expected = {
      regions.object(by_address[0], 299), regions.object(by_address[1], 7),
      regions.object(by_address[1], 250), regions.object(by_address[2], 0)};
  EXPECT_EQ(TakeAll(stock, 1), expected);
}

TEST(AddressOrderedStockTest, AStrideThatIsNotAPowerOfTwo) {
  constexpr std::size_t kOdd = 192;
  constexpr std::size_t kBytes = 1000 * kOdd;
  AddressOrderedStock<kOdd, kBytes> stock;
  auto region = std::make_unique<char[]>(kBytes);
  stock.AddRegion(region.get());
  std::vector<void*> all;
  for (std::size_t i = 0; i < 1000; i += 3) all.push_back(region.get() + i * kOdd);
  for (auto it = all.rbegin(); it != all.rend(); ++it) stock.Put(*it);
  std::vector<void*> taken(all.size() + 1);
  ASSERT_EQ(stock.Take(taken.data(), taken.size()), all.size());
  taken.pop_back();
  EXPECT_EQ(taken, all);
}

}  // namespace
}  // namespace depengine::internal
