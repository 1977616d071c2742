// In-place SGD updates: the weight is both read and written by one engine
// function, so it is listed among the written (mutable) vars and updated
// without a new array (seed 000's reason for mutate vars). Every function
// pushed before the update that reads the weight sees the old value; every
// one pushed after sees the new value.
#pragma once

#include "depengine/ndarray.h"
#include "depengine/parameter.h"

namespace depengine {

// The hyper-parameters of SGD; Schema() parses them from key=value strings
// (lr, wd, momentum, rescale_grad, clip_gradient).
struct SGDParam {
  double lr = 0.01;           // learning rate
  double wd = 0;              // weight decay
  double momentum = 0;        // used by SGDMomUpdate
  double rescale_grad = 1;    // multiplies the gradient first
  double clip_gradient = -1;  // clip the rescaled gradient to [-c, c]; < 0: off
  static const ParamSchema<SGDParam>& Schema();
};

// weight -= lr * (clip(rescale_grad * grad) + wd * weight), pushed as a
// write of `weight` and a read of `grad`. Raises std::invalid_argument when
// shapes, types, contexts or engines differ, and, naming the field, when
// `param` holds a value SGDParam::Schema() would refuse (lr or wd negative
// or not finite, momentum outside [0, 1], rescale_grad not finite, NaN
// anywhere). `grad` may be a view of the weight's storage: the result is the
// serial one (a partly overlapping grad is copied first).
void SGDUpdate(NDArray* weight, const NDArray& grad, const SGDParam& param, int priority = 0);

// mom = momentum * mom - lr * (clip(rescale_grad * grad) + wd * weight);
// weight += mom. Pushed as a write of `weight` and `mom`, a read of `grad`.
// Raises as SGDUpdate, and std::invalid_argument when weight and mom are
// partly overlapping views of one storage. `grad` may be a view of the
// storage of either: the result is the serial one, as in SGDUpdate.
void SGDMomUpdate(NDArray* weight, const NDArray& grad, NDArray* mom, const SGDParam& param,
                  int priority = 0);

}  // namespace depengine
