// Registers the built-in operators once, on the first registry call.
// Explicit calls (rather than static registrars in each file) keep the
// operators in programs that link the static library.
#include <mutex>

#include "operators/registry.h"

namespace depengine {
namespace op {
void RegisterFullyConnected();
void RegisterActivation();
void RegisterSoftmaxOutput();
void RegisterPooling();
void RegisterDropout();
void RegisterElemwiseOps();
void RegisterSmoothL1();
}  // namespace op

namespace internal {

void EnsureBuiltinOps() {
  static std::once_flag once;
  std::call_once(once, [] {
    op::RegisterFullyConnected();
    op::RegisterActivation();
    op::RegisterSoftmaxOutput();
    op::RegisterPooling();
    op::RegisterDropout();
    op::RegisterElemwiseOps();
    op::RegisterSmoothL1();
  });
}

}  // namespace internal
}  // namespace depengine
