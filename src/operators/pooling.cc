// Pooling: 2-D max or average pooling over NCHW input, with stride and
// zero padding. Average pooling divides by the full window (padding
// included). The padding must be smaller than the kernel in each dimension
// (as MXNet requires), so every window covers at least one input element.
// The backward pass needs the input, the output and out_grad.
#include <algorithm>
#include <limits>
#include <string>

#include "operators/op_common.h"
#include "operators/registry.h"

namespace depengine::op {
namespace {

enum PoolType { kMax, kAvg };

struct PoolingParam {
  TShape kernel;
  int pool_type = kMax;
  TShape stride;
  TShape pad;
  static const ParamSchema<PoolingParam>& Schema() {
    static const ParamSchema<PoolingParam> schema = [] {
      ParamSchema<PoolingParam> s;
      s.Field("kernel", &PoolingParam::kernel).describe("window size (h,w)");
      s.Field("pool_type", &PoolingParam::pool_type)
          .add_enum("max", kMax)
          .add_enum("avg", kAvg)
          .set_default(kMax);
      s.Field("stride", &PoolingParam::stride).set_default(TShape{1, 1}).describe("step (h,w)");
      s.Field("pad", &PoolingParam::pad)
          .set_default(TShape{0, 0})
          .describe("zero padding (h,w), smaller than kernel in each dimension");
      return s;
    }();
    return schema;
  }
};

// The geometry of one pooling call.
struct Geometry {
  TShape::index_t planes, h, w, oh, ow, kh, kw, sh, sw, ph, pw;
  Geometry(const TShape& in, const TShape& out, const PoolingParam& p)
      : planes(in[0] * in[1]),
        h(in[2]),
        w(in[3]),
        oh(out[2]),
        ow(out[3]),
        kh(p.kernel[0]),
        kw(p.kernel[1]),
        sh(p.stride[0]),
        sw(p.stride[1]),
        ph(p.pad[0]),
        pw(p.pad[1]) {}
};

class PoolingOp final : public Operator {
 public:
  explicit PoolingOp(PoolingParam p) : param_(std::move(p)) {}

  void Forward(const OpContext&, const std::vector<TBlob>& in_data,
               const std::vector<OpReqType>& req, const std::vector<TBlob>& out_data,
               const std::vector<TBlob>&) override {
    if (req[0] == kNullOp) return;
    const Geometry g(in_data[0].shape_, out_data[0].shape_, param_);
    SwitchType(out_data[0].type_flag_, [&](auto tag) {
      using T = decltype(tag);
      const T* x = in_data[0].dptr<T>();
      T* y = out_data[0].dptr<T>();
      for (TShape::index_t c = 0; c < g.planes; ++c) {
        const T* plane = x + c * g.h * g.w;
        for (TShape::index_t i = 0; i < g.oh; ++i) {
          for (TShape::index_t j = 0; j < g.ow; ++j) {
            const auto h0 = i * g.sh - g.ph, w0 = j * g.sw - g.pw;
            const auto h1 = std::min(h0 + g.kh, g.h), w1 = std::min(w0 + g.kw, g.w);
            T acc = param_.pool_type == kMax ? std::numeric_limits<T>::lowest() : T(0);
            for (auto a = std::max<TShape::index_t>(h0, 0); a < h1; ++a) {
              for (auto b = std::max<TShape::index_t>(w0, 0); b < w1; ++b) {
                const T v = plane[a * g.w + b];
                acc = param_.pool_type == kMax ? std::max(acc, v) : acc + v;
              }
            }
            if (param_.pool_type == kAvg) acc /= static_cast<T>(g.kh * g.kw);
            Assign(y[(c * g.oh + i) * g.ow + j], req[0], acc);
          }
        }
      }
    });
  }

