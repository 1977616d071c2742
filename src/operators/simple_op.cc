// SimpleOp: registration setters, NDArray invocation, and the adapter that
// makes every simple op an OperatorProperty.
#include "depengine/simple_op.h"

#include <mutex>
#include <set>
#include <stdexcept>
#include <string>

#include "operators/engine_util.h"
#include "operators/registry.h"

namespace depengine {
namespace {

std::logic_error RegError(const std::string& op, const std::string& what) {
  return std::logic_error("SimpleOp " + op + ": " + what);
}

// The name `name` in storage that lives as long as the program, one copy
// per distinct name. Never destroyed: an engine that outlives the static
// objects (Engine::Get()) may still run functions named by it at exit.
const char* StableName(const std::string& name) {
  static std::mutex* const mu = new std::mutex;
  static std::set<std::string>* const names = new std::set<std::string>;  // guarded by *mu
  std::lock_guard<std::mutex> lock(*mu);
  return names->insert(name).first->c_str();  // set nodes never move
}

}  // namespace

// ---------------------------------------------------------------------------
// Registration.

SimpleOpRegEntry::SimpleOpRegEntry(std::string name)
    : name_(std::move(name)), stable_name_(StableName(name_)) {}

void SimpleOpRegEntry::SetArity(int n, const char* what) {
  if (num_inputs_ != 0 && num_inputs_ != n) {
    throw RegError(name_, std::string(what) + " takes " + std::to_string(n) +
                              " inputs but the op already has " + std::to_string(num_inputs_));
  }
  num_inputs_ = n;
}

static void CheckDev(const std::string& op, DeviceType dev) {
  if (dev != DeviceType::kCPU) throw RegError(op, "only CPU functions are supported in this build");
}

// A null function pointer would be called on an engine worker later.
template <class Fn>
static void CheckFn(const std::string& op, Fn fn, const char* what) {
  if (fn == nullptr) throw RegError(op, std::string(what) + " is null");
}

SimpleOpRegEntry& SimpleOpRegEntry::set_shape_function(UnaryShapeFunction fn) {
  CheckFn(name_, fn, "the shape function");
  SetArity(1, "a unary shape function");
  unary_shape_ = fn;
  return *this;
}
SimpleOpRegEntry& SimpleOpRegEntry::set_shape_function(BinaryShapeFunction fn) {
  CheckFn(name_, fn, "the shape function");
  SetArity(2, "a binary shape function");
  binary_shape_ = fn;
  return *this;
}

SimpleOpRegEntry& SimpleOpRegEntry::set_function(DeviceType dev, UnaryFunction fn,
                                                 SimpleOpInplaceOption inplace,
                                                 bool register_symbolic) {
  CheckDev(name_, dev);
  CheckFn(name_, fn, "the forward function");
  SetArity(1, "a unary function");
  if (inplace != kNoInplace && inplace != kInplaceInOut) {
    throw RegError(name_, "a unary function accepts kNoInplace or kInplaceInOut");
  }
  unary_fn_ = fn;
  fwd_inplace_ = inplace;
  symbolic_ = register_symbolic;
  return *this;
}
SimpleOpRegEntry& SimpleOpRegEntry::set_function(DeviceType dev, BinaryFunction fn,
                                                 SimpleOpInplaceOption inplace,
                                                 bool register_symbolic) {
  CheckDev(name_, dev);
  CheckFn(name_, fn, "the forward function");
  SetArity(2, "a binary function");
  if (inplace != kNoInplace && inplace != kInplaceLhsOut) {
    throw RegError(name_, "a binary function accepts kNoInplace or kInplaceLhsOut");
  }
  binary_fn_ = fn;
  fwd_inplace_ = inplace;
  symbolic_ = register_symbolic;
  return *this;
}

void SimpleOpRegEntry::SetGrad(SimpleOpGradKind kind, int arity, SimpleOpInplaceOption inplace,
                               DeviceType dev) {
  CheckDev(name_, dev);
  SetArity(arity, "a gradient function");
  const SimpleOpInplaceOption allowed = arity == 1 ? kInplaceOutIn : kInplaceOutLhs;
  if (inplace != kNoInplace && inplace != allowed) {
    throw RegError(name_, arity == 1 ? "a unary gradient accepts kNoInplace or kInplaceOutIn"
                                     : "a binary gradient accepts kNoInplace or kInplaceOutLhs");
  }
  grad_kind_ = kind;
  bwd_inplace_ = inplace;
}

SimpleOpRegEntry& SimpleOpRegEntry::set_gradient(DeviceType dev, UnaryGradFunctionT0 fn,
                                                 SimpleOpInplaceOption inplace) {
  CheckFn(name_, fn, "the gradient function");
  SetGrad(SimpleOpGradKind::kOutGradOnly, 1, inplace, dev);
  unary_grad0_ = fn;
  return *this;
}
SimpleOpRegEntry& SimpleOpRegEntry::set_gradient(DeviceType dev, UnaryGradFunctionT1 fn,
                                                 SimpleOpInplaceOption inplace) {
  CheckFn(name_, fn, "the gradient function");
  SetGrad(SimpleOpGradKind::kOutValue, 1, inplace, dev);
  unary_grad1_ = fn;
  return *this;
}
SimpleOpRegEntry& SimpleOpRegEntry::set_gradient(DeviceType dev, UnaryGradFunctionT2 fn,
                                                 SimpleOpInplaceOption inplace) {
  CheckFn(name_, fn, "the gradient function");
  SetGrad(SimpleOpGradKind::kInputs, 1, inplace, dev);
  unary_grad2_ = fn;
  return *this;
}
SimpleOpRegEntry& SimpleOpRegEntry::set_gradient(DeviceType dev, BinaryGradFunctionT0 fn,
                                                 SimpleOpInplaceOption inplace) {
  CheckFn(name_, fn, "the gradient function");
  SetGrad(SimpleOpGradKind::kOutGradOnly, 2, inplace, dev);
  binary_grad0_ = fn;
  return *this;
}
SimpleOpRegEntry& SimpleOpRegEntry::set_gradient(DeviceType dev, BinaryGradFunctionT1 fn,
                                                 SimpleOpInplaceOption inplace) {
  CheckFn(name_, fn, "the gradient function");
  SetGrad(SimpleOpGradKind::kOutValue, 2, inplace, dev);
  binary_grad1_ = fn;
  return *this;
}
SimpleOpRegEntry& SimpleOpRegEntry::set_gradient(DeviceType dev, BinaryGradFunctionT2 fn,
                                                 SimpleOpInplaceOption inplace) {
  CheckFn(name_, fn, "the gradient function");
  SetGrad(SimpleOpGradKind::kInputs, 2, inplace, dev);
  binary_grad2_ = fn;
  return *this;
}

SimpleOpRegEntry& SimpleOpRegEntry::set_enable_scalar(bool enable) {
  if (enable && enable_kwargs_) throw RegError(name_, "scalar and kwargs cannot both be enabled");
  enable_scalar_ = enable;
  return *this;
}
SimpleOpRegEntry& SimpleOpRegEntry::set_enable_kwargs(bool enable) {
  if (enable && enable_scalar_) throw RegError(name_, "scalar and kwargs cannot both be enabled");
  enable_kwargs_ = enable;
  return *this;
}
SimpleOpRegEntry& SimpleOpRegEntry::set_resource_request(ResourceRequest req) {
  resources_ = {req};
  return *this;
}
SimpleOpRegEntry& SimpleOpRegEntry::set_resource_request(const std::vector<ResourceRequest>& reqs) {
  resources_ = reqs;
  return *this;
}
SimpleOpRegEntry& SimpleOpRegEntry::describe(std::string description) {
  description_ = std::move(description);
  return *this;
}

// ---------------------------------------------------------------------------
// Calling the registered functions.

TShape SimpleOpRegEntry::InferShape(const std::vector<TShape>& in, const EnvArguments& env) const {
  if (static_cast<int>(in.size()) != num_inputs_) {
    throw ShapeError(name_ + ": expected " + std::to_string(num_inputs_) + " inputs, got " +
                     std::to_string(in.size()));
  }
  if (num_inputs_ == 1) return unary_shape_ ? unary_shape_(in[0], env) : in[0];
  if (binary_shape_) return binary_shape_(in[0], in[1], env);
  if (in[0] != in[1]) {
    throw ShapeError(name_ + ": lhs has shape " + in[0].ToString() + " but rhs has shape " +
                     in[1].ToString() + "; they must be equal");
  }
  return in[0];
}

void SimpleOpRegEntry::CallForward(const std::vector<TBlob>& inputs, const EnvArguments& env,
                                   TBlob* out, OpReqType req, RunContext ctx) const {
  if (num_inputs_ == 1) {
    if (unary_fn_ == nullptr) throw std::logic_error("SimpleOp " + name_ + ": no forward function");
    unary_fn_(inputs[0], env, out, req, ctx);
  } else {
    if (binary_fn_ == nullptr)
      throw std::logic_error("SimpleOp " + name_ + ": no forward function");
    binary_fn_(inputs[0], inputs[1], env, out, req, ctx);
  }
}

void SimpleOpRegEntry::CallBackward(const OutputGrad& out_grad, const OutputValue& out_value,
                                    const std::vector<TBlob>& inputs, const EnvArguments& env,
                                    const std::vector<TBlob*>& in_grads,
                                    const std::vector<OpReqType>& req, RunContext ctx) const {
  if (grad_kind_ == SimpleOpGradKind::kNone) {
    throw std::logic_error("SimpleOp " + name_ + ": no gradient function");
  }
  if (num_inputs_ == 1) {
    switch (grad_kind_) {
      case SimpleOpGradKind::kOutGradOnly:
        unary_grad0_(out_grad, env, in_grads[0], req[0], ctx);
        break;
      case SimpleOpGradKind::kOutValue:
        unary_grad1_(out_grad, out_value, env, in_grads[0], req[0], ctx);
        break;
      default: {
        Input0 in0;
        in0.data = inputs[0];
        unary_grad2_(out_grad, in0, env, in_grads[0], req[0], ctx);
        break;
      }
    }
    return;
  }
  switch (grad_kind_) {
    case SimpleOpGradKind::kOutGradOnly:
      binary_grad0_(out_grad, env, in_grads[0], in_grads[1], req[0], req[1], ctx);
      break;
    case SimpleOpGradKind::kOutValue:
      binary_grad1_(out_grad, out_value, env, in_grads[0], in_grads[1], req[0], req[1], ctx);
      break;
    default: {
      Input0 in0;
      in0.data = inputs[0];
      Input1 in1;
      in1.data = inputs[1];
      binary_grad2_(out_grad, in0, in1, env, in_grads[0], in_grads[1], req[0], req[1], ctx);
      break;
    }
  }
}

// ---------------------------------------------------------------------------
// NDArray invocation.

namespace {

// The EnvArguments of one call, checked against what the op enables.
EnvArguments MakeEnv(const SimpleOpRegEntry& e, double scalar, bool has_scalar,
                     const KwArgs& kwargs) {
  EnvArguments env;
  if (e.enable_scalar()) {
    if (!has_scalar) {
      throw ParamError(e.name() + ": required parameter 'scalar' (a number) is missing");
    }
    env.scalar = scalar;
  } else if (has_scalar) {
    throw ParamError(e.name() + ": takes no scalar argument");
  }
  if (!kwargs.empty() && !e.enable_kwargs()) {
    throw ParamError(
        e.name() + ": unknown parameter '" + kwargs.front().first +
        "'; accepted parameters: " + (e.enable_scalar() ? "scalar (a number)" : "none"));
  }
  env.kwargs = kwargs;
  return env;
}

}  // namespace

void SimpleOpRegEntry::Invoke(const std::vector<NDArray>& inputs, const SimpleOpCall& call,
                              NDArray* out) const {
  if (!has_function())
    throw std::logic_error("SimpleOp " + name_ + ": no forward function registered");
  if (static_cast<int>(inputs.size()) != num_inputs_) {
    throw std::invalid_argument(name_ + ": expected " + std::to_string(num_inputs_) +
                                " input arrays, got " + std::to_string(inputs.size()));
  }
  for (const NDArray& a : inputs) {
    if (a.is_none()) throw std::invalid_argument(name_ + ": an input array is empty");
    if (a.engine() != inputs[0].engine() || a.ctx() != inputs[0].ctx() ||
        a.dtype() != inputs[0].dtype()) {
      throw std::invalid_argument(name_ + ": inputs must share engine, context and type");
    }
  }
  // Keyword "scalar" in call.kwargs is accepted as the scalar, so that the
  // NDArray and operator forms take the same key=value arguments.
  KwArgs kwargs = call.kwargs;
  double scalar = call.scalar;
  bool has_scalar = enable_scalar_;
  if (enable_scalar_) {
    for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
      if (it->first == "scalar") {
        if (!internal::ParseValue(it->second, &scalar)) {
          throw ParamError(name_ + ": parameter 'scalar' expects a number, got '" + it->second +
                           "'");
        }
        kwargs.erase(it);
        break;
      }
    }
  }
  EnvArguments env = MakeEnv(*this, scalar, has_scalar, kwargs);

