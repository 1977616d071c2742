// NaiveEngine: the debugging engine. No threads: a function runs on the
// thread that makes it ready, which is the pushing thread unless it waits for
// an earlier async function (then it runs where that callback is called).
// Same dependency tracking and failure model as the threaded engines.
#include "engine/engines.h"

namespace depengine::internal {
namespace {

class NaiveEngine final : public ThreadedEngine {
 public:
  explicit NaiveEngine(const EngineOptions& options) : ThreadedEngine(options) {}
  ~NaiveEngine() override { Drain(); }

 protected:
  void Dispatch(OprBlock* b) override { RunInline(b); }
};

}  // namespace

std::unique_ptr<ThreadedEngine> MakeNaiveEngine(const EngineOptions& options) {
  return std::make_unique<NaiveEngine>(options);
}

}  // namespace depengine::internal
