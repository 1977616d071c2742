// A program built against an installed depengine::ops with find_package:
// NDArray arithmetic on the engine, and a FullyConnected operator created
// from the registry (which links OpenBLAS), each result checked.
#include <depengine/ndarray.h>
#include <depengine/operator.h>

#include <cmath>
#include <cstdio>
#include <vector>

int main() {
  using namespace depengine;
  NDArray a(TShape({4})), b(TShape({4}));
  const std::vector<float> av = {1, 2, 3, 4}, bv = {10, 20, 30, 40};
  a.SyncCopyFromCPU(av.data(), av.size());
  b.SyncCopyFromCPU(bv.data(), bv.size());
  NDArray c = a * 2.0 + b;
  const std::vector<float> cv = c.ToVector();
  for (std::size_t i = 0; i < cv.size(); ++i) {
    if (std::fabs(cv[i] - (2 * av[i] + bv[i])) > 1e-6f) {
      std::fprintf(stderr, "c[%zu] = %g, expected %g\n", i, cv[i], 2 * av[i] + bv[i]);
      return 1;
    }
  }
  auto fc = OperatorProperty::Create("FullyConnected", {{"num_hidden", "3"}});
  if (fc == nullptr || fc->ListArguments().empty()) {
    std::fprintf(stderr, "FullyConnected is not registered\n");
    return 1;
  }
  std::printf("ops consumer: ok (c = %g %g %g %g; FullyConnected takes %zu arguments)\n", cv[0],
              cv[1], cv[2], cv[3], fc->ListArguments().size());
  return 0;
}