  std::vector<TShape> shapes;
  shapes.reserve(inputs.size());
  for (const NDArray& a : inputs) shapes.push_back(a.shape());
  const TShape shape = InferShape(shapes, env);
  Engine* engine = inputs[0].engine();
  const Context ctx = inputs[0].ctx();
  if (out->is_none()) {
    *out = NDArray(shape, ctx, engine, inputs[0].dtype());
  } else if (out->shape() != shape || out->dtype() != inputs[0].dtype() ||
             out->engine() != engine) {
    throw ShapeError(name_ + ": the output array has shape " + out->shape().ToString() + " (" +
                     TypeName(out->dtype()) + ") but the result has shape " + shape.ToString() +
                     " (" + TypeName(inputs[0].dtype()) + ")");
  }

  // Writing into an input: in place when allowed, else through a temporary.
  OpReqType req = kWriteTo;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!out->SharesStorageWith(inputs[i])) continue;
    const bool exact = out->data().dptr_ == inputs[i].data().dptr_;
    const bool allowed = i == 0 && exact && fwd_inplace_ != kNoInplace &&
                         !(inputs.size() == 2 && out->SharesStorageWith(inputs[1]));
    if (!allowed) {
      NDArray tmp;
      Invoke(inputs, call, &tmp);
      CopyFromTo(tmp, out);
      return;
    }
    req = kWriteInplace;
  }

  internal::VarLists vars;
  for (const NDArray& a : inputs) vars.Read(a.var());
  vars.Write(out->var());
  if (!resources_.empty()) {
    ResourceManager* rm = call.resources != nullptr ? call.resources : ResourceManager::Get();
    if (rm->engine() != engine) {
      throw std::invalid_argument(
          name_ + ": the resource manager and the arrays belong to different engines");
    }
    for (const ResourceRequest& r : resources_) {
      env.resource.push_back(rm->Request(ctx, r));
      vars.Write(env.resource.back().var);
    }
  }
  vars.Finish();
  std::vector<TBlob> in_blobs;
  in_blobs.reserve(inputs.size());
  for (const NDArray& a : inputs) in_blobs.push_back(a.data());
  const TBlob out_blob = out->data();
  // The function copies what it calls instead of pointing at this entry,
  // which need not be registered (nor outlive the function).
  const UnaryFunction unary = unary_fn_;
  const BinaryFunction binary = binary_fn_;
  engine->PushSync(
      [unary, binary, in_blobs, out_blob, env, req](RunContext rctx) {
        TBlob o = out_blob;
        if (unary != nullptr) {
          unary(in_blobs[0], env, &o, req, rctx);
        } else {
          binary(in_blobs[0], in_blobs[1], env, &o, req, rctx);
        }
      },
      ctx, vars.reads(), vars.writes(), FnProperty::kNormal, 0, stable_name_);
}

