// The few CUDA runtime calls the engine needs, behind a C++ interface so that
// the engine builds without CUDA (every call is then a no-op or returns 0).
#pragma once

namespace depengine::internal::gpu {

// True when depengine was built with CUDA.
bool Built();
// Number of CUDA devices present (0 without CUDA or without a driver).
int DeviceCount();
// Makes `dev` the calling thread's current device.
void SetDevice(int dev);
// Creates a non-blocking stream on `dev`, as a cudaStream_t.
void* CreateStream(int dev);
void DestroyStream(void* stream);

}  // namespace depengine::internal::gpu
