// The few CUDA runtime calls the engine needs, behind a C++ interface so that
// the engine builds without CUDA (every call is then a no-op or returns 0).
#pragma once

#include <string>

namespace depengine::internal::gpu {

// True when depengine was built with CUDA.
bool Built();
// Number of CUDA devices present (0 without CUDA or without a driver).
int DeviceCount();
// Makes `dev` the calling thread's current device and returns the calling
// thread's own non-blocking stream on `dev` (a cudaStream_t), made on the
// thread's first use of `dev` and destroyed when the thread exits. Every
// engine hands a GPU function the stream of the thread that runs it, so each
// worker has one stream per device it serves. Throws std::runtime_error that
// names the CUDA call and its error.
void* ThreadStream(int dev);
// Waits until everything queued on `stream` has run. Returns "" or the CUDA
// error it reports (a kernel's fault, say) as text.
std::string SynchronizeStream(void* stream);

}  // namespace depengine::internal::gpu
