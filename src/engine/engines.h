// Factories for the three engine kinds (see CreateEngine).
#pragma once

#include <memory>

#include "engine/threaded_engine.h"

namespace depengine::internal {

std::unique_ptr<Engine> MakeNaiveEngine(const EngineOptions& options);
std::unique_ptr<Engine> MakePooledEngine(const EngineOptions& options);
std::unique_ptr<Engine> MakePerDeviceEngine(const EngineOptions& options);

// The default number of CPU worker threads: the hardware threads.
int DefaultCpuWorkers();

}  // namespace depengine::internal
