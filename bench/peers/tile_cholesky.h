// W6 of ../shared/WORKLOADS.md, independent of any runtime: the tiled SPD
// matrix, the four tile kernels (single-threaded OpenBLAS), the task program
// of right-looking tiled Cholesky, the check, and the two limits printed
// beside it (multithreaded LAPACKE_dpotrf, cores x single-core DGEMM).
//
// Every runtime's W6 walks ForEachTileTask() and runs RunTileTask() for each
// task, with the tiles it names as its vars, so that all of them factor the
// same matrix with the same kernels in the same program order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "peer_server.h"

namespace depengine::bench::peers {

// W6's sizes: an n x n matrix in tiles of b x b (b divides n).
struct CholeskyParams {
  int n = 4096;
  int b = 128;
  std::uint64_t seed = 6;

  int tiles() const { return n / b; }
  // The figure's numerator: n^3 / 3 floating-point operations.
  double Flops() const { return static_cast<double>(n) * n * n / 3.0; }
  // Reads n and b from `job`; returns false (with *why) if b does not divide n.
  static bool FromJob(const Job& job, CholeskyParams* out, std::string* why);
};

// ||A - L L^T||_F / ||A||_F must stay below this.
inline constexpr double kCholeskyTolerance = 1e-10;

// An n x n matrix as (n/b)^2 tiles, each b x b column-major with leading
// dimension b, stored row of tiles by row of tiles: tiles (i, 0), (i, 1), ...
// are contiguous, so that row i of tiles is also one b x n column-major
// panel with leading dimension b (the check multiplies whole panels). Only
// the lower tiles (i >= j) are used. Storage is 64-byte aligned.
class TileMatrix {
 public:
  TileMatrix(int n, int b);
  int n() const { return n_; }
  int b() const { return b_; }
  int tiles() const { return t_; }
  double* Tile(int i, int j) { return data_.get() + TileOffset(i, j); }
  const double* Tile(int i, int j) const { return data_.get() + TileOffset(i, j); }
  std::size_t size() const { return static_cast<std::size_t>(n_) * n_; }
  double* data() { return data_.get(); }
  const double* data() const { return data_.get(); }

