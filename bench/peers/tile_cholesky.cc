#include "tile_cholesky.h"

#include <cblas.h>
#include <lapacke.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

extern "C" void openblas_set_num_threads(int num_threads);

namespace depengine::bench::peers {
namespace {

std::uint64_t SplitMix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Entry (r, c), r >= c, of W6's matrix.
double SpdEntry(std::uint64_t seed, int n, int r, int c) {
  const std::uint64_t h = SplitMix64(seed * 0x100000001B3ull ^ (static_cast<std::uint64_t>(r) * n + c));
  double v = static_cast<double>(h >> 11) * 0x1.0p-53 - 0.5;
  if (r == c) v += n;
  return v;
}

double SumOfSquares(const double* p, std::size_t count) {
  double s = 0;
  for (std::size_t i = 0; i < count; ++i) s += p[i] * p[i];
  return s;
}

}  // namespace

bool CholeskyParams::FromJob(const Job& job, CholeskyParams* out, std::string* why) {
  CholeskyParams p;
  p.n = static_cast<int>(job.Get("n", p.n));
  p.b = static_cast<int>(job.Get("b", p.b));
  p.seed = static_cast<std::uint64_t>(job.Get("seed", static_cast<long long>(p.seed)));
  if (p.n <= 0 || p.b <= 0 || p.n % p.b != 0) {
    *why = "W6: the tile size b must divide n";
    return false;
  }
  *out = p;
  return true;
}

void TileMatrix::Free::operator()(double* p) const { std::free(p); }

TileMatrix::TileMatrix(int n, int b) : n_(n), b_(b), t_(n / b) {
  const std::size_t bytes = (size() * sizeof(double) + 63) / 64 * 64;
  auto* p = static_cast<double*>(std::aligned_alloc(64, bytes));
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  data_.reset(p);
}

void FillSpd(TileMatrix& a, std::uint64_t seed) {
  const int b = a.b();
  for (int ti = 0; ti < a.tiles(); ++ti) {
    for (int tj = 0; tj <= ti; ++tj) {
      double* t = a.Tile(ti, tj);
      for (int c = 0; c < b; ++c) {
        for (int r = 0; r < b; ++r) {
          const int gr = ti * b + r;
          const int gc = tj * b + c;
          t[static_cast<std::size_t>(c) * b + r] =
              gr >= gc ? SpdEntry(seed, a.n(), gr, gc) : SpdEntry(seed, a.n(), gc, gr);
        }
      }
    }
  }
}

void CopyLowerTiles(const TileMatrix& from, TileMatrix& to) {
  const std::size_t tile = static_cast<std::size_t>(from.b()) * from.b();
  for (int i = 0; i < from.tiles(); ++i) {
    // Row i's tiles 0..i are contiguous.
    std::memcpy(to.Tile(i, 0), from.Tile(i, 0), (i + 1) * tile * sizeof(double));
  }
}

void ZeroUpperOfDiagonalTiles(TileMatrix& l) {
  const int b = l.b();
  for (int k = 0; k < l.tiles(); ++k) {
    double* t = l.Tile(k, k);
    for (int c = 1; c < b; ++c) {
      for (int r = 0; r < c; ++r) t[static_cast<std::size_t>(c) * b + r] = 0;
    }
  }
}

bool SameLowerTiles(const TileMatrix& a, const TileMatrix& b) {
  const std::size_t tile = static_cast<std::size_t>(a.b()) * a.b();
  for (int i = 0; i < a.tiles(); ++i) {
    if (std::memcmp(a.Tile(i, 0), b.Tile(i, 0), (i + 1) * tile * sizeof(double)) != 0) return false;
  }
  return true;
}

double CholeskyResidual(const TileMatrix& a, TileMatrix& l, int threads) {
  const int b = l.b();
  const std::size_t tile = static_cast<std::size_t>(b) * b;
  ZeroUpperOfDiagonalTiles(l);
  SetBlasThreads(threads);
  std::vector<double> diff(tile);
  double err = 0;
  double norm = 0;
  for (int i = 0; i < l.tiles(); ++i) {
    for (int j = 0; j <= i; ++j) {
      std::memcpy(diff.data(), a.Tile(i, j), tile * sizeof(double));
      // (L L^T)_ij = sum over k <= j of L_ik L_jk^T: rows i and j of tiles,
      // as b x (j+1)b panels.
      cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, b, b, (j + 1) * b, -1.0, l.Tile(i, 0), b,
                  l.Tile(j, 0), b, 1.0, diff.data(), b);
      const double weight = i == j ? 1.0 : 2.0;  // the upper tiles mirror the lower ones
      err += weight * SumOfSquares(diff.data(), tile);
      norm += weight * SumOfSquares(a.Tile(i, j), tile);
    }
  }
  if (!std::isfinite(err)) return std::numeric_limits<double>::quiet_NaN();
  return std::sqrt(err) / std::sqrt(norm);
}

