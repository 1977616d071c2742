// The operator interface of seed 000: an Operator computes (Forward,
// Backward) on TBlobs the system allocated; an OperatorProperty describes
// it (parameters, arguments, shapes, resources, what the backward pass
// needs, which buffers may be shared) and creates it. Properties are
// registered by name and created with OperatorProperty::Create.
//
// Who calls what: the system (the executor in executor.h, or a user driving
// operators by hand) calls OperatorProperty members on its own thread before
// running anything, and calls Operator::Forward / Backward from inside an
// engine function whose vars cover every blob passed in and every requested
// resource (written). An Operator may be run by one engine function at a
// time; it need not be thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "depengine/engine.h"
#include "depengine/parameter.h"
#include "depengine/resource.h"
#include "depengine/tensor.h"

namespace depengine {

// How an operator writes one output.
enum OpReqType {
  kNullOp,        // do not write anything
  kWriteTo,       // overwrite the output, which is its own memory
  kWriteInplace,  // overwrite the output, which shares memory with an input
  kAddTo          // add the result to the output (gradient accumulation)
};

// Writes `value` into `out` as `req` says (the role of ASSIGN_DISPATCH).
template <class T>
inline void Assign(T& out, OpReqType req, T value) {
  switch (req) {
    case kNullOp:
      break;
    case kWriteTo:
    case kWriteInplace:
      out = value;
      break;
    case kAddTo:
      out += value;
      break;
  }
}

// What an operator learns when it runs.
struct OpContext {
  int is_train = 0;                 // 1 in training (forward before a backward)
  RunContext run_ctx;               // the device and stream it runs on
  std::vector<Resource> requested;  // ForwardResource / BackwardResource, in order
};

// A shape that cannot be inferred or does not fit. what() names the
// operator and the shapes involved.
class ShapeError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// The computation of an operator.
class Operator {
 public:
  virtual ~Operator() = default;
  // Computes out_data from in_data; req[i] says how to write out_data[i].
  virtual void Forward(const OpContext& ctx, const std::vector<TBlob>& in_data,
                       const std::vector<OpReqType>& req, const std::vector<TBlob>& out_data,
                       const std::vector<TBlob>& aux_states) = 0;
  // Computes in_grad from out_grad and the forward data; req[i] says how
  // to write in_grad[i]. Only the blobs named by DeclareBackwardDependency
  // are valid; the others are empty TBlobs. The default raises
  // std::logic_error (the operator has no gradient).
  virtual void Backward(const OpContext& ctx, const std::vector<TBlob>& out_grad,
                        const std::vector<TBlob>& in_data, const std::vector<TBlob>& out_data,
                        const std::vector<OpReqType>& req, const std::vector<TBlob>& in_grad,
                        const std::vector<TBlob>& aux_states);
};

// The description of an operator, and its factory.
class OperatorProperty {
 public:
  virtual ~OperatorProperty() = default;

  // Sets the parameters from key=value strings; raises ParamError naming the
  // operator, the parameter and what it accepts.
  virtual void Init(const KwArgs& kwargs) = 0;
  // The parameters as key=value strings (Init accepts them back).
  virtual std::map<std::string, std::string> GetParams() const = 0;
  // Names of the inputs, outputs and auxiliary states, in order.
  virtual std::vector<std::string> ListArguments() const { return {"data"}; }
  virtual std::vector<std::string> ListOutputs() const { return {"output"}; }
  virtual std::vector<std::string> ListAuxiliaryStates() const { return {}; }
  virtual int NumOutputs() const { return static_cast<int>(ListOutputs().size()); }
  // The first NumVisibleOutputs() outputs are visible to users of a graph;
  // the rest are internal (e.g. Dropout's mask).
  virtual int NumVisibleOutputs() const { return NumOutputs(); }

  // Fills in the unknown shapes (ndim() == 0) it can from the known ones.
  // Returns false when there is not enough information yet; raises
  // ShapeError naming the operator and the shapes when they do not fit.
  virtual bool InferShape(std::vector<TShape>* in_shape, std::vector<TShape>* out_shape,
                          std::vector<TShape>* aux_shape) const = 0;

  // A new property with the same parameters.
  virtual std::unique_ptr<OperatorProperty> Copy() const = 0;
  // The operator that computes this property on `ctx`; owned by the caller.
  virtual Operator* CreateOperator(Context ctx) const = 0;
  // The registered name, e.g. "FullyConnected".
  virtual std::string TypeString() const = 0;