 private:
  std::size_t TileOffset(int i, int j) const {
    return (static_cast<std::size_t>(i) * t_ + j) * static_cast<std::size_t>(b_) * b_;
  }
  struct Free {
    void operator()(double* p) const;
  };
  int n_, b_, t_;
  std::unique_ptr<double[], Free> data_;
};

// Fills the lower tiles of `a` with W6's SPD matrix for `seed`: symmetric
// entries uniform in [-0.5, 0.5), plus n on the diagonal. Diagonal tiles are
// stored whole (both triangles).
void FillSpd(TileMatrix& a, std::uint64_t seed);

// Copies the lower tiles of `from` into `to` (same n and b).
void CopyLowerTiles(const TileMatrix& from, TileMatrix& to);

// ||A - L L^T||_F / ||A||_F where L is the lower triangle of the factored
// tiles `l` (their diagonal tiles' strictly upper triangles are zeroed
// here), with `threads` OpenBLAS threads. NaN if the factorization failed.
// OpenBLAS's threads spin a little after a call; depengine-peers stops the
// process (SIGSTOP) right after each run, so that spinning never overlaps
// another timed run.
double CholeskyResidual(const TileMatrix& a, TileMatrix& l, int threads);

// OpenBLAS's own thread count (openblas_set_num_threads).
void SetBlasThreads(int threads);

// A tile by its (row, column) of tiles.
struct TileRef {
  int i, j;
};

// One task of tiled Cholesky: k is the step; (i, j) the tile it writes.
enum class TileOp { kPotrf, kTrsm, kSyrk, kGemm };
struct TileTask {
  TileOp op;
  int k, i, j;
  // The tiles the task reads, into `out`; returns how many (0..2).
  int Reads(TileRef out[2]) const;
  TileRef Writes() const { return {i, j}; }
  // The task's scheduling priority, the same for every runtime that has
  // priorities (higher first): the critical path of right-looking Cholesky
  // runs through each step's panel (POTRF, then the TRSMs) and through the
  // updates of the next step's panel column (j == k + 1), so those get
  // tiles - k, earlier steps first, and the rest of the trailing update 0.
  // Without it a FIFO runs a step's many GEMMs before the next panel, and
  // the workers starve at the end of each step.
  int Priority(int tiles) const {
    const bool critical = op == TileOp::kPotrf || op == TileOp::kTrsm || j == k + 1;
    return critical ? tiles - k : 0;
  }
};

// The largest TileTask::Priority() for `tiles` tiles per side.
inline int MaxTilePriority(int tiles) { return tiles; }

// Right-looking tiled Cholesky (lower), in program order, for `tiles` tiles
// per side:
//   POTRF(k):     A_kk = chol(A_kk)                 reads -,           writes A_kk
//   TRSM(k, i):   A_ik = A_ik A_kk^-T               reads A_kk,        writes A_ik
//   SYRK(k, i):   A_ii -= A_ik A_ik^T               reads A_ik,        writes A_ii
//   GEMM(k, i, j): A_ij -= A_ik A_jk^T  (j < i)     reads A_ik, A_jk,  writes A_ij
template <class Visit>
void ForEachTileTask(int tiles, Visit&& visit) {
  for (int k = 0; k < tiles; ++k) {
    visit(TileTask{TileOp::kPotrf, k, k, k});
    for (int i = k + 1; i < tiles; ++i) visit(TileTask{TileOp::kTrsm, k, i, k});
    for (int i = k + 1; i < tiles; ++i) {
      visit(TileTask{TileOp::kSyrk, k, i, i});
      for (int j = k + 1; j < i; ++j) visit(TileTask{TileOp::kGemm, k, i, j});
    }
  }
}

// Runs one task's kernel on `a`'s tiles (single-threaded BLAS per call once
// SetBlasThreads(1) was called). A failed POTRF leaves NaN for the check.
void RunTileTask(TileMatrix& a, const TileTask& task);

// The kernels on b x b column-major tiles (leading dimension b), for
// runtimes that hand a task its tiles' pointers (StarPU).
void KernelPotrf(double* akk, int b);                                  // A_kk = chol(A_kk)
void KernelTrsm(const double* akk, double* aik, int b);                // A_ik = A_ik A_kk^-T
void KernelSyrk(const double* aik, double* aii, int b);                // A_ii -= A_ik A_ik^T
void KernelGemm(const double* aik, const double* ajk, double* aij, int b);  // A_ij -= A_ik A_jk^T

// W6 on one runtime. Run() copies the matrix (untimed), sets OpenBLAS to one
// thread, calls Factor() (which times its own region), checks the result,
// and reports GFLOP/s = n^3 / 3 / seconds / 1e9.
//
// The check: every tile receives its updates in program order whatever the
// runtime (each task writes its tile, and writes to one tile are ordered),
// so a correct run yields the same L, bit for bit, as a serial run of the
// same program. The constructor makes that serial L once and computes its
// residual ||A - L L^T||_F / ||A||_F; each run's L is then compared with it
// bit for bit, and a run whose L differs anywhere gets its own residual
// computed (n^3 / 3 flops, as much as the factorization). The figure
// "bitwise" says which check a run passed (1: identical to the checked
// serial L).
class CholeskyRunner : public Runner {
 public:
  explicit CholeskyRunner(const CholeskyParams& params);
  RunResult Run() final;

 protected:
  // Factors `work` in place with the runtime; returns the seconds from just
  // before the first task is submitted to the return of the runtime's wait.
  virtual double Factor(TileMatrix& work) = 0;
  const CholeskyParams& params() const { return params_; }

 private:
  CholeskyParams params_;
  TileMatrix original_;
  TileMatrix reference_;        // the serial run's L
  double reference_residual_;   // its residual
  TileMatrix work_;
};

// Zeroes the strictly upper triangles of the diagonal tiles (which dpotrf
// leaves as they were), so that the lower tiles hold exactly L.
void ZeroUpperOfDiagonalTiles(TileMatrix& l);

// Whether the lower tiles of `a` and `b` are equal bit for bit.
bool SameLowerTiles(const TileMatrix& a, const TileMatrix& b);

// The limits of W6, for peers-blas.
// LAPACKE_dpotrf on the whole column-major matrix with `threads` OpenBLAS
// threads; checked like the tiled runs. figure: gflops.
std::unique_ptr<Runner> MakePotrfLimitRunner(const CholeskyParams& params, int threads);
// One thread's DGEMM C -= A B^T at b x b x b, repeated for at least
// `min_seconds`; figures: gflops = threads x single-core GFLOP/s, and
// gflops_one_core. Checked: C must equal -calls A B^T, that product
// computed once without the BLAS.
std::unique_ptr<Runner> MakeDgemmLimitRunner(int b, int threads, double min_seconds);

}  // namespace depengine::bench::peers
