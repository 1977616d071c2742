// A small graph of operators and an executor that runs it on the engine,
// using what each OperatorProperty declares the way seed 000 intends:
//
//  1. every shape is inferred before anything runs (InferShape, both ways);
//  2. memory is planned over the whole forward + backward schedule: a
//     forward output that no backward declares it needs
//     (DeclareBackwardDependency) dies after its last forward reader and its
//     memory is reused; in-place options (ForwardInplaceOption,
//     BackwardInplaceOption) are taken when the shared input has no later
//     reader; the report compares the plan with one buffer per tensor;
//  3. forward and backward are prebuilt engine operators (NewOperator) that
//     Forward / Backward push, each listing the vars of the memory it reads
//     and writes, so the engine orders them, and any later use of the
//     arrays (weight updates, copies), by data flow alone.
//
//   Graph g;
//   NodeEntry x = g.Variable("data");
//   NodeEntry h = g.Op("FullyConnected", "fc1", {{"num_hidden", "64"}}, {x});
//   h = g.Op("Activation", "relu1", {{"act_type", "relu"}}, {h});
//   NodeEntry y = g.Op("SoftmaxOutput", "softmax", {}, {h});
//   ExecutorOptions o;
//   o.arg_shapes = {{"data", {32, 2}}};
//   o.grad_req = {{"data", kNullOp}, {"softmax_label", kNullOp}};
//   Executor exec(g, {y}, o);
//   exec.Forward(true);
//   exec.Backward();
//
// Threading: an Executor is used by one thread at a time. Its arrays follow
// NDArray's rules.
//
// Failures: an operator that fails (a bad label, ...) fails the arrays it
// writes, and within that run every operator downstream of them is skipped
// and passes the failure on, so it reaches outputs() and the gradients
// (WaitToRead rethrows it there, and clears it from that array). Each
// Forward starts a new run: the arrays the user cannot reach (planned
// memory, head gradients, auxiliary states) do not keep an earlier run's
// failure, so once the failure was collected from the arrays it reached, a
// Forward / Backward with good inputs runs normally. A failure still held by
// an array the user can reach (not yet collected) fails the operators that
// write it in later runs too. Engine::WaitForAll reports, as always, a
// failure that no WaitToRead delivered.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "depengine/engine.h"
#include "depengine/ndarray.h"
#include "depengine/operator.h"
#include "depengine/resource.h"

namespace depengine {

// One output of one node.
struct NodeEntry {
  int node = -1;
  int index = 0;
};

// A directed acyclic graph of variables and operators, built in
// topological order (a node's inputs exist before it). Not thread-safe.
class Graph {
 public:
  struct Node {
    std::string name;
    std::shared_ptr<const OperatorProperty> op;  // nullptr for a variable
    std::vector<NodeEntry> inputs;               // one per op->ListArguments()
  };

  // Adds a variable (an input, a label or a parameter) named `name`.
  // Raises std::invalid_argument when the name is taken.
  NodeEntry Variable(const std::string& name);

  // Adds an operator node named `name` running registered operator
  // `op_type` with `kwargs`. `inputs` bind its first arguments in
  // ListArguments() order; the arguments left over become new variables
  // named "<name>_<argument>" (e.g. fc1_weight). Returns the node's visible
  // outputs. Raises what OperatorProperty::Create / Init raise,
  // std::invalid_argument for a taken name (the node's or a new variable's),
  // too many inputs or an entry that is not in this graph, and
  // std::logic_error when the operator's declarations contradict each other
  // (NumOutputs() must equal ListOutputs().size() and be >= 1, and
  // NumVisibleOutputs() lie in [1, NumOutputs()]). When it raises, the graph
  // is left unchanged.
  std::vector<NodeEntry> AddOp(const std::string& op_type, const std::string& name,
                               const KwArgs& kwargs, const std::vector<NodeEntry>& inputs);
  // AddOp, returning the first output.
  NodeEntry Op(const std::string& op_type, const std::string& name, const KwArgs& kwargs,
               const std::vector<NodeEntry>& inputs) {
    return AddOp(op_type, name, kwargs, inputs)[0];
  }

  // The variable names, in creation order.
  std::vector<std::string> ListArguments() const;
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  const Node& node(int i) const { return nodes_.at(static_cast<std::size_t>(i)); }

