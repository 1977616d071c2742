// SGD updates in place.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "depengine/optimizer.h"
#include "operators/array_overlap.h"
#include "operators/engine_util.h"

namespace depengine {

const ParamSchema<SGDParam>& SGDParam::Schema() {
  static const ParamSchema<SGDParam> schema = [] {
    ParamSchema<SGDParam> s;
    s.Field("lr", &SGDParam::lr).set_default(0.01).set_lower_bound(0.0).describe("learning rate");
    s.Field("wd", &SGDParam::wd).set_default(0.0).set_lower_bound(0.0).describe("weight decay");
    s.Field("momentum", &SGDParam::momentum).set_default(0.0).set_range(0.0, 1.0);
    // An infinite factor turns a zero gradient into NaN.
    s.Field("rescale_grad", &SGDParam::rescale_grad).set_default(1.0).set_finite();
    s.Field("clip_gradient", &SGDParam::clip_gradient)
        .set_default(-1.0)
        .describe("< 0: no clipping");
    return s;
  }();
  return schema;
}

namespace {

void Check(const NDArray& w, const NDArray& other, const char* who, const char* what) {
  if (w.is_none() || other.is_none())
    throw std::invalid_argument(std::string(who) + ": empty array");
  if (w.shape() != other.shape() || w.dtype() != other.dtype() || w.engine() != other.engine() ||
      w.ctx() != other.ctx()) {
    throw std::invalid_argument(std::string(who) + ": weight " + w.shape().ToString() + " and " +
                                what + " " + other.shape().ToString() +
                                " must have the same shape, type, context and engine");
  }
}

// Raises std::invalid_argument naming the field unless `p` holds values
// SGDParam::Schema() accepts: a set field bypasses the schema, and a NaN or
// negative learning rate would silently turn every weight into NaN.
void CheckParam(const SGDParam& p, const char* who) {
  auto fail = [&](const char* field, const char* accepts, double value) {
    throw std::invalid_argument(std::string(who) + ": parameter '" + field + "' expects " +
                                accepts + ", got " + internal::FormatValue(value));
  };
  if (!std::isfinite(p.lr) || p.lr < 0) fail("lr", "a finite number >= 0", p.lr);
  if (!std::isfinite(p.wd) || p.wd < 0) fail("wd", "a finite number >= 0", p.wd);
  if (!std::isfinite(p.momentum) || p.momentum < 0 || p.momentum > 1) {
    fail("momentum", "a finite number in [0, 1]", p.momentum);
  }
  if (!std::isfinite(p.rescale_grad)) fail("rescale_grad", "a finite number", p.rescale_grad);
  if (std::isnan(p.clip_gradient)) fail("clip_gradient", "a number", p.clip_gradient);
}

// The gradient step for one element, before the learning rate.
template <class T>
T Step(T g, T w, const SGDParam& p) {
  T r = static_cast<T>(p.rescale_grad) * g;
  if (p.clip_gradient >= 0) {
    const T c = static_cast<T>(p.clip_gradient);
    r = std::clamp(r, -c, c);
  }
  return r + static_cast<T>(p.wd) * w;
}

}  // namespace

void SGDUpdate(NDArray* weight, const NDArray& grad, const SGDParam& param, int priority) {
  Check(*weight, grad, "SGDUpdate", "grad");
  CheckParam(param, "SGDUpdate");
  // The loop writes weight[i] before it reads grad[i + 1]: a gradient that
  // partly overlaps the weight is read from a copy, so that the update sees
  // it whole, as before the update (the common case stays copy-free).
  const NDArray g_array = internal::OverlapsPartly(*weight, grad) ? grad.Copy() : grad;
  const TBlob w = weight->data(), g = g_array.data();
  internal::VarLists vars;
  vars.Read(g_array.var());
  vars.Write(weight->var());
  vars.Finish();
  weight->engine()->PushSync(
      [w, g, param](RunContext) {
        SwitchType(w.type_flag_, [&](auto tag) {
          using T = decltype(tag);
          T* wp = w.dptr<T>();
          const T* gp = g.dptr<T>();
          const T lr = static_cast<T>(param.lr);
          for (std::size_t i = 0, n = w.Size(); i < n; ++i) wp[i] -= lr * Step(gp[i], wp[i], param);
        });
      },
      weight->ctx(), vars.reads(), vars.writes(), FnProperty::kNormal, priority, "sgd_update");
}

void SGDMomUpdate(NDArray* weight, const NDArray& grad, NDArray* mom, const SGDParam& param,
                  int priority) {
  Check(*weight, grad, "SGDMomUpdate", "grad");
  Check(*weight, *mom, "SGDMomUpdate", "mom");
  CheckParam(param, "SGDMomUpdate");
  // One loop computes mom[i] and then weight[i]: with weight and mom partly
  // overlapping no order of element updates gives the two statements'
  // result, so that is refused; a gradient partly overlapping either is
  // read from a copy (as in SGDUpdate).
  if (internal::OverlapsPartly(*weight, *mom)) {
    throw std::invalid_argument(
        "SGDMomUpdate: weight and mom are partly overlapping views of one storage");
  }
  const NDArray g_array =
      internal::OverlapsPartly(*weight, grad) || internal::OverlapsPartly(*mom, grad) ? grad.Copy()
                                                                                      : grad;
  const TBlob w = weight->data(), g = g_array.data(), m = mom->data();
  internal::VarLists vars;
  vars.Read(g_array.var());
  vars.Write(weight->var());
  vars.Write(mom->var());
  vars.Finish();
  weight->engine()->PushSync(
      [w, g, m, param](RunContext) {
        SwitchType(w.type_flag_, [&](auto tag) {
          using T = decltype(tag);
          T* wp = w.dptr<T>();
          T* mp = m.dptr<T>();
          const T* gp = g.dptr<T>();
          const T lr = static_cast<T>(param.lr), mu = static_cast<T>(param.momentum);
          for (std::size_t i = 0, n = w.Size(); i < n; ++i) {
            mp[i] = mu * mp[i] - lr * Step(gp[i], wp[i], param);
            wp[i] += mp[i];
          }
        });
      },
      weight->ctx(), vars.reads(), vars.writes(), FnProperty::kNormal, priority, "sgd_mom_update");
}

}  // namespace depengine