  // The resources Forward / Backward need, in OpContext::requested order.
  virtual std::vector<ResourceRequest> ForwardResource(const std::vector<TShape>& in_shape) const;
  virtual std::vector<ResourceRequest> BackwardResource(const std::vector<TShape>& in_shape) const;

  // Which of out_grad, in_data and out_data Backward reads: returns a
  // subset of the ids passed in. The default keeps all of them; an
  // operator that returns less lets the system free the rest after the
  // forward pass.
  virtual std::vector<int> DeclareBackwardDependency(const std::vector<int>& out_grad,
                                                     const std::vector<int>& in_data,
                                                     const std::vector<int>& out_data) const;
  // Pairs (in_data id, out_data id) that may share memory in Forward. A
  // suggestion: the system decides, and the operator must be correct both
  // ways. Default: none.
  virtual std::vector<std::pair<int, void*>> ForwardInplaceOption(
      const std::vector<int>& in_data, const std::vector<void*>& out_data) const;
  // Pairs (out_grad / in_data / out_data id, in_grad id) that may share
  // memory in Backward. Default: none.
  virtual std::vector<std::pair<int, void*>> BackwardInplaceOption(
      const std::vector<int>& out_grad, const std::vector<int>& in_data,
      const std::vector<int>& out_data, const std::vector<void*>& in_grad) const;

  // DeclareBackwardDependency applied to values: the elements of out_grad,
  // in_data and out_data that Backward reads, in declared order.
  template <class T>
  std::vector<T> BackwardInputs(const std::vector<T>& out_grad, const std::vector<T>& in_data,
                                const std::vector<T>& out_data) const;

  // A new property of the registered type `type_name` (not yet Init-ed);
  // SimpleOp registrations (simple_op.h) count too. Raises
  // std::invalid_argument listing the registered names when unknown, and
  // std::logic_error naming the type when its factory returns nullptr.
  static std::unique_ptr<OperatorProperty> Create(const std::string& type_name);
  // Create followed by Init.
  static std::unique_ptr<OperatorProperty> Create(const std::string& type_name,
                                                  const KwArgs& kwargs);
};

// The registry of operator properties by name. Register and Find are
// callable from any thread.
class OperatorRegistry {
 public:
  using Factory = std::function<std::unique_ptr<OperatorProperty>()>;
  // Registers `factory` under `name`; raises std::invalid_argument when the
  // name is taken or `factory` is empty. Returns true so it can initialize
  // a static.
  static bool Register(const std::string& name, Factory factory, std::string description = "");
  // The factory of `name`, or nullptr.
  static const Factory* Find(const std::string& name);
  // Every registered name (OperatorProperty and SimpleOp), sorted.
  static std::vector<std::string> ListNames();
  // The description given at registration ("" when none).
  static std::string Describe(const std::string& name);
};

// Registers OperatorProperty class `Class` under `Name` from a .cc file
// linked into the program.
#define DEPENGINE_REGISTER_OP_PROPERTY(Name, Class)                            \
  static const bool depengine_op_property_registered_##Name [[maybe_unused]] = \
      ::depengine::OperatorRegistry::Register(                                 \
          #Name, [] { return std::unique_ptr<::depengine::OperatorProperty>(new Class()); })

// Checks a shape during InferShape: if *slot is unknown it becomes
// `expected`; if it is known and differs, raises ShapeError
// "<op>: <what> has shape <slot> but <expected> is required".
void ShapeAssign(const std::string& op, const std::string& what, TShape* slot,
                 const TShape& expected);

// Implementation of the template above.
template <class T>
std::vector<T> OperatorProperty::BackwardInputs(const std::vector<T>& out_grad,
                                                const std::vector<T>& in_data,
                                                const std::vector<T>& out_data) const {
  std::vector<int> og(out_grad.size()), id(in_data.size()), od(out_data.size());
  int n = 0;
  for (auto& v : og) v = n++;
  for (auto& v : id) v = n++;
  for (auto& v : od) v = n++;
  std::vector<T> all;
  all.reserve(static_cast<std::size_t>(n));
  all.insert(all.end(), out_grad.begin(), out_grad.end());
  all.insert(all.end(), in_data.begin(), in_data.end());
  all.insert(all.end(), out_data.begin(), out_data.end());
  std::vector<T> ret;
  for (int i : DeclareBackwardDependency(og, id, od))
    ret.push_back(all[static_cast<std::size_t>(i)]);
  return ret;
}

}  // namespace depengine
