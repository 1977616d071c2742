// SimpleOp, the unified operator API of seed 000: a unary or binary
// function is registered once, with an optional shape function, a forward
// function, a gradient function classified by what it needs, EnvArguments
// (a scalar or key=value arguments, and resources) and in-place options.
// One registration makes the function usable on NDArrays
// (SimpleOpRegEntry::Invoke) and as an Operator in a graph
// (OperatorProperty::Create(name)).
//
// The smooth_l1 walk-through of the seed, in this API (see
// docs/operators.md and src/operators/smooth_l1.cc):
//
//   void SmoothL1Forward(const TBlob& src, const EnvArguments& env, TBlob* ret,
//                        OpReqType req, RunContext ctx);
//   void SmoothL1BackwardUseIn(const OutputGrad& out_grad, const Input0& in_data0,
//                              const EnvArguments& env, TBlob* in_grad,
//                              OpReqType req, RunContext ctx);
//   DEPENGINE_REGISTER_SIMPLE_OP(smooth_l1)
//       .set_function(DeviceType::kCPU, SmoothL1Forward, kNoInplace)
//       .set_gradient(DeviceType::kCPU, SmoothL1BackwardUseIn, kInplaceOutIn)
//       .set_enable_scalar(true)
//       .describe("Calculate Smooth L1 Loss(lhs, scalar)");
//
// Registration happens before the functions are used (static
// initialization or the start of main) and is not thread-safe against
// concurrent Invoke; Find and Invoke are callable from any thread after.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "depengine/ndarray.h"
#include "depengine/operator.h"
#include "depengine/resource.h"
#include "depengine/tensor.h"

namespace depengine {

// Extra arguments of a simple op: a scalar (set_enable_scalar) or key=value
// arguments (set_enable_kwargs), never both, and the resources asked for
// with set_resource_request, in order.
struct EnvArguments {
  double scalar = 0;
  KwArgs kwargs;
  std::vector<Resource> resource;
};

// The arguments of a gradient function, named by role.
struct GradFunctionArgument {
  TBlob data;
};
struct Input0 : GradFunctionArgument {};
struct Input1 : GradFunctionArgument {};
struct OutputValue : GradFunctionArgument {};
struct OutputGrad : GradFunctionArgument {};

// Shape functions: the output shape from the input shapes; raise ShapeError
// when they do not fit. Default: the input shape (binary: both inputs must
// have the same shape).
using UnaryShapeFunction = TShape (*)(const TShape& src, const EnvArguments& env);
using BinaryShapeFunction = TShape (*)(const TShape& lhs, const TShape& rhs,
                                       const EnvArguments& env);

// Forward functions: write the result into *ret as `req` says.
using UnaryFunction = void (*)(const TBlob& src, const EnvArguments& env, TBlob* ret, OpReqType req,
                               RunContext ctx);
using BinaryFunction = void (*)(const TBlob& lhs, const TBlob& rhs, const EnvArguments& env,
                                TBlob* ret, OpReqType req, RunContext ctx);

// Gradient functions, by what they need besides out_grad.
// T0: out_grad only.
using UnaryGradFunctionT0 = void (*)(const OutputGrad& out_grad, const EnvArguments& env,
                                     TBlob* in_grad, OpReqType req, RunContext ctx);
// T1: out_grad and the output value.
using UnaryGradFunctionT1 = void (*)(const OutputGrad& out_grad, const OutputValue& out_value,
                                     const EnvArguments& env, TBlob* in_grad, OpReqType req,
                                     RunContext ctx);
// T2: out_grad and the input.
using UnaryGradFunctionT2 = void (*)(const OutputGrad& out_grad, const Input0& in_data0,
                                     const EnvArguments& env, TBlob* in_grad, OpReqType req,
                                     RunContext ctx);
using BinaryGradFunctionT0 = void (*)(const OutputGrad& out_grad, const EnvArguments& env,
                                      TBlob* lhs_grad, TBlob* rhs_grad, OpReqType req_lhs_grad,
                                      OpReqType req_rhs_grad, RunContext ctx);
using BinaryGradFunctionT1 = void (*)(const OutputGrad& out_grad, const OutputValue& out_value,
                                      const EnvArguments& env, TBlob* lhs_grad, TBlob* rhs_grad,
                                      OpReqType req_lhs_grad, OpReqType req_rhs_grad,
                                      RunContext ctx);
using BinaryGradFunctionT2 = void (*)(const OutputGrad& out_grad, const Input0& lhs,
                                      const Input1& rhs, const EnvArguments& env, TBlob* lhs_grad,
                                      TBlob* rhs_grad, OpReqType req_lhs_grad,
                                      OpReqType req_rhs_grad, RunContext ctx);

// Which buffers may share memory.
enum SimpleOpInplaceOption {
  kNoInplace,      // none
  kInplaceInOut,   // input and output (unary forward)
  kInplaceOutIn,   // out_grad and in_grad (unary backward)
  kInplaceLhsOut,  // lhs and output (binary forward)
  kInplaceOutLhs   // out_grad and lhs_grad (binary backward)
};

// What a gradient function needs besides out_grad.
enum class SimpleOpGradKind { kNone, kOutGradOnly, kOutValue, kInputs };

// Per-call options of SimpleOpRegEntry::Invoke.
struct SimpleOpCall {
  double scalar = 0;  // env.scalar of ops with set_enable_scalar (ignored otherwise)
  // Key=value arguments: requires set_enable_kwargs, except "scalar",
  // which sets the scalar (so both forms accept the operator's kwargs).
  KwArgs kwargs{};
  // Serves set_resource_request (nullptr: ResourceManager::Get()).
  ResourceManager* resources = nullptr;
};

// One registered simple op. Built by DEPENGINE_REGISTER_SIMPLE_OP; the
// setters chain and raise std::logic_error when they contradict each other
// (e.g. a unary function on a binary op, scalar together with kwargs) or
// are given a null function.
class SimpleOpRegEntry {
 public:
  explicit SimpleOpRegEntry(std::string name);

