// Factories for the three engine kinds (see CreateEngine).
#pragma once

#include <memory>

#include "engine/threaded_engine.h"

namespace depengine::internal {

// The cores; CreateEngine wraps each in an EngineHandle.
std::unique_ptr<ThreadedEngine> MakeNaiveEngine(const EngineOptions& options);
std::unique_ptr<ThreadedEngine> MakePooledEngine(const EngineOptions& options);
std::unique_ptr<ThreadedEngine> MakePerDeviceEngine(const EngineOptions& options);

// The default number of CPU worker threads: the hardware threads.
int DefaultCpuWorkers();

}  // namespace depengine::internal
