// Tensors as operators see them: TShape (the dimensions of an array), the
// element types, and TBlob (a typed view of memory that an operator reads or
// writes while the engine runs it). TBlob owns nothing; NDArray (ndarray.h)
// owns storage and hands out TBlobs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "depengine/engine.h"

namespace depengine {

// The element type of an array. The values match MXNet's type flags.
enum TypeFlag : int { kFloat32 = 0, kFloat64 = 1 };

// The TypeFlag of a C++ element type: DataType<float>::kFlag == kFloat32.
template <class T>
struct DataType;
template <>
struct DataType<float> {
  static constexpr TypeFlag kFlag = kFloat32;
};
template <>
struct DataType<double> {
  static constexpr TypeFlag kFlag = kFloat64;
};

// The size in bytes of one element of `type`; raises std::invalid_argument
// for an unknown flag.
std::size_t TypeSize(int type);
// "float32" or "float64"; "unknown" otherwise.
const char* TypeName(int type);

// Calls `f(T{})` with T the C++ type of `type` (float or double), so that a
// generic lambda can be written once for every element type:
//   SwitchType(blob.type_flag_, [&](auto tag) { using DType = decltype(tag); ... });
// Raises std::invalid_argument for an unknown flag.
template <class F>
decltype(auto) SwitchType(int type, F&& f) {
  switch (type) {
    case kFloat32:
      return f(float{});
    case kFloat64:
      return f(double{});
    default:
      throw std::invalid_argument("unknown element type flag " + std::to_string(type));
  }
}

// The dimensions of an array. A shape with ndim() == 0 is "unknown": shape
// inference has not determined it yet. Value type; not thread-safe to mutate
// from two threads.
class TShape {
 public:
  using index_t = std::int64_t;

  TShape() = default;
  TShape(std::initializer_list<index_t> dims) : dims_(dims) {}
  explicit TShape(std::vector<index_t> dims) : dims_(std::move(dims)) {}
  template <class It>
  TShape(It begin, It end) : dims_(begin, end) {}

  int ndim() const { return static_cast<int>(dims_.size()); }
  // True once the shape is known: at least one dimension.
  bool known() const { return !dims_.empty(); }
  index_t operator[](int i) const { return dims_[static_cast<std::size_t>(i)]; }
  index_t& operator[](int i) { return dims_[static_cast<std::size_t>(i)]; }
  const index_t* begin() const { return dims_.data(); }
  const index_t* end() const { return dims_.data() + dims_.size(); }
  const std::vector<index_t>& dims() const { return dims_; }

  // The largest element count a shape may have: its size in bytes in the
  // widest element type (8 bytes) still fits in int64, so that
  // Size() * TypeSize(type) never overflows.
  static constexpr index_t kMaxSize = INT64_MAX / 8;

  // The number of elements: the product of the dimensions (0 when unknown).
  // Raises std::invalid_argument naming the shape when a dimension is
  // negative or the product exceeds kMaxSize (so overflows are caught rather
  // than wrapped, whatever the order of the dimensions).
  index_t Size() const;
  // The product of dimensions [begin, end); raises as Size() when one of
  // them is negative or the product exceeds kMaxSize.
  index_t ProdShape(int begin, int end) const;
  // The shape viewed as a matrix: (product of all but the last dim, last dim).
  // A 1-D shape (n) becomes (1, n). Raises as Size().
  TShape FlatTo2D() const;

  // "(2,3)"; "()" when unknown.
  std::string ToString() const;
  // Parses "(2,3)", "[2,3]", "2,3" or "(2,)"; raises std::invalid_argument
  // with the offending text when it is not a list of non-negative integers.
  static TShape Parse(std::string_view text);

  friend bool operator==(const TShape& a, const TShape& b) { return a.dims_ == b.dims_; }
  friend bool operator!=(const TShape& a, const TShape& b) { return !(a == b); }

 private:
  std::vector<index_t> dims_;
};

// A typed view of memory: a data pointer, a shape, an element type and the
// device context the memory lives on. Owns nothing. An operator may touch a
// TBlob's memory only while the engine runs a function that lists the owning
// array's var (ndarray.h), or after the caller waited for that var.
// Member names follow MXNet's TBlob (dptr_, shape_, type_flag_).
struct TBlob {
  void* dptr_ = nullptr;
  TShape shape_;
  int type_flag_ = kFloat32;
  Context ctx_;

  TBlob() = default;
  TBlob(void* dptr, TShape shape, int type_flag, Context ctx = Context::CPU())
      : dptr_(dptr), shape_(std::move(shape)), type_flag_(type_flag), ctx_(ctx) {}

  // The data pointer as T*; raises std::logic_error when T does not match
  // type_flag_.
  template <class T>
  T* dptr() const {
    if (DataType<std::remove_cv_t<T>>::kFlag != type_flag_) {
      throw std::logic_error(std::string("TBlob: requested ") +
                             TypeName(DataType<std::remove_cv_t<T>>::kFlag) + " from a " +
                             TypeName(type_flag_) + " blob");
    }
    return static_cast<T*>(dptr_);
  }
  int ndim() const { return shape_.ndim(); }
  std::size_t Size() const { return static_cast<std::size_t>(shape_.Size()); }
  // The same memory viewed as a matrix (TShape::FlatTo2D).
  TBlob FlatTo2D() const { return TBlob(dptr_, shape_.FlatTo2D(), type_flag_, ctx_); }
  // The same memory with another shape of the same size; raises
  // std::invalid_argument otherwise (or for a shape Size() rejects).
  TBlob Reshape(const TShape& shape) const;
  bool empty() const { return dptr_ == nullptr; }
};

}  // namespace depengine
