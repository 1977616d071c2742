// The public entry points: CreateEngine, Engine::Get, CallbackOnComplete.
#include "depengine/engine.h"

#include <mutex>
#include <stdexcept>

#include "engine/engines.h"

namespace depengine {

void CallbackOnComplete::operator()(std::exception_ptr error) const {
  if (callback_ != nullptr) {
    callback_(engine_, param_);
    return;
  }
  if (complete_ == nullptr) throw std::logic_error("CallbackOnComplete: empty callback called");
  complete_(engine_, param_, ticket_, std::move(error));
}

std::unique_ptr<Engine> CreateEngine(const EngineOptions& options) {
  switch (options.kind) {
    case EngineKind::kNaive:
      return internal::MakeNaiveEngine(options);
    case EngineKind::kPooled:
      return internal::MakePooledEngine(options);
    case EngineKind::kPerDevice:
      return internal::MakePerDeviceEngine(options);
  }
  throw std::invalid_argument("CreateEngine: unknown EngineKind");
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

std::shared_ptr<Engine> Engine::_GetSharedRef() {
  // Built on first use, destroyed at exit after every singleton that took a
  // reference through this function.
  static std::shared_ptr<Engine> engine(CreateEngine(EngineOptions::FromEnv()).release());
  return engine;
}

Engine* Engine::Get() {
  static Engine* engine = _GetSharedRef().get();
  return engine;
}

}  // namespace depengine