NDArray SimpleOpRegEntry::Invoke(const std::vector<NDArray>& inputs,
                                 const SimpleOpCall& call) const {
  NDArray out;
  Invoke(inputs, call, &out);
  return out;
}

// ---------------------------------------------------------------------------
// The operator adapter.

namespace {

class SimpleOpOperator final : public Operator {
 public:
  SimpleOpOperator(const SimpleOpRegEntry* e, EnvArguments env) : e_(e), env_(std::move(env)) {}

  void Forward(const OpContext& ctx, const std::vector<TBlob>& in_data,
               const std::vector<OpReqType>& req, const std::vector<TBlob>& out_data,
               const std::vector<TBlob>&) override {
    EnvArguments env = env_;
    env.resource = ctx.requested;
    TBlob out = out_data[0];
    e_->CallForward(in_data, env, &out, req[0], ctx.run_ctx);
  }

  void Backward(const OpContext& ctx, const std::vector<TBlob>& out_grad,
                const std::vector<TBlob>& in_data, const std::vector<TBlob>& out_data,
                const std::vector<OpReqType>& req, const std::vector<TBlob>& in_grad,
                const std::vector<TBlob>&) override {
    EnvArguments env = env_;
    env.resource = ctx.requested;
    OutputGrad og;
    og.data = out_grad[0];
    OutputValue ov;
    if (!out_data.empty()) ov.data = out_data[0];
    std::vector<TBlob> grads = in_grad;
    std::vector<TBlob*> ptrs;
    ptrs.reserve(grads.size());
    for (TBlob& g : grads) ptrs.push_back(&g);
    e_->CallBackward(og, ov, in_data, env, ptrs, req, ctx.run_ctx);
  }

