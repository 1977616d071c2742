// NDArray: values, ordering through the engine, views, failures, storage
// freed only after the last function that uses it, reproducible sampling.
#include "depengine/ndarray.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "depengine/resource.h"
#include "ops_fixture.h"

namespace depengine::test {
namespace {

using ::testing::HasSubstr;

class NDArrayTest : public EngineTest {
 protected:
  NDArray Make(std::vector<float> values, TShape shape) {
    NDArray a(shape, Context::CPU(), engine());
    a.SyncCopyFromCPU(values.data(), values.size());
    return a;
  }
};

TEST(TShapeTest, SizeToStringAndParse) {
  TShape s{2, 3, 4};
  EXPECT_EQ(s.ndim(), 3);
  EXPECT_EQ(s.Size(), 24);
  EXPECT_EQ(s.ToString(), "(2,3,4)");
  EXPECT_EQ(s.FlatTo2D(), (TShape{6, 4}));
  EXPECT_EQ(TShape::Parse("(2,3,4)"), s);
  EXPECT_EQ(TShape::Parse("[2, 3, 4]"), s);
  EXPECT_EQ(TShape::Parse("2,3,4"), s);
  EXPECT_EQ(TShape::Parse("(5,)"), TShape{5});
  EXPECT_EQ(TShape{5}.ToString(), "(5,)");
  EXPECT_FALSE(TShape().known());
  EXPECT_EQ(TShape().Size(), 0);
  EXPECT_THROW(TShape::Parse("(2,x)"), std::invalid_argument);
  EXPECT_THROW(TShape::Parse("(2,3"), std::invalid_argument);
  EXPECT_THROW(TShape::Parse("(-1)"), std::invalid_argument);
}

// Expects f() to raise std::invalid_argument whose message names `shape`.
template <class F>
void ExpectRejected(F&& f, const std::string& shape) {
  try {
    f();
    ADD_FAILURE() << "expected std::invalid_argument for " << shape;
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr(shape));
  }
}

// Negative dimensions and element counts that overflow int64 (or whose byte
// size would) are rejected, naming the shape, not wrapped.
TEST(TShapeTest, SizeRejectsNegativeDimsAndOverflow) {
  constexpr TShape::index_t kBig = (TShape::index_t{1} << 62) + 1;
  ExpectRejected([&] { return TShape{kBig, 4}.Size(); }, "(4611686018427387905,4)");
  ExpectRejected([&] { return TShape{4, kBig}.ProdShape(0, 2); }, "(4,4611686018427387905)");
  ExpectRejected([&] { return TShape{2, kBig, 4}.FlatTo2D(); }, "(2,4611686018427387905,4)");
  ExpectRejected([&] { return TShape{-2, -3}.Size(); }, "(-2,-3)");
  ExpectRejected([&] { return TShape{0, -3}.Size(); }, "(0,-3)");
  ExpectRejected([&] { return TShape{TShape::kMaxSize + 1}.Size(); },
                 "(" + std::to_string(TShape::kMaxSize + 1) + ",)");
  EXPECT_EQ(TShape{TShape::kMaxSize}.Size(), TShape::kMaxSize);
  EXPECT_EQ((TShape{0, kBig, kBig}.Size()), 0);  // a zero dimension: no overflow
  EXPECT_EQ((TShape{kBig, 0}.ProdShape(1, 2)), 0);
}

TEST_P(NDArrayTest, FillCopyAndReadBack) {
  NDArray a(TShape{3, 4}, Context::CPU(), engine());
  EXPECT_EQ(a.Size(), 12u);
  EXPECT_EQ(a.dtype(), kFloat32);
  a = 2.5;
  EXPECT_THAT(a.ToVector(), ::testing::Each(2.5f));
  NDArray b = a.Copy();
  a = 1.0;
  EXPECT_THAT(b.ToVector(), ::testing::Each(2.5f));
  EXPECT_THAT(a.ToVector(), ::testing::Each(1.0f));
  EXPECT_FALSE(a.SharesStorageWith(b));
  NDArray c = a;  // reference semantics
  EXPECT_TRUE(c.SharesStorageWith(a));
  EXPECT_EQ(c.var(), a.var());
}

TEST_P(NDArrayTest, ArithmeticMatchesHost) {
  std::vector<float> x{1, 2, 3, 4, 5, 6}, y{6, 5, 4, 3, 2, 1};
  NDArray a = Make(x, {2, 3}), b = Make(y, {2, 3});
  auto expect = [&](const NDArray& r, auto f) {
    const std::vector<float> got = r.ToVector();
    for (std::size_t i = 0; i < x.size(); ++i) EXPECT_FLOAT_EQ(got[i], f(x[i], y[i])) << i;
  };
  expect(a + b, [](float p, float q) { return p + q; });
  expect(a - b, [](float p, float q) { return p - q; });
  expect(a * b, [](float p, float q) { return p * q; });
  expect(a / b, [](float p, float q) { return p / q; });
  expect(a + 2.0, [](float p, float) { return p + 2; });
  expect(a - 2.0, [](float p, float) { return p - 2; });
  expect(3.0 - a, [](float p, float) { return 3 - p; });
  expect(a * 0.5, [](float p, float) { return p * 0.5f; });
  expect(2.0 * a, [](float p, float) { return 2 * p; });
  expect(a / 4.0, [](float p, float) { return p / 4; });
  expect(1.0 / a, [](float p, float) { return 1 / p; });
  NDArray c = a.Copy();
  c += b;
  c *= 2.0;
  c -= b;
  c /= b;
  expect(c, [](float p, float q) { return ((p + q) * 2 - q) / q; });
}

TEST_P(NDArrayTest, Float64) {
  NDArray a(TShape{4}, Context::CPU(), engine(), kFloat64);
  const std::vector<double> v{1e-12, 2, 3, 4};
  a.SyncCopyFromCPU(v.data(), v.size());
  NDArray b = a * 3.0 + a;
  const std::vector<double> got = b.ToVector<double>();
  for (std::size_t i = 0; i < v.size(); ++i) EXPECT_DOUBLE_EQ(got[i], 4 * v[i]);
  std::vector<float> wrong(4);
  EXPECT_THROW(a.SyncCopyToCPU(wrong.data(), wrong.size()), std::invalid_argument);
}

// A random program on a few arrays, run through the engine, gives what the
// same program gives run serially on the host.
TEST_P(NDArrayTest, RandomProgramMatchesSerial) {
  constexpr int kArrays = 5, kSteps = 400, kN = 64;
  const unsigned seed = 1234;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  std::vector<std::vector<double>> host(kArrays, std::vector<double>(kN));
  std::vector<NDArray> dev;
  // Every step maps values in [-1, 1] into [-1, 1], so nothing overflows.
  for (int i = 0; i < kArrays; ++i) {
    for (int j = 0; j < kN; ++j) host[i][j] = ((i * kN + j) % 7) / 7.0;
    dev.emplace_back(TShape{kN}, Context::CPU(), engine(), kFloat64);
    dev.back().SyncCopyFromCPU(host[i].data(), host[i].size());
  }
  for (int s = 0; s < kSteps; ++s) {
    const int dst = static_cast<int>(rng() % kArrays);
    const int a = static_cast<int>(rng() % kArrays);
    const int b = static_cast<int>(rng() % kArrays);
    const int op = static_cast<int>(rng() % 5);
    switch (op) {
      case 0:
        dev[dst] += dev[a];
        dev[dst] *= 0.5;
        for (int j = 0; j < kN; ++j) host[dst][j] = (host[dst][j] + host[a][j]) * 0.5;
        break;
      case 1: {
        NDArray t = (dev[a] - dev[b]) * 0.5;
        CopyFromTo(t, &dev[dst]);
        for (int j = 0; j < kN; ++j) host[dst][j] = (host[a][j] - host[b][j]) * 0.5;
        break;
      }
      case 2:
        dev[dst] *= -0.9;
        for (int j = 0; j < kN; ++j) host[dst][j] *= -0.9;
        break;
      case 3: {
        NDArray t = dev[a] * dev[b];
        CopyFromTo(t, &dev[dst]);
        for (int j = 0; j < kN; ++j) host[dst][j] = host[a][j] * host[b][j];
        break;
      }
      case 4: {
        NDArray t = 1.0 / (dev[a] + 3.0);
        CopyFromTo(t, &dev[dst]);
        for (int j = 0; j < kN; ++j) host[dst][j] = 1.0 / (host[a][j] + 3.0);
        break;
      }
    }
  }
  for (int i = 0; i < kArrays; ++i) {
    const std::vector<double> got = dev[i].ToVector<double>();
    for (int j = 0; j < kN; ++j)
      ASSERT_DOUBLE_EQ(got[j], host[i][j]) << "array " << i << " elem " << j;
  }
}

TEST_P(NDArrayTest, SliceAndReshapeShareStorage) {
  NDArray a = Make({0, 1, 2, 3, 4, 5, 6, 7}, {4, 2});
  NDArray rows = a.Slice(1, 3);
  EXPECT_EQ(rows.shape(), (TShape{2, 2}));
  EXPECT_TRUE(rows.SharesStorageWith(a));
  EXPECT_THAT(rows.ToVector(), ::testing::ElementsAre(2, 3, 4, 5));
  rows *= 10.0;
  EXPECT_THAT(a.ToVector(), ::testing::ElementsAre(0, 1, 20, 30, 40, 50, 6, 7));
  NDArray flat = a.Reshape({8});
  flat += 1.0;
  EXPECT_THAT(a.ToVector(), ::testing::ElementsAre(1, 2, 21, 31, 41, 51, 7, 8));
  NDArray dst(TShape{2, 2}, Context::CPU(), engine());
  CopyFromTo(a.Slice(2, 4), &dst);
  EXPECT_THAT(dst.ToVector(), ::testing::ElementsAre(41, 51, 7, 8));
  EXPECT_THROW(a.Reshape({3}), std::invalid_argument);
  EXPECT_THROW(a.Slice(3, 5), std::invalid_argument);
}

TEST_P(NDArrayTest, ErrorsNameShapes) {
  NDArray a(TShape{2, 3}, Context::CPU(), engine()), b(TShape{3, 2}, Context::CPU(), engine());
  try {
    NDArray c = a + b;
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& e) {
    EXPECT_THAT(e.what(), HasSubstr("(2,3)"));
    EXPECT_THAT(e.what(), HasSubstr("(3,2)"));
  }
  EXPECT_THROW(NDArray(TShape{2}, Context::GPU(0), engine()), std::invalid_argument);
  EXPECT_THROW(NDArray(TShape(), Context::CPU(), engine()), std::invalid_argument);
}

// In-place arithmetic between overlapping views of one storage gives the
// serial result, as if the right-hand side were read whole first (before,
// a[1:4] += a[0:3] computed a running sum).
TEST_P(NDArrayTest, InPlaceArithmeticOnOverlappingViewsIsSerial) {
  NDArray a = Make({1, 2, 3, 4}, {4});
  NDArray hi = a.Slice(1, 4);
  hi += a.Slice(0, 3);
  EXPECT_THAT(a.ToVector(), ::testing::ElementsAre(1, 3, 5, 7));
  hi -= a.Slice(0, 3);  // {1, 3-1, 5-3, 7-5}
  EXPECT_THAT(a.ToVector(), ::testing::ElementsAre(1, 2, 2, 2));
  NDArray lo = a.Slice(0, 3);
  lo += a.Slice(1, 4);  // the other direction: {1+2, 2+2, 2+2, 2}
  EXPECT_THAT(a.ToVector(), ::testing::ElementsAre(3, 4, 4, 2));

  NDArray b = Make({2, 2, 3, 3, 4, 4}, {3, 2});
  NDArray rows = b.Slice(1, 3);
  rows *= b.Slice(0, 2);
  EXPECT_THAT(b.ToVector(), ::testing::ElementsAre(2, 2, 6, 6, 12, 12));
  rows /= b.Slice(0, 2);  // {2, 2, 6/2, 6/2, 12/6, 12/6}
  EXPECT_THAT(b.ToVector(), ::testing::ElementsAre(2, 2, 3, 3, 2, 2));

  // A view over the same range (or the array itself) needs no copy and
  // gives the elementwise result.
  NDArray c = Make({1, 2, 3}, {3});
  c += c;
  c *= c.Reshape({3});
  EXPECT_THAT(c.ToVector(), ::testing::ElementsAre(4, 16, 36));
}

// A shape whose element count (or byte size) overflows, or with negative
// dimensions, is rejected by the constructor and Reshape with the shape in
// the message; before, (2^62+1, 4) wrapped to 4 elements and Slice(100, 101)
// wrote past the storage, and (2^61,) float64 allocated 64 bytes.
TEST_P(NDArrayTest, RejectsNegativeAndOverflowingShapes) {
  constexpr TShape::index_t kBig = (TShape::index_t{1} << 62) + 1;
  ExpectRejected(
      [&] {
        return NDArray(TShape{kBig, 4}, Context::CPU(), engine());
      },
      "(4611686018427387905,4)");
  ExpectRejected(
      [&] { return NDArray(TShape{TShape::index_t{1} << 61}, Context::CPU(), engine(), kFloat64); },
      "(2305843009213693952,)");
  ExpectRejected([&] { return NDArray(TShape{-2, -3}, Context::CPU(), engine()); }, "(-2,-3)");
  NDArray b(TShape{6}, Context::CPU(), engine());
  ExpectRejected([&] { return b.Reshape(TShape{-1, -6}); }, "(-1,-6)");
  ExpectRejected([&] { return b.Reshape(TShape{-6}); }, "(-6,)");
  ExpectRejected([&] { return b.Reshape(TShape{}); }, "()");
  ExpectRejected([&] { return b.data().Reshape(TShape{-2, -3}); }, "(-2,-3)");
  EXPECT_EQ(b.Reshape(TShape{2, 3}).shape(), (TShape{2, 3}));
}

// Contexts the engine refuses are errors, never a termination. Before, an
// array on CPU(-1) or CPU(64), or a ResourceManager asked for such a
// device, was made without complaint, and its destructor's DeleteVariable
// raised std::invalid_argument out of a destructor: std::terminate.
TEST_P(NDArrayTest, ContextsTheEngineRefusesAreErrorsNotTerminations) {
  auto rejects = [](auto f, const std::string& what) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr(what));
      return;
    }
    ADD_FAILURE() << "expected std::invalid_argument: " << what;
  };
  rejects([&] { NDArray(TShape{4}, Context::CPU(-1), engine()); }, "dev_id -1");
  rejects(
      [&] {
        NDArray(TShape{4}, Context{static_cast<DeviceType>(9), 0}, engine());
      },
      "DeviceType 9");
  // The engines support CPU dev_ids 0 to 63 (kMaxDevicesPerType): an array
  // beyond them is refused when it is made, not at its first push.
  rejects([&] { NDArray(TShape{4}, Context::CPU(64), engine()); }, "dev_id 64");
  rejects([&] { NDArray(TShape{4}, Context::CPUPinned(kMaxDevicesPerType), engine()); },
          "out of range [0, 64)");
  for (Context ctx : {Context::CPU(-1), Context::CPU(64), Context::CPUPinned(-3)}) {
    ResourceManager rm(engine());
    rejects([&] { rm.Request(ctx, ResourceRequest::kRandom); }, "ResourceManager::Request");
    rejects([&] { rm.Request(ctx, ResourceRequest::kTempSpace); }, "ResourceManager::Request");
    rm.SeedRandom(3);
  }  // each manager is destroyed with only valid devices
  NDArray ok(TShape{4}, Context::CPUPinned(1), engine());
  SampleUniform(0, 1, &ok, resources());
  EXPECT_THAT(ok.ToVector(),
              ::testing::Each(::testing::AllOf(::testing::Ge(0.f), ::testing::Lt(1.f))));
}