  void Backward(const OpContext&, const std::vector<TBlob>& out_grad,
                const std::vector<TBlob>& in_data, const std::vector<TBlob>& out_data,
                const std::vector<OpReqType>& req, const std::vector<TBlob>& in_grad,
                const std::vector<TBlob>&) override {
    if (req[0] == kNullOp) return;
    const Geometry g(in_data[0].shape_, out_data[0].shape_, param_);
    SwitchType(in_grad[0].type_flag_, [&](auto tag) {
      using T = decltype(tag);
      const T* x = in_data[0].dptr<T>();
      const T* y = out_data[0].dptr<T>();
      const T* gy = out_grad[0].dptr<T>();
      T* gx = in_grad[0].dptr<T>();
      if (req[0] != kAddTo) std::fill(gx, gx + in_grad[0].Size(), T(0));
      for (TShape::index_t c = 0; c < g.planes; ++c) {
        const T* plane = x + c * g.h * g.w;
        T* gplane = gx + c * g.h * g.w;
        for (TShape::index_t i = 0; i < g.oh; ++i) {
          for (TShape::index_t j = 0; j < g.ow; ++j) {
            const auto o = (c * g.oh + i) * g.ow + j;
            const auto h0 = i * g.sh - g.ph, w0 = j * g.sw - g.pw;
            const auto h1 = std::min(h0 + g.kh, g.h), w1 = std::min(w0 + g.kw, g.w);
            bool routed = false;  // max: the gradient goes to the first maximum only
            for (auto a = std::max<TShape::index_t>(h0, 0); a < h1 && !routed; ++a) {
              for (auto b = std::max<TShape::index_t>(w0, 0); b < w1; ++b) {
                if (param_.pool_type == kMax) {
                  if (plane[a * g.w + b] == y[o]) {
                    gplane[a * g.w + b] += gy[o];
                    routed = true;
                    break;
                  }
                } else {
                  gplane[a * g.w + b] += gy[o] / static_cast<T>(g.kh * g.kw);
                }
              }
            }
          }
        }
      }
    });
  }

 private:
  PoolingParam param_;
};

class PoolingProp final : public ParamProperty<PoolingProp, PoolingParam> {
 public:
  static constexpr const char* kName = "Pooling";

  void Validate() const {
    auto check = [](const char* name, const TShape& s, int min) {
      if (s.ndim() != 2 || s[0] < min || s[1] < min) {
        throw ParamError(std::string(kName) + ": parameter '" + name +
                         "' expects a 2-D shape (h,w) of integers >= " + std::to_string(min) +
                         ", got " + s.ToString());
      }
    };
    check("kernel", param_.kernel, 1);
    check("stride", param_.stride, 1);
    check("pad", param_.pad, 0);
    // With pad >= kernel a window can lie entirely in the padding, where max
    // pooling has no element to take (it returned -FLT_MAX). With pad <
    // kernel the first window reaches row kernel - pad > 0 and the last one
    // starts at most at height + pad - kernel < height, so each covers input.
    if (param_.pad[0] >= param_.kernel[0] || param_.pad[1] >= param_.kernel[1]) {
      throw ParamError(std::string(kName) + ": parameter 'pad' " + param_.pad.ToString() +
                       " must be smaller than 'kernel' " + param_.kernel.ToString() +
                       " in each dimension (else a window can lie entirely in the padding)");
    }
  }

  bool InferShape(std::vector<TShape>* in_shape, std::vector<TShape>* out_shape,
                  std::vector<TShape>*) const override {
    if (in_shape->size() != 1) throw ShapeError(std::string(kName) + ": expected 1 input (data)");
    const TShape& d = (*in_shape)[0];
    if (!d.known()) return false;
    if (d.ndim() != 4) {
      throw ShapeError(std::string(kName) + ": data has shape " + d.ToString() +
                       " but 2-D pooling needs 4 dimensions (batch, channel, height, width)");
    }
    const TShape& k = param_.kernel;
    const TShape& s = param_.stride;
    const TShape& p = param_.pad;
    if (d[2] + 2 * p[0] < k[0] || d[3] + 2 * p[1] < k[1]) {
      throw ShapeError(
          std::string(kName) + ": kernel " + k.ToString() + " is larger than the padded input " +
          TShape{d[2] + 2 * p[0], d[3] + 2 * p[1]}.ToString() + " of data " + d.ToString());
    }
    out_shape->resize(1);
    ShapeAssign(kName, "output", &(*out_shape)[0],
                TShape{d[0], d[1], (d[2] + 2 * p[0] - k[0]) / s[0] + 1,
                       (d[3] + 2 * p[1] - k[1]) / s[1] + 1});
    return true;
  }
  Operator* CreateOperator(Context) const override { return new PoolingOp(param_); }
};

}  // namespace

void RegisterPooling() {
  internal::AddOperator(
      PoolingProp::kName, [] { return std::make_unique<PoolingProp>(); },
      "2-D max or average pooling over NCHW data");
}

}  // namespace depengine::op