 private:
  const SimpleOpRegEntry* e_;
  EnvArguments env_;  // scalar and kwargs; resources come per call
};

class SimpleOpProperty final : public OperatorProperty {
 public:
  explicit SimpleOpProperty(const SimpleOpRegEntry* e) : e_(e) {}

  void Init(const KwArgs& kwargs) override {
    double scalar = 0;
    bool has_scalar = false;
    KwArgs rest;
    for (const auto& [k, v] : kwargs) {
      if (e_->enable_scalar() && k == "scalar") {
        if (!internal::ParseValue(v, &scalar)) {
          throw ParamError(e_->name() + ": parameter 'scalar' expects a number, got '" + v + "'");
        }
        has_scalar = true;
      } else {
        rest.emplace_back(k, v);
      }
    }
    env_ = MakeEnv(*e_, scalar, has_scalar, rest);
  }
  std::map<std::string, std::string> GetParams() const override {
    std::map<std::string, std::string> m(env_.kwargs.begin(), env_.kwargs.end());
    if (e_->enable_scalar()) m["scalar"] = internal::FormatValue(env_.scalar);
    return m;
  }
  std::vector<std::string> ListArguments() const override {
    if (e_->num_inputs() == 1) return {"data"};
    return {"lhs", "rhs"};
  }
  bool InferShape(std::vector<TShape>* in_shape, std::vector<TShape>* out_shape,
                  std::vector<TShape>*) const override {
    out_shape->resize(1);
    std::vector<TShape>& in = *in_shape;
    TShape& out = (*out_shape)[0];
    if (in.size() != static_cast<std::size_t>(e_->num_inputs())) {
      throw ShapeError(e_->name() + ": expected " + std::to_string(e_->num_inputs()) + " inputs");
    }
    // With the default shape function every shape equals every other one,
    // so a known shape fills in the unknown ones.
    if (IsDefaultShape()) {
      TShape known = out;
      for (const TShape& s : in) {
        if (s.known()) known = s;
      }
      if (!known.known()) return false;
      for (TShape& s : in) {
        if (!s.known()) s = known;
      }
    }
    for (const TShape& s : in) {
      if (!s.known()) return false;
    }
    ShapeAssign(e_->name(), "output", &out, e_->InferShape(in, env_));
    return true;
  }
  std::unique_ptr<OperatorProperty> Copy() const override {
    return std::make_unique<SimpleOpProperty>(*this);
  }
  Operator* CreateOperator(Context ctx) const override {
    if (ctx.dev_type == DeviceType::kGPU) {
      throw std::invalid_argument(e_->name() + ": no GPU function in this build");
    }
    return new SimpleOpOperator(e_, env_);
  }
  std::string TypeString() const override { return e_->name(); }
  std::vector<ResourceRequest> ForwardResource(const std::vector<TShape>&) const override {
    return e_->resource_requests();
  }
  std::vector<ResourceRequest> BackwardResource(const std::vector<TShape>&) const override {
    return e_->resource_requests();
  }
  std::vector<int> DeclareBackwardDependency(const std::vector<int>& out_grad,
                                             const std::vector<int>& in_data,
                                             const std::vector<int>& out_data) const override {
    switch (e_->grad_kind()) {
      case SimpleOpGradKind::kNone:
        return {};
      case SimpleOpGradKind::kOutGradOnly:
        return {out_grad[0]};
      case SimpleOpGradKind::kOutValue:
        return {out_grad[0], out_data[0]};
      case SimpleOpGradKind::kInputs: {
        std::vector<int> deps{out_grad[0]};
        deps.insert(deps.end(), in_data.begin(), in_data.end());
        return deps;
      }
    }
    return {};
  }
  std::vector<std::pair<int, void*>> ForwardInplaceOption(
      const std::vector<int>& in_data, const std::vector<void*>& out_data) const override {
    if (e_->forward_inplace() == kInplaceInOut || e_->forward_inplace() == kInplaceLhsOut) {
      return {{in_data[0], out_data[0]}};
    }
    return {};
  }
  std::vector<std::pair<int, void*>> BackwardInplaceOption(
      const std::vector<int>& out_grad, const std::vector<int>&, const std::vector<int>&,
      const std::vector<void*>& in_grad) const override {
    if (e_->backward_inplace() == kInplaceOutIn || e_->backward_inplace() == kInplaceOutLhs) {
      return {{out_grad[0], in_grad[0]}};
    }
    return {};
  }

 private:
  // Without a shape function, every input and the output share one shape.
  bool IsDefaultShape() const { return !e_->has_shape_function(); }
  const SimpleOpRegEntry* e_;
  EnvArguments env_;
};

}  // namespace

namespace internal {
std::unique_ptr<OperatorProperty> MakeSimpleOpProperty(const SimpleOpRegEntry& entry) {
  if (!entry.has_function()) {
    throw std::logic_error("SimpleOp " + entry.name() + ": no forward function registered");
  }
  return std::make_unique<SimpleOpProperty>(&entry);
}
}  // namespace internal

}  // namespace depengine
