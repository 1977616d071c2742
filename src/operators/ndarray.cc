// NDArray: storage with one engine var, operations pushed to the engine,
// storage freed through DeleteVariable.
#include "depengine/ndarray.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "depengine/resource.h"
#include "operators/array_overlap.h"
#include "operators/engine_util.h"
#include "operators/kernels.h"

namespace depengine {

// The storage of one or more NDArrays. Immutable after construction; the
// memory it points to is touched only by engine functions that list `var`
// (or by a caller after waiting for `var`).
struct NDArray::Chunk {
  std::shared_ptr<Engine> engine_ref;  // set when built on Engine::Get()
  Engine* engine = nullptr;
  VarHandle var = nullptr;
  void* dptr = nullptr;
  std::size_t bytes = 0;
  Context ctx;

  Chunk(Engine* e, Context c, std::size_t nbytes) : engine(e), bytes(nbytes), ctx(c) {
    if (engine == nullptr) {
      engine_ref = Engine::_GetSharedRef();
      engine = engine_ref.get();
    }
    const std::size_t rounded = (nbytes + 63) / 64 * 64;
    dptr = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (dptr == nullptr) throw std::bad_alloc();
    var = engine->NewVariable();
  }
  // Frees the memory after every function already pushed on `var`: the
  // engine runs the deleter only once they have all finished. The deleter
  // runs on the array's context; an engine that refuses that context (a
  // pool whose threads the system refused to start) runs it on CPU(0)
  // instead, rather than the exception escaping a destructor and
  // terminating the program.
  ~Chunk() {
    void* p = dptr;
    try {
      engine->DeleteVariable([p](RunContext) { std::free(p); }, ctx, var);
    } catch (const std::exception&) {
      engine->DeleteVariable([p](RunContext) { std::free(p); }, Context::CPU(), var);
    }
  }
  Chunk(const Chunk&) = delete;
  Chunk& operator=(const Chunk&) = delete;
};

namespace {

void CheckContext(Context ctx, const char* who) {
  if (ctx.dev_type == DeviceType::kGPU) {
    throw std::invalid_argument(std::string(who) +
                                ": GPU storage is not supported in this build (CPU only)");
  }
  if (ctx.dev_type != DeviceType::kCPU && ctx.dev_type != DeviceType::kCPUPinned) {
    throw std::invalid_argument(std::string(who) + ": unknown DeviceType " +
                                std::to_string(static_cast<int>(ctx.dev_type)));
  }
  if (ctx.dev_id < 0 || ctx.dev_id >= kMaxDevicesPerType) {
    throw std::invalid_argument(std::string(who) + ": dev_id " + std::to_string(ctx.dev_id) +
                                " is out of range [0, " + std::to_string(kMaxDevicesPerType) +
                                ")");
  }
}

void CheckDefined(const NDArray& a, const char* who) {
  if (a.is_none()) throw std::invalid_argument(std::string(who) + ": the array is empty");
}

// Raises unless lhs and rhs can be combined elementwise.
void CheckSame(const NDArray& lhs, const NDArray& rhs, const char* op) {
  CheckDefined(lhs, op);
  CheckDefined(rhs, op);
  if (lhs.shape() != rhs.shape()) {
    throw std::invalid_argument(std::string(op) + ": shapes " + lhs.shape().ToString() + " and " +
                                rhs.shape().ToString() + " differ");
  }
  if (lhs.dtype() != rhs.dtype()) {
    throw std::invalid_argument(std::string(op) + ": types " + TypeName(lhs.dtype()) + " and " +
                                TypeName(rhs.dtype()) + " differ");
  }
  if (lhs.ctx() != rhs.ctx()) {
    throw std::invalid_argument(std::string(op) + ": the arrays are on different contexts");
  }
  if (lhs.engine() != rhs.engine()) {
    throw std::invalid_argument(std::string(op) + ": the arrays belong to different engines");
  }
}

// Pushes `fn` reading `reads` and writing `writes` on their engine.
void PushArrays(const char* name, Engine* engine, Context ctx, SyncFn fn,
                std::initializer_list<const NDArray*> reads,
                std::initializer_list<const NDArray*> writes, int priority = 0) {
  internal::VarLists vars;
  for (const NDArray* a : reads) vars.Read(a->var());
  for (const NDArray* a : writes) vars.Write(a->var());
  vars.Finish();
  engine->PushSync(std::move(fn), ctx, vars.reads(), vars.writes(), FnProperty::kNormal, priority,
                   name);
}

template <class F>
void BinaryInto(const NDArray& lhs, const NDArray& rhs, NDArray* out, const char* name, F f) {
  CheckSame(lhs, rhs, name);
  const TBlob a = lhs.data(), b = rhs.data(), o = out->data();
  PushArrays(name, out->engine(), out->ctx(),
             [a, b, o, f](RunContext) { internal::BinaryMap(a, b, o, kWriteTo, f); }, {&lhs, &rhs},
             {out});
}

template <class F>
void UnaryInto(const NDArray& in, NDArray* out, const char* name, F f) {
  CheckDefined(in, name);
  const TBlob a = in.data(), o = out->data();
  PushArrays(name, out->engine(), out->ctx(),
             [a, o, f](RunContext) { internal::UnaryMap(a, o, kWriteTo, f); }, {&in}, {out});
}

// shape.Size(), or std::invalid_argument "<who>: <what> shape <shape>: <why>"
// for an unknown or empty shape, a negative dimension or an element count
// that overflows (TShape::Size).
TShape::index_t CheckedSize(const TShape& shape, const char* who, const char* what) {
  auto fail = [&](const std::string& why) {
    throw std::invalid_argument(std::string(who) + ": " + what + " shape " + shape.ToString() +
                                ": " + why);
  };
  if (!shape.known()) fail("the shape is unknown");
  TShape::index_t size = 0;
  try {
    size = shape.Size();
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
  if (size <= 0) fail("the shape has no elements");
  return size;
}

NDArray Like(const NDArray& a) { return NDArray(a.shape(), a.ctx(), a.engine(), a.dtype()); }

template <class F>
NDArray BinaryNew(const NDArray& lhs, const NDArray& rhs, const char* name, F f) {
  CheckSame(lhs, rhs, name);
  NDArray out = Like(lhs);
  BinaryInto(lhs, rhs, &out, name, f);
  return out;
}

template <class F>
NDArray UnaryNew(const NDArray& in, const char* name, F f) {
  CheckDefined(in, name);
  NDArray out = Like(in);
  UnaryInto(in, &out, name, f);
  return out;
}

}  // namespace

NDArray::NDArray(const TShape& shape, Context ctx, Engine* engine, int dtype)
    : shape_(shape), dtype_(dtype) {
  CheckContext(ctx, "NDArray");
  // Size() <= TShape::kMaxSize, so the byte count below cannot overflow.
  const TShape::index_t size = CheckedSize(shape, "NDArray", "cannot allocate");
  const std::size_t bytes = static_cast<std::size_t>(size) * TypeSize(dtype);
  ptr_ = std::make_shared<Chunk>(engine, ctx, bytes);
}

Context NDArray::ctx() const { return ptr_ ? ptr_->ctx : Context::CPU(); }
Engine* NDArray::engine() const { return ptr_ ? ptr_->engine : nullptr; }
VarHandle NDArray::var() const { return ptr_ ? ptr_->var : nullptr; }

TBlob NDArray::data() const {
  if (!ptr_) return TBlob();
  char* base = static_cast<char*>(ptr_->dptr) + offset_ * TypeSize(dtype_);
  return TBlob(base, shape_, dtype_, ptr_->ctx);
}

void NDArray::WaitToRead() const {
  if (ptr_) ptr_->engine->WaitForVar(ptr_->var);
}

// WaitForVar already waits for readers as well as writers, so waiting to
// write needs nothing more than waiting to read.
void NDArray::WaitToWrite() const { WaitToRead(); }

NDArray NDArray::Reshape(const TShape& shape) const {
  CheckDefined(*this, "NDArray::Reshape");
  if (CheckedSize(shape, "NDArray::Reshape", "cannot view as") != shape_.Size()) {
    throw std::invalid_argument("NDArray::Reshape: cannot view " + shape_.ToString() + " as " +
                                shape.ToString());
  }
  NDArray v = *this;
  v.shape_ = shape;
  return v;
}

NDArray NDArray::Slice(TShape::index_t begin, TShape::index_t end) const {
  CheckDefined(*this, "NDArray::Slice");
  if (begin < 0 || end <= begin || end > shape_[0]) {
    throw std::invalid_argument("NDArray::Slice: rows [" + std::to_string(begin) + ", " +
                                std::to_string(end) + ") outside " + shape_.ToString());
  }
  NDArray v = *this;
  // shape_ passed CheckedSize (constructor or Reshape), so begin * row <
  // shape_.Size() <= TShape::kMaxSize: the offset cannot overflow.
  const std::size_t row = static_cast<std::size_t>(shape_.ProdShape(1, shape_.ndim()));
  v.offset_ += static_cast<std::size_t>(begin) * row;
  v.shape_[0] = end - begin;
  return v;
}

void NDArray::SyncCopyFromCPUImpl(const void* src, std::size_t n, int dtype) {
  CheckDefined(*this, "NDArray::SyncCopyFromCPU");
  if (dtype != dtype_ || n != Size()) {
    throw std::invalid_argument(std::string("NDArray::SyncCopyFromCPU: got ") + std::to_string(n) +
                                " " + TypeName(dtype) + " elements for a " + TypeName(dtype_) +
                                " array of shape " + shape_.ToString());
  }
  void* dst = data().dptr_;
  const std::size_t bytes = n * TypeSize(dtype);
  PushArrays("SyncCopyFromCPU", engine(), ctx(),
             [dst, src, bytes](RunContext) { std::memcpy(dst, src, bytes); }, {}, {this});
  WaitToRead();
}

void NDArray::SyncCopyToCPUImpl(void* dst, std::size_t n, int dtype) const {
  CheckDefined(*this, "NDArray::SyncCopyToCPU");
  if (dtype != dtype_ || n != Size()) {
    throw std::invalid_argument(std::string("NDArray::SyncCopyToCPU: asked for ") +
                                std::to_string(n) + " " + TypeName(dtype) + " elements of a " +
                                TypeName(dtype_) + " array of shape " + shape_.ToString());
  }
  // Copied by an engine function, not after a wait on this thread: another
  // thread may push a write on the array right after the wait returns, and
  // it would run during the copy (a torn read). The function is listed as a
  // writer so that the engine's memory-ordering promise (functions writing a
  // var, then WaitForVar) covers the copy into `dst`.
  const void* src = data().dptr_;
  const std::size_t bytes = n * TypeSize(dtype);
  PushArrays("SyncCopyToCPU", engine(), ctx(),
             [dst, src, bytes](RunContext) { std::memcpy(dst, src, bytes); }, {}, {this});
  WaitToRead();
}

NDArray NDArray::Copy() const {
  CheckDefined(*this, "NDArray::Copy");
  NDArray out = Like(*this);
  CopyFromTo(*this, &out);
  return out;
}

NDArray& NDArray::operator=(double value) {
  CheckDefined(*this, "NDArray::operator=");
  const TBlob o = data();
  PushArrays("fill", engine(), ctx(),
             [o, value](RunContext) {
               SwitchType(o.type_flag_, [&](auto tag) {
                 using T = decltype(tag);
                 T* p = o.dptr<T>();
                 for (std::size_t i = 0, n = o.Size(); i < n; ++i) p[i] = static_cast<T>(value);
               });
             },
             {}, {this});
  return *this;
}

namespace {

// *self = f(*self, rhs) elementwise, with serial semantics: as if rhs were
// read whole before any element of *self is written. The loop reads each
// element before writing it, which is enough when rhs is *self or does not
// overlap it; a partly overlapping rhs is first copied to a temporary (as
// SimpleOp::Invoke does), so the common case stays copy-free.
template <class F>
void InPlace(NDArray* self, const NDArray& rhs, const char* name, F f) {
  CheckSame(*self, rhs, name);
  if (internal::OverlapsPartly(*self, rhs)) {
    const NDArray tmp = rhs.Copy();
    BinaryInto(*self, tmp, self, name, f);
    return;
  }
  BinaryInto(*self, rhs, self, name, f);
}

}  // namespace

NDArray& NDArray::operator+=(const NDArray& rhs) {
  InPlace(this, rhs, "NDArray::operator+=", internal::Plus{});
  return *this;
}
NDArray& NDArray::operator-=(const NDArray& rhs) {
  InPlace(this, rhs, "NDArray::operator-=", internal::Minus{});
  return *this;
}
NDArray& NDArray::operator*=(const NDArray& rhs) {
  InPlace(this, rhs, "NDArray::operator*=", internal::Mul{});
  return *this;
}
NDArray& NDArray::operator/=(const NDArray& rhs) {
  InPlace(this, rhs, "NDArray::operator/=", internal::Div{});
  return *this;
}
NDArray& NDArray::operator+=(double s) {
  UnaryInto(*this, this, "NDArray::operator+=", [s](auto a) { return a + s; });
  return *this;
}
NDArray& NDArray::operator-=(double s) {
  UnaryInto(*this, this, "NDArray::operator-=", [s](auto a) { return a - s; });
  return *this;
}
NDArray& NDArray::operator*=(double s) {
  UnaryInto(*this, this, "NDArray::operator*=", [s](auto a) { return a * s; });
  return *this;
}
NDArray& NDArray::operator/=(double s) {
  UnaryInto(*this, this, "NDArray::operator/=", [s](auto a) { return a / s; });
  return *this;
}

NDArray operator+(const NDArray& l, const NDArray& r) {
  return BinaryNew(l, r, "operator+", internal::Plus{});
}
NDArray operator-(const NDArray& l, const NDArray& r) {
  return BinaryNew(l, r, "operator-", internal::Minus{});
}
NDArray operator*(const NDArray& l, const NDArray& r) {
  return BinaryNew(l, r, "operator*", internal::Mul{});
}
NDArray operator/(const NDArray& l, const NDArray& r) {
  return BinaryNew(l, r, "operator/", internal::Div{});
}
NDArray operator+(const NDArray& l, double s) {
  return UnaryNew(l, "operator+", [s](auto a) { return a + s; });
}
NDArray operator-(const NDArray& l, double s) {
  return UnaryNew(l, "operator-", [s](auto a) { return a - s; });
}
NDArray operator*(const NDArray& l, double s) {
  return UnaryNew(l, "operator*", [s](auto a) { return a * s; });
}
NDArray operator/(const NDArray& l, double s) {
  return UnaryNew(l, "operator/", [s](auto a) { return a / s; });
}
NDArray operator+(double s, const NDArray& r) { return r + s; }
NDArray operator-(double s, const NDArray& r) {
  return UnaryNew(r, "operator-", [s](auto a) { return s - a; });
}
NDArray operator*(double s, const NDArray& r) { return r * s; }
NDArray operator/(double s, const NDArray& r) {
  return UnaryNew(r, "operator/", [s](auto a) { return s / a; });
}

void CopyFromTo(const NDArray& from, NDArray* to, int priority) {
  CheckDefined(from, "CopyFromTo");
  CheckDefined(*to, "CopyFromTo");
  if (from.shape() != to->shape() || from.dtype() != to->dtype()) {
    throw std::invalid_argument("CopyFromTo: cannot copy a " + std::string(TypeName(from.dtype())) +
                                " array of shape " + from.shape().ToString() + " into a " +
                                TypeName(to->dtype()) + " array of shape " +
                                to->shape().ToString());
  }
  if (from.engine() != to->engine()) {
    throw std::invalid_argument("CopyFromTo: the arrays belong to different engines");
  }
  const TBlob a = from.data(), o = to->data();
  const std::size_t bytes = a.Size() * TypeSize(a.type_flag_);
  // memmove: two slices of one storage may overlap.
  PushArrays(
      "CopyFromTo", to->engine(), to->ctx(),
      [a, o, bytes](RunContext) { std::memmove(o.dptr_, a.dptr_, bytes); }, {&from}, {to},
      priority);
}

namespace {

template <class F>
void Sample(NDArray* out, ResourceManager* rm, const char* name, F draw) {
  CheckDefined(*out, name);
  if (rm == nullptr) rm = ResourceManager::Get();
  if (rm->engine() != out->engine()) {
    throw std::invalid_argument(std::string(name) +
                                ": the resource manager and the array belong to different engines");
  }
  const Resource r = rm->Request(out->ctx(), ResourceRequest::kRandom);
  const TBlob o = out->data();
  internal::VarLists vars;
  vars.Write(out->var());
  vars.Write(r.var);
  vars.Finish();
  out->engine()->PushSync(
      [o, r, draw](RunContext) {
        SwitchType(o.type_flag_, [&](auto tag) {
          using T = decltype(tag);
          draw(r.get_random(), o.dptr<T>(), o.Size());
        });
      },
      out->ctx(), vars.reads(), vars.writes(), FnProperty::kNormal, 0, name);
}

}  // namespace

namespace {

// Raises std::invalid_argument "<who>: <why> (got <a>, <b>)" unless `ok`
// holds for a and b converted to out's element type (a float32 array makes
// 1e39 infinite).
template <class Ok>
void CheckSampleParams(const NDArray& out, const char* who, double a, double b, const char* why,
                       Ok ok) {
  CheckDefined(out, who);
  const bool good = SwitchType(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return ok(static_cast<T>(a), static_cast<T>(b));
  });
  if (!good) {
    throw std::invalid_argument(std::string(who) + ": " + why + " (got " + std::to_string(a) +
                                ", " + std::to_string(b) + ")");
  }
}

}  // namespace

void SampleUniform(double lo, double hi, NDArray* out, ResourceManager* rm) {
  // std::uniform_real_distribution requires lo <= hi and hi - lo finite;
  // [lo, hi) is empty unless lo < hi.
  CheckSampleParams(*out, "SampleUniform", lo, hi,
                    "the bounds must be finite with lo < hi in the array's type",
                    [](auto l, auto h) { return std::isfinite(h - l) && l < h; });
  Sample(out, rm, "SampleUniform", [lo, hi](RandomGenerator* g, auto* p, std::size_t n) {
    using T = std::remove_pointer_t<decltype(p)>;
    g->SampleUniform(p, n, static_cast<T>(lo), static_cast<T>(hi));
  });
}

void SampleGaussian(double mean, double stddev, NDArray* out, ResourceManager* rm) {
  // std::normal_distribution requires stddev > 0.
  CheckSampleParams(*out, "SampleGaussian", mean, stddev,
                    "the mean must be finite and the deviation finite and > 0",
                    [](auto m, auto d) { return std::isfinite(m) && std::isfinite(d) && d > 0; });
  Sample(out, rm, "SampleGaussian", [mean, stddev](RandomGenerator* g, auto* p, std::size_t n) {
    using T = std::remove_pointer_t<decltype(p)>;
    g->SampleGaussian(p, n, static_cast<T>(mean), static_cast<T>(stddev));
  });
}

}  // namespace depengine