  SimpleOpRegEntry& set_shape_function(UnaryShapeFunction fn);
  SimpleOpRegEntry& set_shape_function(BinaryShapeFunction fn);
  // `dev` must be DeviceType::kCPU in this build. `register_symbolic`
  // false keeps the op off the operator registry (NDArray use only).
  SimpleOpRegEntry& set_function(DeviceType dev, UnaryFunction fn,
                                 SimpleOpInplaceOption inplace = kNoInplace,
                                 bool register_symbolic = true);
  SimpleOpRegEntry& set_function(DeviceType dev, BinaryFunction fn,
                                 SimpleOpInplaceOption inplace = kNoInplace,
                                 bool register_symbolic = true);
  SimpleOpRegEntry& set_gradient(DeviceType dev, UnaryGradFunctionT0 fn,
                                 SimpleOpInplaceOption inplace = kNoInplace);
  SimpleOpRegEntry& set_gradient(DeviceType dev, UnaryGradFunctionT1 fn,
                                 SimpleOpInplaceOption inplace = kNoInplace);
  SimpleOpRegEntry& set_gradient(DeviceType dev, UnaryGradFunctionT2 fn,
                                 SimpleOpInplaceOption inplace = kNoInplace);
  SimpleOpRegEntry& set_gradient(DeviceType dev, BinaryGradFunctionT0 fn,
                                 SimpleOpInplaceOption inplace = kNoInplace);
  SimpleOpRegEntry& set_gradient(DeviceType dev, BinaryGradFunctionT1 fn,
                                 SimpleOpInplaceOption inplace = kNoInplace);
  SimpleOpRegEntry& set_gradient(DeviceType dev, BinaryGradFunctionT2 fn,
                                 SimpleOpInplaceOption inplace = kNoInplace);
  SimpleOpRegEntry& set_enable_scalar(bool enable);
  SimpleOpRegEntry& set_enable_kwargs(bool enable);
  SimpleOpRegEntry& set_resource_request(ResourceRequest req);
  SimpleOpRegEntry& set_resource_request(const std::vector<ResourceRequest>& reqs);
  SimpleOpRegEntry& describe(std::string description);

  // Runs the function on NDArrays: `inputs` holds one or two arrays (same
  // engine and context); the result is written into *out, allocated when
  // out->is_none(). Pushed to the engine: reads the inputs, writes *out and
  // the resources. Writing into an input's storage is done in place when
  // the op allows it (kInplaceInOut / kInplaceLhsOut), through a temporary
  // otherwise. Raises std::invalid_argument (wrong arity, scalar/kwargs not
  // enabled) or ShapeError naming the op and the shapes, and
  // std::logic_error when no forward function was registered. The pushed
  // function does not refer to the entry: an entry that is not registered
  // (a local SimpleOpRegEntry) may go away before it runs.
  void Invoke(const std::vector<NDArray>& inputs, const SimpleOpCall& call, NDArray* out) const;
  NDArray Invoke(const std::vector<NDArray>& inputs, const SimpleOpCall& call = {}) const;

