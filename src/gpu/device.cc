#include "gpu/device.h"

#if DEPENGINE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <vector>
#endif

namespace depengine::internal::gpu {

#if DEPENGINE_HAVE_CUDA
namespace {

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// One thread's streams, by device id; only that thread touches them.
struct ThreadStreams {
  std::vector<cudaStream_t> by_device;
  ~ThreadStreams() {
    // At thread exit; a process's main thread gets here before the CUDA
    // runtime's own teardown (thread-locals go before atexit handlers).
    for (cudaStream_t s : by_device) {
      if (s != nullptr) cudaStreamDestroy(s);
    }
  }
};
thread_local ThreadStreams tls_streams;

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

void* ThreadStream(int dev) {
  // Every time, not once per thread: a function may switch devices, and a
  // pooled worker serves every device. (A call that changes nothing costs
  // about 100 ns on an H100 machine, next to microseconds for any GPU work:
  // docs/performance.md, "GPU functions".)
  Check(cudaSetDevice(dev), "cudaSetDevice");
  std::vector<cudaStream_t>& streams = tls_streams.by_device;
  if (static_cast<std::size_t>(dev) >= streams.size()) streams.resize(dev + 1, nullptr);
  if (streams[dev] == nullptr) {
    Check(cudaStreamCreateWithFlags(&streams[dev], cudaStreamNonBlocking),
          "cudaStreamCreateWithFlags");
  }
  return streams[dev];
}

std::string SynchronizeStream(void* stream) {
  const cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
  if (e == cudaSuccess) return "";
  return std::string("cudaStreamSynchronize: ") + cudaGetErrorName(e) + ": " +
         cudaGetErrorString(e);
}
#else
bool Built() { return false; }
int DeviceCount() { return 0; }
void* ThreadStream(int) { return nullptr; }
std::string SynchronizeStream(void*) { return ""; }
#endif

}  // namespace depengine::internal::gpu
