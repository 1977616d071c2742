// Failure: one exception raised by a function (thrown, or passed to its
// callback), shared by every var it reaches through failure propagation.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>

namespace depengine::internal {

struct Failure {
  std::exception_ptr error;
  // Set once the failure reached the program through WaitForVar (as it is
  // taken off the var) or WaitForAll, so that WaitForAll does not deliver it
  // again. Written and read under the engine's failures mutex; atomic so
  // that a diagnostic may read it without the mutex.
  std::atomic<bool> delivered{false};
};

using FailurePtr = std::shared_ptr<Failure>;

}  // namespace depengine::internal
