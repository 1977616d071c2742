// NDArray: an n-dimensional array whose every operation runs on the engine.
//
// Each array's storage has one engine var. An operation on arrays is pushed
// to the engine with the vars of the arrays it reads and of those it writes,
// and returns at once; the engine runs it after the earlier operations it
// depends on. Copies of an NDArray share storage (reference semantics, as in
// MXNet). When the last NDArray referring to a storage goes away, the storage
// is freed through Engine::DeleteVariable, i.e. only after every operation
// already pushed on it has finished (seed 003's memory problem): dropping an
// array right after pushing work on it is safe.
//
// Storage is CPU memory (Context kCPU or kCPUPinned); this build has no GPU
// storage, and a GPU context raises std::invalid_argument.
//
// Threading: an NDArray object is a value; two threads may use different
// NDArray objects sharing a storage at the same time, and the engine orders
// their operations in push order per thread. Contents are read or written
// only by engine functions, or by the caller after WaitToRead/WaitToWrite.
//
// Memory ordering: an operation sees everything done by earlier operations
// that wrote any array it uses; WaitToRead/WaitToWrite make everything done
// by earlier operations on the array visible to the caller.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "depengine/engine.h"
#include "depengine/tensor.h"

namespace depengine {

class ResourceManager;

class NDArray {
 public:
  // An empty array (is_none()): no storage, no var.
  NDArray() = default;
  // Allocates an array of `shape` on `ctx`, owned by `engine` (nullptr:
  // Engine::Get()). Contents are unspecified until written. The engine must
  // outlive every NDArray made on it. Raises std::invalid_argument naming
  // the shape for an unknown or empty shape, a negative dimension or more
  // than TShape::kMaxSize elements (so the byte size cannot overflow), and
  // for an unknown type or a GPU context, an unknown DeviceType or a
  // negative dev_id. A dev_id beyond what the engine supports is refused by
  // the engine (std::invalid_argument) at each push on the array's context;
  // destroying such an array is still safe.
  explicit NDArray(const TShape& shape, Context ctx = Context::CPU(), Engine* engine = nullptr,
                   int dtype = kFloat32);

  bool is_none() const { return ptr_ == nullptr; }
  const TShape& shape() const { return shape_; }
  Context ctx() const;
  int dtype() const { return dtype_; }
  Engine* engine() const;
  // The var of this array's storage (shared by views and copies).
  VarHandle var() const;
  std::size_t Size() const { return static_cast<std::size_t>(shape_.Size()); }

  // A TBlob on this array's memory. Touch the memory only inside an engine
  // function that lists var(), or after WaitToRead / WaitToWrite.
  TBlob data() const;

  // Returns once every operation pushed before the call that writes this
  // array has finished (so the caller may read it); rethrows the failure of
  // a failed one. Engine::WaitForVar also waits for earlier readers, so in
  // this implementation it returns only when WaitToWrite would.
  void WaitToRead() const;
  // Returns once every operation pushed before the call that reads or
  // writes this array has finished (so the caller may write it); rethrows
  // a failure as WaitToRead.
  void WaitToWrite() const;

  // A view with another shape of the same size, sharing storage and var.
  // Raises std::invalid_argument naming both shapes otherwise, or naming
  // `shape` when it has a negative dimension or is unknown (TShape::Size).
  NDArray Reshape(const TShape& shape) const;
  // A view of rows [begin, end) along the first axis, sharing storage and
  // var (so it is ordered against every use of the whole array).
  NDArray Slice(TShape::index_t begin, TShape::index_t end) const;
  // True when both arrays use the same storage (and so the same var).
  bool SharesStorageWith(const NDArray& other) const {
    return ptr_ != nullptr && ptr_ == other.ptr_;
  }

