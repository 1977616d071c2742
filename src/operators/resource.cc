// ResourceManager: per-device random generators and temporary buffers, each
// guarded by its own engine var.
#include "depengine/resource.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine/internal_hooks.h"

namespace depengine {
namespace internal {

// What a Resource points to. Touched only by the functions that write the
// resource's var (and by the manager when it creates it, before any such
// function exists), so one at a time: no lock.
struct ResourceState {
  RandomGenerator random;  // kRandom
  // kRandom: the SeedRandom call whose seed `random` was last seeded with
  // (ResourceManager::Impl::seed_generation). Read and written only by
  // functions that write the resource's var, or before it has any.
  std::uint64_t seed_generation = 0;

  // kTempSpace: a bump allocator over `space`. The calls of one function
  // (RunningFunctionId) take consecutive, disjoint pieces; a call from
  // another function starts over at offset 0, since every user writes the
  // resource's var, so the previous one has finished. A call that does not
  // fit moves to a new buffer, large enough for everything the function took
  // so far plus the call (and at least twice the old one), so that in steady
  // state one buffer holds a whole function's needs; the old buffer is
  // retired, kept for the function's earlier pieces until the next function.
  void* space = nullptr;        // 64-byte aligned
  std::size_t space_bytes = 0;  // its capacity
  std::size_t used = 0;         // bytes of `space` handed out to `owner`
  std::size_t owner_bytes = 0;  // bytes handed out to `owner`, in all buffers
  std::uint64_t owner = 0;      // RunningFunctionId() of the last call; 0: outside any function
  std::vector<void*> retired;   // earlier buffers of `owner`'s calls

