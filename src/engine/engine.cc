// The public entry points: CreateEngine, Engine::Get, CallbackOnComplete.
#include "depengine/engine.h"

#include <atomic>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "engine/engine_handle.h"
#include "engine/engines.h"

namespace depengine {

void CallbackOnComplete::operator()(std::exception_ptr error) const {
  if (callback_ != nullptr) {
    if (error) engine_->RecordCallbackError(std::move(error));
    callback_(engine_, param_);
    return;
  }
  if (complete_ == nullptr) throw std::logic_error("CallbackOnComplete: empty callback called");
  complete_(engine_, param_, ticket_, std::move(error));
}

void Engine::RecordCallbackError(std::exception_ptr error) {
  std::string what = "an exception not derived from std::exception";
  try {
    std::rethrow_exception(std::move(error));
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  std::fprintf(stderr, "depengine: error passed to a CreateCallback callback: %s\n", what.c_str());
}

namespace {
std::unique_ptr<internal::ThreadedEngine> MakeCore(const EngineOptions& options) {
  switch (options.kind) {
    case EngineKind::kNaive:
      return internal::MakeNaiveEngine(options);
    case EngineKind::kPooled:
      return internal::MakePooledEngine(options);
    case EngineKind::kPerDevice:
      return internal::MakePerDeviceEngine(options);
  }
  throw std::invalid_argument(
      "CreateEngine: EngineOptions::kind = " + std::to_string(static_cast<int>(options.kind)) +
      " is not an EngineKind (kNaive, kPooled or kPerDevice)");
}
}  // namespace

std::unique_ptr<Engine> CreateEngine(const EngineOptions& options) {
  return std::make_unique<internal::EngineHandle>(MakeCore(options));
}

const char* EngineKindName(EngineKind kind) {
  switch (kind) {
    case EngineKind::kNaive:
      return "NaiveEngine";
    case EngineKind::kPooled:
      return "ThreadedEnginePooled";
    case EngineKind::kPerDevice:
      return "ThreadedEnginePerDevice";
  }
  return "unknown";
}

namespace {

// Set once the process-wide engine was destroyed at exit, for Get() called
// later (by a static destroyed after it). Constant-initialized and trivially
// destructible, so it is valid for the whole of exit. Release/acquire: a
// reader that sees it set also sees the destruction finished.
constinit std::atomic<bool> g_engine_destroyed{false};

// The process-wide engine. Functions may still run while it is destroyed at
// exit (it finishes every pushed function first), and they may call Get():
// so Get() hands out the raw pointer, which stays valid until ~Engine
// returns, instead of copying the shared_ptr being destroyed (copying it
// then would bring its count back from zero and destroy the engine twice).
class GlobalEngine {
 public:
  GlobalEngine() : ref_(CreateEngine(EngineOptions::FromEnv()).release()), raw_(ref_.get()) {
    Weak() = ref_;
  }
  ~GlobalEngine() {
    // The engine dies with the last reference, here or in a singleton that
    // took one through _GetSharedRef() and is destroyed later.
    std::shared_ptr<Engine> last = std::move(ref_);
    last.reset();
    g_engine_destroyed.store(true, std::memory_order_release);
  }
  GlobalEngine(const GlobalEngine&) = delete;
  GlobalEngine& operator=(const GlobalEngine&) = delete;

  Engine* raw() const { return raw_; }

  // The engine, while it lives. Never destroyed, so that a static
  // destructor that runs after ~GlobalEngine (an object built before the
  // engine) still finds the weak reference and is refused, instead of
  // reading a destroyed one. Written once, by the constructor, under the
  // static initialization of Global(), which every reader goes through
  // first; lock() is thread-safe: _GetSharedRef may be called from any
  // thread.
  static std::weak_ptr<Engine>& Weak() {
    static auto* const weak = new std::weak_ptr<Engine>();  // never deleted (see above)
    return *weak;
  }

 private:
  // Touched only by the constructor and the destructor (static
  // initialization and destruction are not concurrent with each other).
  std::shared_ptr<Engine> ref_;
  Engine* const raw_;
};

GlobalEngine& Global() {
  // Built on first use, destroyed at exit; the engine may outlive it in the
  // singletons that took a reference through _GetSharedRef().
  static GlobalEngine global;
  return global;
}

}  // namespace

std::shared_ptr<Engine> Engine::_GetSharedRef() {
  Global();  // builds the engine on first use; touches nothing of a destroyed one
  std::shared_ptr<Engine> ref = GlobalEngine::Weak().lock();
  if (ref == nullptr) {
    throw std::logic_error(
        "Engine::_GetSharedRef: the process-wide engine is being destroyed at exit; take the "
        "reference before exit begins");
  }
  return ref;
}

Engine* Engine::Get() {
  // Global() must not be touched once destroyed: its storage is gone.
  if (g_engine_destroyed.load(std::memory_order_acquire)) {
    throw std::logic_error(
        "Engine::Get: the process-wide engine was destroyed at exit; a static destroyed after it "
        "must not use it (keep it alive with _GetSharedRef() instead)");
  }
  return Global().raw();
}

}  // namespace depengine