void SetBlasThreads(int threads) { openblas_set_num_threads(threads); }

int TileTask::Reads(TileRef out[2]) const {
  switch (op) {
    case TileOp::kPotrf:
      return 0;
    case TileOp::kTrsm:
      out[0] = {k, k};
      return 1;
    case TileOp::kSyrk:
      out[0] = {i, k};
      return 1;
    case TileOp::kGemm:
      out[0] = {i, k};
      out[1] = {j, k};
      return 2;
  }
  return 0;
}

void KernelPotrf(double* akk, int b) {
  if (LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'L', b, akk, b) != 0) {
    akk[0] = std::numeric_limits<double>::quiet_NaN();  // the check reports it
  }
}

void KernelTrsm(const double* akk, double* aik, int b) {
  cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, b, b, 1.0, akk, b, aik, b);
}

void KernelSyrk(const double* aik, double* aii, int b) {
  cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, b, b, -1.0, aik, b, 1.0, aii, b);
}

void KernelGemm(const double* aik, const double* ajk, double* aij, int b) {
  cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, b, b, b, -1.0, aik, b, ajk, b, 1.0, aij, b);
}

void RunTileTask(TileMatrix& a, const TileTask& t) {
  const int b = a.b();
  switch (t.op) {
    case TileOp::kPotrf:
      KernelPotrf(a.Tile(t.k, t.k), b);
      break;
    case TileOp::kTrsm:
      KernelTrsm(a.Tile(t.k, t.k), a.Tile(t.i, t.k), b);
      break;
    case TileOp::kSyrk:
      KernelSyrk(a.Tile(t.i, t.k), a.Tile(t.i, t.i), b);
      break;
    case TileOp::kGemm:
      KernelGemm(a.Tile(t.i, t.k), a.Tile(t.j, t.k), a.Tile(t.i, t.j), b);
      break;
  }
}

CholeskyRunner::CholeskyRunner(const CholeskyParams& params)
    : params_(params), original_(params.n, params.b), reference_(params.n, params.b), work_(params.n, params.b) {
  FillSpd(original_, params.seed);
  CopyLowerTiles(original_, reference_);
  SetBlasThreads(1);
  ForEachTileTask(params.tiles(), [&](const TileTask& task) { RunTileTask(reference_, task); });
  reference_residual_ = CholeskyResidual(original_, reference_, DefaultThreads());
  SetBlasThreads(1);
}

RunResult CholeskyRunner::Run() {
  if (!(reference_residual_ < kCholeskyTolerance)) {
    return RunResult::Failed("W6: the serial factorization's residual is " + std::to_string(reference_residual_));
  }
  CopyLowerTiles(original_, work_);
  SetBlasThreads(1);
  const double seconds = Factor(work_);
  ZeroUpperOfDiagonalTiles(work_);
  const bool bitwise = SameLowerTiles(work_, reference_);
  double residual = reference_residual_;
  if (!bitwise) {
    residual = CholeskyResidual(original_, work_, DefaultThreads());
    SetBlasThreads(1);
  }
  if (!(residual < kCholeskyTolerance)) {
    return RunResult::Failed("W6: ||A - L L^T||_F / ||A||_F = " + std::to_string(residual));
  }
  RunResult r;
  r.ok = true;
  r.seconds = seconds;
  int tasks = 0;
  ForEachTileTask(params_.tiles(), [&](const TileTask&) { ++tasks; });
  r.ops = tasks;
  r.Add("gflops", params_.Flops() / seconds * 1e-9);
  r.Add("residual", residual);
  r.Add("bitwise", bitwise ? 1 : 0);
  return r;
}

namespace {

// LAPACKE_dpotrf on the whole matrix, multithreaded OpenBLAS.
class PotrfLimitRunner : public Runner {
 public:
  PotrfLimitRunner(const CholeskyParams& params, int threads)
      : params_(params), threads_(threads), tiled_(params.n, params.b), l_(params.n, params.b),
        full_(static_cast<std::size_t>(params.n) * params.n), work_(full_.size()) {
    FillSpd(tiled_, params.seed);
    const int n = params.n;
    const int b = params.b;
    for (int ti = 0; ti < tiled_.tiles(); ++ti) {
      for (int tj = 0; tj <= ti; ++tj) {
        const double* t = tiled_.Tile(ti, tj);
        for (int c = 0; c < b; ++c) {
          for (int r = 0; r < b; ++r) {
            const double v = t[static_cast<std::size_t>(c) * b + r];
            const std::size_t gr = ti * b + r;
            const std::size_t gc = tj * b + c;
            full_[gc * n + gr] = v;
            full_[gr * n + gc] = v;
          }
        }
      }
    }
  }

