// Programs that return from main with GPU work in flight on the process-wide
// engine, which drains it at exit; gpu_exit_test runs each in a process of
// its own. Each prints what its last function saw and exits 0: the engine's
// drain, its threads' streams and the completer of async GPU functions all
// get along with the CUDA runtime's own teardown at exit.
//
//   gpu_exit_scenarios engine-first   Engine::Get() before the program's
//                                     own first CUDA call (the engine's
//                                     constructor makes one: it counts the
//                                     GPUs)
//   gpu_exit_scenarios cuda-first     a CUDA call before Engine::Get()
// The engine kind of Get() comes from DEPENGINE_ENGINE_TYPE.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "depengine/engine.h"
#include "depengine/gpu.h"

namespace {

using namespace depengine;

constexpr std::size_t kBytes = std::size_t{16} << 20;

int Run(bool cuda_first) {
  void* device = nullptr;
  if (cuda_first && cudaMalloc(&device, kBytes) != cudaSuccess) return 2;
  Engine* e = Engine::Get();
  if (!cuda_first && cudaMalloc(&device, kBytes) != cudaSuccess) return 2;
  static unsigned char host[1];
  VarHandle on_device = e->NewVariable();
  VarHandle on_host = e->NewVariable();
  for (int round = 1; round <= 20; ++round) {
    e->PushSync(
        [=](RunContext r) {
          cudaMemsetAsync(device, round, kBytes, static_cast<cudaStream_t>(r.stream));
        },
        Context::GPU(0), {}, {on_device});
    e->PushAsync(
        [=](RunContext r, CallbackOnComplete done) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));  // still running at exit
          cudaMemcpyAsync(host, static_cast<unsigned char*>(device) + kBytes - 1, 1,
                          cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(r.stream));
          CompleteWhenStreamDone(r, done);
        },
        Context::GPU(0), {on_device}, {on_host}, FnProperty::kCopyFromGPU);
  }
  e->PushSync([](RunContext) { std::printf("last byte %d\n", host[0]); }, Context::CPU(), {on_host},
              {});
  return 0;  // the engine drains the rest at exit
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "engine-first") == 0) return Run(false);
  if (argc >= 2 && std::strcmp(argv[1], "cuda-first") == 0) return Run(true);
  std::fprintf(stderr, "usage: see the comment at the top of gpu_exit_scenarios.cc\n");
  return 2;
}
