// peers-blas: the two limits printed beside W6, run by the driver in the
// same interleaving as the engines.
//   LIM_POTRF n=4096 b=128   LAPACKE_dpotrf with every core (OpenBLAS threads)
//   LIM_DGEMM b=128          cores x single-core DGEMM GFLOP/s at tile size b
#include <cstdio>
#include <memory>
#include <string>

#include "peer_server.h"
#include "tile_cholesky.h"

extern "C" char* openblas_get_config();

namespace depengine::bench::peers {
namespace {

class BlasPeer : public Peer {
 public:
  explicit BlasPeer(const PeerOptions& options) : threads_(options.threads) {}

  std::vector<std::pair<std::string, std::string>> Describe() const override {
    return {{"engine", "blas"}, {"runtime", openblas_get_config()}, {"detail", detail_}};
  }

  std::unique_ptr<Runner> MakeRunner(const Job& job, std::string* why) override {
    if (job.workload == "LIM_POTRF") {
      CholeskyParams p;
      if (!CholeskyParams::FromJob(job, &p, why)) return nullptr;
      detail_ = "LAPACKE_dpotrf on the whole column-major matrix, OpenBLAS with " + std::to_string(threads_) +
                " threads";
      return MakePotrfLimitRunner(p, threads_);
    }
    if (job.workload == "LIM_DGEMM") {
      const int b = static_cast<int>(job.Get("b", 128));
      const double min_seconds = static_cast<double>(job.Get("min_ms", 300)) * 1e-3;
      detail_ = std::to_string(threads_) + " x the GFLOP/s of one thread's DGEMM C -= A B^T at the tile size";
      return MakeDgemmLimitRunner(b, threads_, min_seconds);
    }
    *why = "peers-blas runs LIM_POTRF and LIM_DGEMM only";
    return nullptr;
  }

 private:
  int threads_;
  std::string detail_;
};

std::unique_ptr<Peer> MakeBlasPeer(const PeerOptions& options) {
  return std::make_unique<BlasPeer>(options);
}

}  // namespace
}  // namespace depengine::bench::peers

int main(int argc, char** argv) {
  return depengine::bench::peers::PeerMain(argc, argv, depengine::bench::peers::MakeBlasPeer);
}