// ToVector / SyncCopyToCPU on one thread while another thread pushes
// writes on the same storage: each copy sees the array between two writes,
// never during one. Before, the copy was a memcpy on the caller's thread
// after WaitToRead, so a write pushed by the other thread after the wait ran
// during it (ThreadSanitizer: data race; torn copies whose elements
// differ). After the fix the copy is an engine function, ordered.
TEST_P(NDArrayTest, CopyToHostIsOrderedAgainstOtherThreadsWrites) {
  NDArray a(TShape{1 << 17}, Context::CPU(), engine());
  a = 0.0;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    NDArray mine = a;  // another NDArray object on the same storage
    for (int i = 0; i < 400; ++i) {
      mine += 1.0;
      mine.WaitToWrite();  // one write at a time, so that copies come between them
    }
    done.store(true);
  });
  int torn = 0, copies = 0;
  while (!done.load() || copies < 10) {
    const std::vector<float> v = a.ToVector();
    ++copies;
    for (float x : v) {
      if (x != v[0]) {
        ++torn;
        break;
      }
    }
  }
  writer.join();
  EXPECT_EQ(torn, 0) << "of " << copies << " copies";
  EXPECT_THAT(a.ToVector(), ::testing::Each(400.0f));
}

// A function that fails poisons the array it writes: WaitToRead rethrows.
TEST_P(NDArrayTest, WaitToReadRethrowsFailure) {
  NDArray a(TShape{4}, Context::CPU(), engine());
  a = 1.0;
  engine()->PushSync([](RunContext) { throw std::runtime_error("boom"); }, Context::CPU(), {},
                     {a.var()});
  EXPECT_THROW(a.WaitToRead(), std::runtime_error);
  a = 3.0;  // the failure was delivered and cleared
  EXPECT_THAT(a.ToVector(), ::testing::Each(3.0f));
}