  // Copies `n` elements from host memory into the array, waiting for the
  // copy (pushed as a write of var()) to finish. `n` must equal Size() and T
  // the array's type (else std::invalid_argument).
  template <class T>
  void SyncCopyFromCPU(const T* data, std::size_t n) {
    SyncCopyFromCPUImpl(data, n, DataType<T>::kFlag);
  }
  // Copies the array into host memory, in an engine function pushed (like
  // any operation) after the operations before it on the array, from any
  // thread, and waits for it; a later operation, from any thread, does not
  // change what it copies. Rethrows a failure as WaitToRead.
  template <class T>
  void SyncCopyToCPU(T* data, std::size_t n) const {
    SyncCopyToCPUImpl(data, n, DataType<T>::kFlag);
  }
  // The contents as a vector (waits, as SyncCopyToCPU).
  template <class T = float>
  std::vector<T> ToVector() const {
    std::vector<T> v(Size());
    SyncCopyToCPU(v.data(), v.size());
    return v;
  }

  // A new array with a copy of the contents (pushed, not waited for).
  NDArray Copy() const;

  // Fills every element with `value` (pushed).
  NDArray& operator=(double value);
  // In-place arithmetic (pushed as a write of this array); the other array
  // must have the same shape, type, context and engine. The result is the
  // serial one even when `rhs` is a view of this array's storage that
  // partly overlaps it (a.Slice(1, 4) += a.Slice(0, 3)): rhs is then copied
  // to a temporary first.
  NDArray& operator+=(const NDArray& rhs);
  NDArray& operator-=(const NDArray& rhs);
  NDArray& operator*=(const NDArray& rhs);
  NDArray& operator/=(const NDArray& rhs);
  NDArray& operator+=(double rhs);
  NDArray& operator-=(double rhs);
  NDArray& operator*=(double rhs);
  NDArray& operator/=(double rhs);

 private:
  struct Chunk;
  void SyncCopyFromCPUImpl(const void* data, std::size_t n, int dtype);
  void SyncCopyToCPUImpl(void* data, std::size_t n, int dtype) const;

  std::shared_ptr<Chunk> ptr_;  // the storage and its var
  TShape shape_;
  std::size_t offset_ = 0;  // in elements, for views made by Slice
  int dtype_ = kFloat32;
};

// Elementwise arithmetic on arrays of equal shape, type, context and engine
// (else std::invalid_argument naming the operation and both shapes), and
// with scalars. Each returns a new array and pushes the computation.
NDArray operator+(const NDArray& lhs, const NDArray& rhs);
NDArray operator-(const NDArray& lhs, const NDArray& rhs);
NDArray operator*(const NDArray& lhs, const NDArray& rhs);
NDArray operator/(const NDArray& lhs, const NDArray& rhs);
NDArray operator+(const NDArray& lhs, double rhs);
NDArray operator-(const NDArray& lhs, double rhs);
NDArray operator*(const NDArray& lhs, double rhs);
NDArray operator/(const NDArray& lhs, double rhs);
NDArray operator+(double lhs, const NDArray& rhs);
NDArray operator-(double lhs, const NDArray& rhs);
NDArray operator*(double lhs, const NDArray& rhs);
NDArray operator/(double lhs, const NDArray& rhs);

// Copies `from` into `*to` (same shape and type; contexts may differ),
// pushed as a read of `from` and a write of `to`.
void CopyFromTo(const NDArray& from, NDArray* to, int priority = 0);

// Fills `*out` with uniform draws from [lo, hi) / normal draws, using the
// kRandom resource of out's context from `resources` (nullptr:
// ResourceManager::Get(), which requires out to be on Engine::Get()). The
// draw is pushed writing the generator's var, so draws are serialized and
// reproducible after ResourceManager::SeedRandom. Raises
// std::invalid_argument, before pushing anything, unless lo < hi with both
// finite (and hi - lo finite) / the mean finite and the deviation finite
// and > 0, in the array's element type.
void SampleUniform(double lo, double hi, NDArray* out, ResourceManager* resources = nullptr);
void SampleGaussian(double mean, double stddev, NDArray* out, ResourceManager* resources = nullptr);

}  // namespace depengine
