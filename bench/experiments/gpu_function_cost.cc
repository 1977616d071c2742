// gpu-function-cost: what a GPU function costs the engine beyond a CPU one.
// Times chains of N empty functions writing one var (W1's shape), per engine
// kind: sync ones on CPU(0) and on GPU(0), and async ones on GPU(0) that
// finish through CompleteWhenStreamDone; and, for reference, the two CUDA
// calls the engine makes around a sync GPU function (cudaSetDevice, then
// cudaStreamSynchronize on the stream, which the function left empty here).
// Prints the median of ROUNDS rounds. docs/performance.md ("GPU functions")
// quotes it. Needs a GPU.
//
// Not built by CMake. From the repository root, after a build in build/ with
// CUDA (the lines below joined):
//   g++ -O2 -std=c++20 -I include -I /usr/local/cuda/include
//     bench/experiments/gpu_function_cost.cc build/src/libdepengine.a
//     /usr/local/cuda/lib64/libcudart_static.a -lpthread -ldl -lrt
//     -o /tmp/gpu-function-cost
//   /tmp/gpu-function-cost [N=20000] [rounds=5]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#include "depengine/engine.h"
#include "depengine/gpu.h"

namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median over `rounds` of the ns per iteration of `body(n)`.
double NsPer(int n, int rounds, const std::function<void(int)>& body) {
  std::vector<double> ns;
  for (int r = 0; r < rounds; ++r) {
    const auto start = Clock::now();
    body(n);
    ns.push_back(std::chrono::duration<double, std::nano>(Clock::now() - start).count() / n);
  }
  return Median(ns);
}

// A chain of N functions writing one var: sync ones, or (`async`) async
// ones that finish through CompleteWhenStreamDone.
double ChainNsPerFunction(depengine::EngineKind kind, depengine::Context ctx, bool async, int n,
                          int rounds) {
  depengine::EngineOptions o;
  o.kind = kind;
  o.cpu_worker_threads = 2;
  o.gpu_worker_threads = 2;
  auto engine = depengine::CreateEngine(o);
  depengine::VarHandle v = engine->NewVariable();
  auto body = [&](int count) {
    for (int i = 0; i < count; ++i) {
      if (async) {
        engine->PushAsync(
            [](depengine::RunContext r, depengine::CallbackOnComplete done) {
              depengine::CompleteWhenStreamDone(r, done);
            },
            ctx, {}, {v});
      } else {
        engine->PushSync([](depengine::RunContext) {}, ctx, {}, {v});
      }
    }
    engine->WaitForAll();
  };
  body(n / 10 + 1);  // warm-up: the pools' threads and the streams
  return NsPer(n, rounds, body);
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 20000;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
  cudaStream_t stream = nullptr;
  if (cudaSetDevice(0) != cudaSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) {
    std::fprintf(stderr, "gpu-function-cost: no usable GPU\n");
    return 1;
  }
  std::printf("cudaSetDevice(0), unchanged:           %8.0f ns\n", NsPer(n, rounds, [](int c) {
                for (int i = 0; i < c; ++i) cudaSetDevice(0);
              }));
  std::printf("cudaStreamSynchronize, empty stream:   %8.0f ns\n", NsPer(n, rounds, [&](int c) {
                for (int i = 0; i < c; ++i) cudaStreamSynchronize(stream);
              }));
  const struct {
    const char* name;
    depengine::EngineKind kind;
  } kinds[] = {{"naive", depengine::EngineKind::kNaive},
               {"pooled", depengine::EngineKind::kPooled},
               {"per-device", depengine::EngineKind::kPerDevice}};
  std::printf("%-12s %10s %10s %16s\n", "engine", "CPU sync", "GPU sync", "GPU async+stream");
  for (const auto& k : kinds) {
    const double cpu = ChainNsPerFunction(k.kind, depengine::Context::CPU(), false, n, rounds);
    const double gpu = ChainNsPerFunction(k.kind, depengine::Context::GPU(), false, n, rounds);
    const double gpu_async = ChainNsPerFunction(k.kind, depengine::Context::GPU(), true, n, rounds);
    std::printf("%-12s %10.0f %10.0f %16.0f   ns per function\n", k.name, cpu, gpu, gpu_async);
  }
  cudaStreamDestroy(stream);
  return 0;
}