// Seed 003's memory problem: dropping the last reference while functions
// on the array are still pending must not free the storage under them.
// Under AddressSanitizer an early free is a use-after-free report.
TEST_P(NDArrayTest, StorageOutlivesPendingFunctions) {
  NDArray result(TShape{1024}, Context::CPU(), engine());
  result = 0.0;
  std::atomic<bool> release{false};
  {
    NDArray a(TShape{1024}, Context::CPU(), engine());
    a = 1.0;
    const TBlob blob = a.data();
    // Holds `a` busy until released (async: does not block a worker).
    engine()->PushAsync(
        [&release, blob](RunContext, CallbackOnComplete done) {
          std::thread([&release, blob, done] {
            while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
            float* p = blob.dptr<float>();
            for (std::size_t i = 0; i < blob.Size(); ++i) p[i] += 1;
            done();
          }).detach();
        },
        Context::CPU(), {}, {a.var()});
    result += a;  // reads a after the slow write
  }               // the last reference to `a` goes away here
  release.store(true);
  EXPECT_THAT(result.ToVector(), ::testing::Each(2.0f));
}

// Bounds or deviations the distributions do not accept are errors, and
// nothing is drawn. Before, SampleUniform(1, 0) drew from (0, 1], (0, inf)
// filled the array with inf and a negative or NaN deviation was used as is.
TEST_P(NDArrayTest, SamplingRejectsBadParameters) {
  NDArray a(TShape{8}, Context::CPU(), engine());
  a = 5.0;
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  for (const auto& [lo, hi] : std::vector<std::pair<double, double>>{
           {1, 0}, {2, 2}, {0, inf}, {nan, 1}, {0, 1e39}, {-3e38, 3e38}}) {
    SCOPED_TRACE(std::to_string(lo) + ", " + std::to_string(hi));
    EXPECT_THROW(SampleUniform(lo, hi, &a, resources()), std::invalid_argument);
  }
  for (const auto& [mean, sd] :
       std::vector<std::pair<double, double>>{{0, -1}, {0, 0}, {0, nan}, {inf, 1}, {0, 1e39}}) {
    SCOPED_TRACE(std::to_string(mean) + ", " + std::to_string(sd));
    EXPECT_THROW(SampleGaussian(mean, sd, &a, resources()), std::invalid_argument);
  }
  EXPECT_THAT(a.ToVector(), ::testing::Each(5.0f));
  NDArray d(TShape{8}, Context::CPU(), engine(), kFloat64);
  SampleUniform(-3e38, 3e38, &d, resources());  // representable in float64
  SampleGaussian(0, 1e39, &d, resources());
  d.WaitToRead();
}