 private:
  std::vector<Node> nodes_;
};

// How an Executor is bound.
struct ExecutorOptions {
  Context ctx = Context::CPU();
  Engine* engine = nullptr;              // nullptr: Engine::Get()
  ResourceManager* resources = nullptr;  // nullptr: ResourceManager::Get(); same engine
  int dtype = kFloat32;
  // Shapes of some variables (typically data and label); the others are
  // inferred.
  std::map<std::string, TShape> arg_shapes;
  // Arrays to use for variables instead of allocating them (e.g. weights
  // shared with another executor). Their shapes count as known.
  std::map<std::string, NDArray> shared_args;
  // false: no backward pass, no gradients, and forward buffers are reused
  // as soon as their last forward reader is done.
  bool for_training = true;
  // How each variable's gradient is written; variables not listed get
  // kWriteTo (kNullOp: no gradient array).
  std::map<std::string, OpReqType> grad_req;
  // false: every tensor gets its own memory (the naive plan).
  bool plan_memory = true;
  // false: never share memory in place (only reuse across lifetimes).
  bool allow_inplace = true;
};

// What the memory plan allocates for the executor's internal tensors
// (forward outputs other than the heads, and gradients of those), against
// allocating each separately. Arguments, their gradients, the heads and
// their gradients are allocated separately in both cases and not counted.
struct MemoryPlanStats {
  std::size_t naive_bytes = 0;    // one buffer per tensor
  std::size_t planned_bytes = 0;  // what the plan allocates
  int tensors = 0;                // internal tensors planned
  int blocks = 0;                 // storage blocks the plan allocates
  int inplace = 0;                // tensors sharing an input's memory in place
  // Forward outputs that no backward declares it needs, so their memory is
  // reused after the forward pass.
  int not_kept_for_backward = 0;
  std::size_t saved_bytes() const { return naive_bytes - planned_bytes; }
};

// Runs one graph's forward and backward passes on the engine.
class Executor {
 public:
  // Infers shapes, allocates arguments (zero-filled unless shared),
  // gradients and planned memory, and builds the engine operators. Raises
  // ShapeError naming the node, the operator and the shapes when shapes
  // cannot be inferred or do not fit (for a variable that no operator
  // reads and whose shape is not given: naming the variable's node), also
  // when a variable, an output or an auxiliary state would get a shape no
  // array can have (no elements, a negative dimension) or an auxiliary
  // state's shape is left unknown; std::logic_error naming the node when
  // its operator's CreateOperator returns nullptr or its in-place options
  // name an input, output or gradient the operator does not have;
  // std::invalid_argument for an unknown name in the options, an empty
  // `heads`, or an output given twice in `heads` (its head gradients would
  // have to be summed; this executor does not, so it rejects it).
  Executor(const Graph& graph, const std::vector<NodeEntry>& heads, const ExecutorOptions& options);
  // Returns at once: pending pushes keep what they use alive, and the
  // executor's memory is freed after them.
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Pushes every operator's Forward in order; is_train is passed to the
  // operators (e.g. Dropout). Returns at once. Starts a new run (see
  // Failures above).
  void Forward(bool is_train);
  // Pushes every Backward in reverse order. `head_grads`, when given, are
  // copied into the head gradients first (one per head); otherwise the head
  // gradients are ones (loss layers ignore them), also after an earlier
  // Backward(head_grads). Requires for_training.
  void Backward(const std::vector<NDArray>& head_grads = {});

  // The heads' arrays, in the order given.
  const std::vector<NDArray>& outputs() const { return outputs_; }
  // The array of variable `name` / its gradient (is_none() when kNullOp).
  // Raises std::invalid_argument for an unknown name.
  const NDArray& arg(const std::string& name) const;
  const NDArray& grad(const std::string& name) const;
  const std::map<std::string, NDArray>& arg_dict() const { return args_; }
  const std::map<std::string, NDArray>& grad_dict() const { return grads_; }
  // The inferred shape of every variable.
  const std::map<std::string, TShape>& arg_shapes() const { return arg_shapes_; }

  const MemoryPlanStats& memory_stats() const { return stats_; }
  // One line per planned tensor (name, shape, bytes, block, in place),
  // then the totals.
  std::string PlanString() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::vector<NDArray> outputs_;
  std::map<std::string, NDArray> args_;
  std::map<std::string, NDArray> grads_;
  std::map<std::string, TShape> arg_shapes_;
  MemoryPlanStats stats_;
};

}  // namespace depengine
