#include "gpu/device.h"

#if DEPENGINE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>
#endif

namespace depengine::internal::gpu {

#if DEPENGINE_HAVE_CUDA
namespace {
void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
}  // namespace

bool Built() { return true; }
int DeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}
void SetDevice(int dev) { Check(cudaSetDevice(dev), "cudaSetDevice"); }
void* CreateStream(int dev) {
  SetDevice(dev);
  cudaStream_t s = nullptr;
  Check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  return s;
}
void DestroyStream(void* stream) {
  if (stream != nullptr) cudaStreamDestroy(static_cast<cudaStream_t>(stream));
}
#else
bool Built() { return false; }
int DeviceCount() { return 0; }
void SetDevice(int) {}
void* CreateStream(int) { return nullptr; }
void DestroyStream(void*) {}
#endif

}  // namespace depengine::internal::gpu