TEST_P(NDArrayTest, SamplingIsReproducibleFromASeed) {
  auto draw = [&](std::uint32_t seed) {
    resources()->SeedRandom(seed);
    std::vector<NDArray> arrays;
    for (int i = 0; i < 8; ++i) {
      arrays.emplace_back(TShape{16}, Context::CPU(), engine());
      if (i % 2) {
        SampleUniform(-1, 1, &arrays.back(), resources());
      } else {
        SampleGaussian(0, 1, &arrays.back(), resources());
      }
    }
    std::vector<float> all;
    for (auto& a : arrays) {
      auto v = a.ToVector();
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
  const std::vector<float> a = draw(42), b = draw(42), c = draw(43);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (std::size_t i = 16; i < 32; ++i) {
    EXPECT_GE(a[i], -1.0f);
    EXPECT_LT(a[i], 1.0f);
  }
}

DEPENGINE_INSTANTIATE_ENGINE_TEST(NDArrayTest);

// Draws from threads and engines differ, but one seed gives one sequence
// for every engine kind (draws are serialized in push order).
TEST(SamplingAcrossEngines, SameSeedSameNumbers) {
  std::vector<std::vector<float>> results;
  for (EngineKind kind : {EngineKind::kNaive, EngineKind::kPooled, EngineKind::kPerDevice}) {
    EngineOptions o;
    o.kind = kind;
    o.cpu_worker_threads = 2;
    auto engine = CreateEngine(o);
    {
      ResourceManager rm(engine.get(), {.seed = 99});
      std::vector<NDArray> arrays;
      for (int i = 0; i < 20; ++i) {
        arrays.emplace_back(TShape{8}, Context::CPU(), engine.get());
        SampleUniform(0, 1, &arrays.back(), &rm);
      }
      std::vector<float> all;
      for (auto& a : arrays) {
        auto v = a.ToVector();
        all.insert(all.end(), v.begin(), v.end());
      }
      results.push_back(all);
    }
    engine->WaitForAll();
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

}  // namespace
}  // namespace depengine::test
