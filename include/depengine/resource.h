// Resources an operator asks the system for instead of owning them: a random
// number generator and temporary space. A ResourceManager serves them per
// device; each resource is guarded by its own engine var, so every function
// that uses one must list that var among the vars it writes. That makes the
// engine serialize the functions sharing a generator (so a run is
// reproducible from a seed, seed 003's third problem) or a temporary buffer
// (so it can be reused across calls without a race).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "depengine/engine.h"
#include "depengine/tensor.h"

namespace depengine {

// What an operator asks for (OperatorProperty::ForwardResource,
// SimpleOpRegEntry::set_resource_request).
struct ResourceRequest {
  enum Type {
    kRandom,    // a RandomGenerator
    kTempSpace  // temporary memory of any size, reused across calls
  };
  Type type;
  ResourceRequest(Type t) : type(t) {}  // NOLINT: implicit, as in MXNet
};

// A pseudo-random generator (std::mt19937). Not thread-safe: use it only
// inside a function that writes the owning Resource's var.
class RandomGenerator {
 public:
  explicit RandomGenerator(std::uint32_t seed = 0) : gen_(seed) {}
  void Seed(std::uint32_t seed) { gen_.seed(seed); }
  // Fills out[0..n) with uniform draws from [lo, hi).
  template <class T>
  void SampleUniform(T* out, std::size_t n, T lo, T hi) {
    std::uniform_real_distribution<T> d(lo, hi);
    for (std::size_t i = 0; i < n; ++i) out[i] = d(gen_);
  }
  // Fills out[0..n) with normal draws of the given mean and deviation.
  template <class T>
  void SampleGaussian(T* out, std::size_t n, T mean, T stddev) {
    std::normal_distribution<T> d(mean, stddev);
    for (std::size_t i = 0; i < n; ++i) out[i] = d(gen_);
  }
  // Fills out[0..n) with 1 with probability p, else 0.
  template <class T>
  void SampleBernoulli(T* out, std::size_t n, double p) {
    std::bernoulli_distribution d(p);
    for (std::size_t i = 0; i < n; ++i) out[i] = d(gen_) ? T(1) : T(0);
  }
  std::mt19937& engine() { return gen_; }

 private:
  std::mt19937 gen_;
};

namespace internal {
struct ResourceState;  // the generator or buffer behind a Resource
}

// A handle on one resource of one device: copyable, owned by the
// ResourceManager that made it. Valid until that manager is destroyed.
struct Resource {
  ResourceRequest req{ResourceRequest::kTempSpace};
  // The var guarding the resource: list it among the written vars of every
  // function that uses the resource. It guards state, not a result: a
  // function that fails does not mark it failed (the failure reaches the
  // function's other outputs), so later users of the resource still run.
  VarHandle var = nullptr;
  // Which copy of the resource this is, on its device.
  std::int32_t id = 0;
  internal::ResourceState* ptr_ = nullptr;

  // The generator. Requires req.type == kRandom (else std::logic_error).
  // `stream` is accepted for MXNet's signature and ignored on CPU.
  RandomGenerator* get_random(void* stream = nullptr) const;
  // Temporary space for `shape` elements of `type`; contents unspecified.
  // Call it from the body of a function that writes `var`: every call made
  // during one execution of that body returns memory distinct from the
  // earlier calls', and all of it stays valid until the function finishes.
  // Later functions reuse it: the resource keeps one buffer, grown (to hold
  // a whole function's requests) when a call does not fit. A call made
  // outside any engine function's body counts as a new function each time:
  // it invalidates what earlier such calls returned. Requires
  // req.type == kTempSpace (else std::logic_error); std::bad_alloc when the
  // memory cannot be had.
  TBlob get_space(const TShape& shape, int type = kFloat32, void* stream = nullptr) const;
  // Raw temporary space of `bytes` bytes, 64-byte aligned; as get_space.
  void* get_space_bytes(std::size_t bytes) const;
};

// How a ResourceManager is built.
struct ResourceOptions {
  std::uint32_t seed = 0;     // the seed of device generators (see SeedRandom)
  int temp_space_copies = 1;  // temporary buffers per device, handed out in turn
};

// Serves resources per device context. Request is callable from any thread;
// the manager must outlive every function that uses its resources, and its
// engine must outlive the manager (the destructor deletes its vars through
// the engine, so buffers are freed after their last user).
class ResourceManager {
 public:
  // `engine` nullptr means Engine::Get() (kept alive as long as the manager).
  explicit ResourceManager(Engine* engine = nullptr, ResourceOptions options = {});
  ~ResourceManager();
  ResourceManager(const ResourceManager&) = delete;
  ResourceManager& operator=(const ResourceManager&) = delete;

  // A resource of `req`'s type on `ctx`. kRandom: the device's single
  // generator. kTempSpace: the device's temporary buffers, in turn.
  // Raises std::invalid_argument for a GPU context (no GPU storage), and
  // for a context the engine refuses (an unknown DeviceType, a dev_id out of
  // its range), checked with an empty function pushed on the context the
  // first time a device is requested.
  Resource Request(Context ctx, const ResourceRequest& req);

  // Reseeds every device generator, existing and future: device `ctx` gets
  // a seed derived from (seed, ctx). The reseed is pushed as a function
  // writing the generator's var, so draws pushed before it use the old
  // state and draws pushed after it the new one. Callable from any thread.
  void SeedRandom(std::uint32_t seed);

  Engine* engine() const { return engine_; }

  // The manager of Engine::Get(), built on first use.
  static ResourceManager* Get();

 private:
  std::shared_ptr<Engine> engine_ref_;  // set when built on Engine::Get()
  Engine* engine_;
  ResourceOptions options_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace depengine
