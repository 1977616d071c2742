#include "engine/engine_handle.h"

#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <system_error>
#include <thread>

namespace depengine::internal {

EngineHandle::~EngineHandle() {
  if (!core_->DestroyingWouldWaitForItself()) {
    // Functions still running may push more through this handle while the
    // engine finishes its work: the handle stays whole until nothing runs.
    core_->Drain();
    core_.reset();  // joins the workers
    return;
  }
  // From here on the handle is gone for everyone: a function that still
  // uses the engine after its last reference was dropped must hold one.
  // The reaper holds the last reference: the core's destructor waits for
  // the function running on this thread too, which finishes after this
  // destructor returns.
  try {
    std::thread reaper([core = std::move(core_)]() mutable { core.reset(); });
    // Named like the engine's workers (pool/kind), so that top, gdb and
    // tests can tell it from the program's threads. Named here, before
    // this thread goes on, not by the reaper itself: a reaper that names
    // itself stays unnamed until the scheduler runs it (milliseconds under
    // load), and whoever sees what this thread does next (a callback's
    // return) could miss it (exit_test's naive async case failed once so,
    // with ctest repeating the suite beside a fuzzer). The reaper may have
    // ended already (nothing to join): the name then has nowhere to go.
    (void)pthread_setname_np(reaper.native_handle(), "depengine/reap");
    reaper.detach();
  } catch (const std::system_error&) {
    // No thread for the reaper: nothing can finish the work without this
    // thread, which cannot wait for itself. Say so rather than hang.
    std::fprintf(stderr,
                 "depengine: an engine was released inside one of its own functions or callbacks "
                 "and no thread could be started to finish its work (the system refused one). "
                 "Aborting.\n");
    std::abort();
  }
}

ThreadedEngine* CoreOf(Engine* engine) {
  if (auto* handle = dynamic_cast<EngineHandle*>(engine)) return &handle->core();
  return dynamic_cast<ThreadedEngine*>(engine);
}

}  // namespace depengine::internal