  RunResult Run() override {
    std::memcpy(work_.data(), full_.data(), full_.size() * sizeof(double));
    SetBlasThreads(threads_);
    Stopwatch watch;
    const int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', params_.n, work_.data(), params_.n);
    const double seconds = watch.Seconds();
    if (info != 0) return RunResult::Failed("LAPACKE_dpotrf: info = " + std::to_string(info));
    // Back into tiles for the same check as the tiled runs.
    const int n = params_.n;
    const int b = params_.b;
    for (int ti = 0; ti < l_.tiles(); ++ti) {
      for (int tj = 0; tj <= ti; ++tj) {
        double* t = l_.Tile(ti, tj);
        for (int c = 0; c < b; ++c) {
          for (int r = 0; r < b; ++r) {
            t[static_cast<std::size_t>(c) * b + r] =
                work_[static_cast<std::size_t>(tj * b + c) * n + (ti * b + r)];
          }
        }
      }
    }
    const double residual = CholeskyResidual(tiled_, l_, threads_);
    if (!(residual < kCholeskyTolerance)) {
      return RunResult::Failed("LAPACKE_dpotrf: residual " + std::to_string(residual));
    }
    RunResult r;
    r.ok = true;
    r.seconds = seconds;
    r.ops = 1;
    r.Add("gflops", params_.Flops() / seconds * 1e-9);
    r.Add("residual", residual);
    return r;
  }

 private:
  CholeskyParams params_;
  int threads_;
  TileMatrix tiled_;
  TileMatrix l_;
  std::vector<double> full_;
  std::vector<double> work_;
};

// One thread's DGEMM at the tile size, times the number of cores.
class DgemmLimitRunner : public Runner {
 public:
  DgemmLimitRunner(int b, int threads, double min_seconds)
      : b_(b),
        threads_(threads),
        min_seconds_(min_seconds),
        a_(b, b),
        bm_(b, b),
        c_(b, b),
        product_(static_cast<std::size_t>(b) * b) {
    FillSpd(a_, 1);
    FillSpd(bm_, 2);
    // A B^T by plain loops, not by the BLAS under test, for the check.
    const std::size_t n = static_cast<std::size_t>(b);
    for (std::size_t j = 0; j < n; ++j) {
      for (std::size_t i = 0; i < n; ++i) {
        double sum = 0;
        for (std::size_t k = 0; k < n; ++k) sum += a_.data()[k * n + i] * bm_.data()[k * n + j];
        product_[j * n + i] = sum;
      }
    }
  }

  RunResult Run() override {
    std::memset(c_.data(), 0, c_.size() * sizeof(double));
    SetBlasThreads(1);
    long long calls = 0;
    Stopwatch watch;
    double seconds = 0;
    do {
      for (int rep = 0; rep < 16; ++rep) {
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, b_, b_, b_, -1.0, a_.data(), b_,
                    bm_.data(), b_, 1.0, c_.data(), b_);
      }
      calls += 16;
      seconds = watch.Seconds();
    } while (seconds < min_seconds_);
    // Each call subtracted A B^T: C must be -calls A B^T. (Checking only
    // that C is finite let a DGEMM that computed nothing, or the wrong
    // product, report a limit.)
    double err = 0;
    double norm = 0;
    for (std::size_t i = 0; i < product_.size(); ++i) {
      const double want = -static_cast<double>(calls) * product_[i];
      err += (c_.data()[i] - want) * (c_.data()[i] - want);
      norm += want * want;
    }
    if (!(std::sqrt(err) <= 1e-8 * std::sqrt(norm))) {
      return RunResult::Failed("DGEMM: C differs from -calls A B^T (relative error " +
                               std::to_string(std::sqrt(err / norm)) + ")");
    }
    const double one_core = 2.0 * b_ * b_ * static_cast<double>(b_) * calls / seconds * 1e-9;
    RunResult r;
    r.ok = true;
    r.seconds = seconds;
    r.ops = static_cast<double>(calls);
    r.Add("gflops", one_core * threads_);
    r.Add("gflops_one_core", one_core);
    return r;
  }

 private:
  int b_, threads_;
  double min_seconds_;
  TileMatrix a_, bm_, c_;
  std::vector<double> product_;  // A B^T, column-major b x b
};

}  // namespace

std::unique_ptr<Runner> MakePotrfLimitRunner(const CholeskyParams& params, int threads) {
  return std::make_unique<PotrfLimitRunner>(params, threads);
}

std::unique_ptr<Runner> MakeDgemmLimitRunner(int b, int threads, double min_seconds) {
  return std::make_unique<DgemmLimitRunner>(b, threads, min_seconds);
}

}  // namespace depengine::bench::peers