  ResourceState() = default;
  ResourceState(const ResourceState&) = delete;
  ResourceState& operator=(const ResourceState&) = delete;
  ~ResourceState() {
    FreeRetired();
    std::free(space);
  }
  void FreeRetired() {
    for (void* p : retired) std::free(p);
    retired.clear();
  }
  void* Take(std::size_t bytes);
};

void* ResourceState::Take(std::size_t bytes) {
  const std::uint64_t fn = RunningFunctionId();
  if (fn == 0 || fn != owner) {
    FreeRetired();
    used = 0;
    owner_bytes = 0;
    owner = fn;
  }
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
  if (bytes > kMax - 63) throw std::bad_alloc();
  const std::size_t rounded = (bytes + 63) / 64 * 64;
  if (space_bytes - used < rounded) {
    if (rounded > kMax - owner_bytes) throw std::bad_alloc();
    const std::size_t total = owner_bytes + rounded;
    const std::size_t capacity = space_bytes <= kMax / 2 ? std::max(total, 2 * space_bytes) : total;
    if (space != nullptr) retired.reserve(retired.size() + 1);  // nothing changes if it throws
    void* fresh = std::aligned_alloc(64, capacity);
    if (fresh == nullptr) throw std::bad_alloc();
    if (space != nullptr) retired.push_back(space);
    space = fresh;
    space_bytes = capacity;
    used = 0;
  }
  void* p = static_cast<char*>(space) + used;
  used += rounded;
  owner_bytes += rounded;
  return p;
}

}  // namespace internal

namespace {

// The seed of device `ctx`'s generator for the manager seed `seed`.
std::uint32_t DeviceSeed(std::uint32_t seed, Context ctx) {
  constexpr std::uint32_t kRandMagic = 127;  // as MXNet's resource.cc
  return seed * kRandMagic + static_cast<std::uint32_t>(ctx.dev_type) * 65537u +
         static_cast<std::uint32_t>(ctx.dev_id);
}

}  // namespace

RandomGenerator* Resource::get_random(void*) const {
  if (req.type != ResourceRequest::kRandom || ptr_ == nullptr) {
    throw std::logic_error("Resource::get_random: this resource is not a random generator");
  }
  return &ptr_->random;
}

void* Resource::get_space_bytes(std::size_t bytes) const {
  if (req.type != ResourceRequest::kTempSpace || ptr_ == nullptr) {
    throw std::logic_error("Resource::get_space: this resource is not temporary space");
  }
  return ptr_->Take(bytes);
}

TBlob Resource::get_space(const TShape& shape, int type, void* stream) const {
  (void)stream;
  void* p = get_space_bytes(static_cast<std::size_t>(shape.Size()) * TypeSize(type));
  return TBlob(p, shape, type, Context::CPU());
}

// The resources of one device.
struct DeviceResources {
  Context ctx;
  Resource random;
  std::vector<Resource> temp;
  std::size_t next_temp = 0;  // the temp buffer Request hands out next
};

struct ResourceManager::Impl {
  std::mutex mu;
  // Keyed by (device type, device id). Guarded by mu; Resource values are
  // immutable once made, so they may be copied out and used without mu.
  std::map<std::pair<int, int>, DeviceResources> devices;
  std::uint32_t seed = 0;  // guarded by mu
  // Counts SeedRandom calls; guarded by mu. Two calls on different threads
  // push their reseeds outside mu and so in either order on a device; each
  // reseed applies only when it is newer than the generator's, so the last
  // call (in mu's order) wins on every device.
  std::uint64_t seed_generation = 0;
};

ResourceManager::ResourceManager(Engine* engine, ResourceOptions options)
    : engine_(engine), options_(options), impl_(std::make_unique<Impl>()) {
  if (engine_ == nullptr) {
    engine_ref_ = Engine::_GetSharedRef();
    engine_ = engine_ref_.get();
  }
  if (options_.temp_space_copies < 1) {
    throw std::invalid_argument("ResourceManager: temp_space_copies must be >= 1, got " +
                                std::to_string(options_.temp_space_copies));
  }
  impl_->seed = options_.seed;
}

ResourceManager::~ResourceManager() {
  // Each state is deleted by the var's deleter, after the last function
  // that uses it.
  auto release = [this](const DeviceResources& d, const Resource& r) {
    internal::ResourceState* s = r.ptr_;
    engine_->DeleteVariable([s](RunContext) { delete s; }, d.ctx, r.var);
  };
  for (auto& [key, d] : impl_->devices) {
    release(d, d.random);
    for (const Resource& r : d.temp) release(d, r);
  }
}

Resource ResourceManager::Request(Context ctx, const ResourceRequest& req) {
  if (ctx.dev_type == DeviceType::kGPU) {
    throw std::invalid_argument(
        "ResourceManager::Request: GPU resources are not supported in this "
        "build (CPU only)");
  }
  const auto key = std::make_pair(static_cast<int>(ctx.dev_type), ctx.dev_id);
  // The resource `req` asks for among the device's (mu held).
  auto hand_out = [&req](DeviceResources& d) {
    if (req.type == ResourceRequest::kRandom) return d.random;
    const Resource r = d.temp[d.next_temp];
    d.next_temp = (d.next_temp + 1) % d.temp.size();
    return r;
  };
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (auto it = impl_->devices.find(key); it != impl_->devices.end()) return hand_out(it->second);
  }
  // A new device. A context the engine refuses (a negative or too large
  // dev_id, an unknown device type) would make every use of its resources,
  // SeedRandom and the destructor's DeleteVariable raise (the last one
  // terminating the program): an empty function pushed on it refuses it
  // here, before anything is made. Once per device (twice at worst, when two
  // threads meet a new device together), outside mu since a push may wait
  // for backpressure.
  try {
    engine_->PushSync([](RunContext) {}, ctx, {}, {}, FnProperty::kNormal, 0,
                      "ResourceManager::Request");
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("ResourceManager::Request: unusable context: ") +
                                e.what());
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->devices.find(key);
  if (it == impl_->devices.end()) {
    DeviceResources d;
    d.ctx = ctx;
    auto make = [&](ResourceRequest::Type type, std::int32_t id) {
      Resource r;
      r.req = ResourceRequest(type);
      r.id = id;
      r.ptr_ = new internal::ResourceState();
      r.var = engine_->NewVariable();
      // A failing user must not fail the resource for every later user.
      internal::MarkScratchVar(engine_, r.var);
      return r;
    };
    d.random = make(ResourceRequest::kRandom, 0);
    // No function uses the new var yet, so seeding here races with nothing.
    d.random.ptr_->random.Seed(DeviceSeed(impl_->seed, ctx));
    d.random.ptr_->seed_generation = impl_->seed_generation;
    for (int i = 0; i < options_.temp_space_copies; ++i) {
      d.temp.push_back(make(ResourceRequest::kTempSpace, i));
    }
    it = impl_->devices.emplace(key, std::move(d)).first;
  }
  return hand_out(it->second);
}

void ResourceManager::SeedRandom(std::uint32_t seed) {
  // The reseeds are pushed outside mu: a push may wait for backpressure
  // (EngineOptions::max_in_flight), and Request must not wait behind it.
  // Devices are never removed, so their resources outlive this call.
  std::vector<std::pair<Context, Resource>> generators;
  std::uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->seed = seed;
    generation = ++impl_->seed_generation;
    for (const auto& [key, d] : impl_->devices) generators.emplace_back(d.ctx, d.random);
  }
  for (const auto& [ctx, random] : generators) {
    internal::ResourceState* s = random.ptr_;
    const std::uint32_t device_seed = DeviceSeed(seed, ctx);
    engine_->PushSync(
        [s, device_seed, generation](RunContext) {
          if (generation < s->seed_generation) return;  // a later SeedRandom's reseed ran first
          s->random.Seed(device_seed);
          s->seed_generation = generation;
        },
        ctx, {}, {random.var}, FnProperty::kNormal, 0, "SeedRandom");
  }
}

ResourceManager* ResourceManager::Get() {
  static ResourceManager manager(nullptr);
  return &manager;
}

}  // namespace depengine