  // Introspection, for the operator adapter and tests.
  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }
  int num_inputs() const { return num_inputs_; }
  bool enable_scalar() const { return enable_scalar_; }
  bool enable_kwargs() const { return enable_kwargs_; }
  bool symbolic() const { return symbolic_; }
  bool has_shape_function() const { return unary_shape_ != nullptr || binary_shape_ != nullptr; }
  // Whether a forward function was registered (set_function). An op
  // without one cannot be invoked, nor created as an OperatorProperty
  // (std::logic_error naming it).
  bool has_function() const { return unary_fn_ != nullptr || binary_fn_ != nullptr; }
  SimpleOpGradKind grad_kind() const { return grad_kind_; }
  SimpleOpInplaceOption forward_inplace() const { return fwd_inplace_; }
  SimpleOpInplaceOption backward_inplace() const { return bwd_inplace_; }
  const std::vector<ResourceRequest>& resource_requests() const { return resources_; }
  // The output shape for the given input shapes, by the shape function or
  // the default; raises ShapeError naming the op.
  TShape InferShape(const std::vector<TShape>& in, const EnvArguments& env) const;
  // Calls the forward function; inputs.size() == num_inputs().
  void CallForward(const std::vector<TBlob>& inputs, const EnvArguments& env, TBlob* out,
                   OpReqType req, RunContext ctx) const;
  // Calls the gradient function with what grad_kind() needs.
  void CallBackward(const OutputGrad& out_grad, const OutputValue& out_value,
                    const std::vector<TBlob>& inputs, const EnvArguments& env,
                    const std::vector<TBlob*>& in_grads, const std::vector<OpReqType>& req,
                    RunContext ctx) const;

 private:
  void SetArity(int n, const char* what);
  void SetGrad(SimpleOpGradKind kind, int arity, SimpleOpInplaceOption inplace, DeviceType dev);

  std::string name_;
  // name_ in storage that lives as long as the program: the engine keeps
  // the name of a pushed function until it runs.
  const char* stable_name_ = nullptr;
  std::string description_;
  int num_inputs_ = 0;  // 0 until a function or shape function is set
  bool enable_scalar_ = false;
  bool enable_kwargs_ = false;
  bool symbolic_ = true;
  UnaryShapeFunction unary_shape_ = nullptr;
  BinaryShapeFunction binary_shape_ = nullptr;
  UnaryFunction unary_fn_ = nullptr;
  BinaryFunction binary_fn_ = nullptr;
  SimpleOpGradKind grad_kind_ = SimpleOpGradKind::kNone;
  UnaryGradFunctionT0 unary_grad0_ = nullptr;
  UnaryGradFunctionT1 unary_grad1_ = nullptr;
  UnaryGradFunctionT2 unary_grad2_ = nullptr;
  BinaryGradFunctionT0 binary_grad0_ = nullptr;
  BinaryGradFunctionT1 binary_grad1_ = nullptr;
  BinaryGradFunctionT2 binary_grad2_ = nullptr;
  SimpleOpInplaceOption fwd_inplace_ = kNoInplace;
  SimpleOpInplaceOption bwd_inplace_ = kNoInplace;
  std::vector<ResourceRequest> resources_;
};

// The registry of simple ops.
class SimpleOpRegistry {
 public:
  // A new entry named `name` to fill in; raises std::invalid_argument when
  // the name is taken (by a simple op or an OperatorProperty).
  static SimpleOpRegEntry& Register(const std::string& name);
  // The entry named `name`, or nullptr.
  static const SimpleOpRegEntry* Find(const std::string& name);
  // Find, raising std::invalid_argument listing the names when unknown.
  static const SimpleOpRegEntry& Get(const std::string& name);
  static std::vector<std::string> ListNames();
};

// Registers the simple op `Name` from a .cc file linked into the program;
// chain the setters after it.
#define DEPENGINE_REGISTER_SIMPLE_OP(Name)                                            \
  static ::depengine::SimpleOpRegEntry& depengine_simple_op_##Name [[maybe_unused]] = \
      ::depengine::SimpleOpRegistry::Register(#Name)

}  // namespace depengine
