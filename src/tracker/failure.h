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
  // Set once WaitForVar delivered the failure (as it is taken off the
  // var), so that WaitForAll, which scans the engine's failure log, does not
  // deliver it again and a destroyed engine does not name it as lost.
  // (WaitForAll's own delivery clears the log instead.) Written
  // (DeliverFailure) and read (WaitForAll, ~ThreadedEngine) only under the
  // engine's failures mutex, which orders it; the atomic adds nothing.
  std::atomic<bool> delivered{false};
};

using FailurePtr = std::shared_ptr<Failure>;

}  // namespace depengine::internal
