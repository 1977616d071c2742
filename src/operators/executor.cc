// Executor: shape inference, memory planning and engine operators for a
// Graph. See include/depengine/executor.h and docs/operators.md.
#include "depengine/executor.h"

#include <algorithm>
#include <limits>
#include <set>
#include <sstream>
#include <stdexcept>

#include "engine/internal_hooks.h"
#include "operators/engine_util.h"

namespace depengine {
namespace {

// An internal tensor placed by the memory plan: a forward output that is
// not a head, or the gradient of one.
struct Tensor {
  std::string name;
  TShape shape;
  std::size_t bytes = 0;
  int def = -1;   // the step that first writes it
  int last = -1;  // the last step that reads or writes it
  int block = -1;
  bool inplace = false;  // shares the block of an input of its defining step
  bool forward = true;   // a forward output (else a gradient)
  bool kept = false;     // forward output that a backward step reads
};

// A block of storage in the plan.
struct Block {
  std::size_t bytes = 0;
  int live = 0;  // tensors currently placed in it
};

std::string ShapeOrUnknown(const TShape& s) { return s.known() ? s.ToString() : "?"; }

// Raises ShapeError "<who>: <what> has shape <s>, ..." unless an array of
// known shape `s` can be allocated: no negative dimension, no overflow, at
// least one element (what NDArray requires, said here with the node's name).
void CheckAllocatable(const TShape& s, const std::string& who, const std::string& what) {
  TShape::index_t size = 0;
  try {
    size = s.Size();
  } catch (const std::invalid_argument& e) {
    throw ShapeError(who + ": " + what + " has shape " + s.ToString() + ": " + e.what());
  }
  if (size <= 0) {
    throw ShapeError(who + ": " + what + " has shape " + s.ToString() +
                     ", which has no elements; arrays need at least one");
  }
}

// The body of a node's engine function: calls `call` (the operator's
// Forward or Backward) with this run's OpContext and finishes the function
// through `done`, with the exception `call` threw or without.
template <typename Call>
void RunOperatorCall(int is_train, const RunContext& rctx, const std::vector<Resource>& requested,
                     const CallbackOnComplete& done, const Call& call) {
  try {
    OpContext op_ctx;
    op_ctx.is_train = is_train;
    op_ctx.run_ctx = rctx;
    op_ctx.requested = requested;
    call(op_ctx);
  } catch (...) {
    done(std::current_exception());
    return;
  }
  done();
}

}  // namespace

struct Executor::Impl {
  Engine* engine = nullptr;
  ResourceManager* rm = nullptr;
  Context ctx;
  int dtype = kFloat32;
  bool training = true;

  std::vector<Graph::Node> nodes;
  std::vector<int> entry_base;                 // per node: the id of its output 0
  std::vector<TShape> shape;                   // per entry
  std::vector<NDArray> value;                  // per entry: the forward array
  std::vector<NDArray> grad;                   // per entry: the gradient array, or none
  std::vector<bool> need_grad;                 // per entry
  std::vector<std::vector<int>> consumers;     // per entry: op nodes reading it
  std::vector<std::vector<TShape>> aux_shape;  // per node
  std::vector<int> fwd_step, bwd_step;         // per node; -1 when none
  std::vector<int> backward_order;             // op nodes, reverse topological
  std::vector<std::vector<int>> deps;          // per node: declared backward ids
  std::vector<NodeEntry> heads;
  std::vector<NDArray> head_grads;
  // Whether the head gradients hold ones (no Backward(head_grads) copied
  // into them since they were last filled). Touched only by the one thread
  // using the executor (executor.h), so a plain bool.
  bool head_grads_are_ones = true;
  std::vector<Tensor> tensors;
  std::vector<int> fwd_tensor, grad_tensor;  // per entry: tensor index or -1
  std::vector<Block> blocks;

  struct Run {
    std::shared_ptr<Operator> op;
    std::shared_ptr<const std::string> name;  // outlives the engine operators
    std::vector<NDArray> aux;
    std::vector<Resource> fwd_res, bwd_res;
    std::vector<OpReqType> fwd_req, bwd_req;
    OprHandle fwd[2] = {nullptr, nullptr};  // [is_train]
    OprHandle bwd = nullptr;
    // Written by the node's forward and backward operators, for nodes that
    // have both: an Operator runs in one engine function at a time
    // (operator.h), and without it the next run's Forward may share no var
    // with this run's Backward (an operator whose backward reads only
    // out_grad), so the engine could run both at once on one Operator. Like
    // a resource var it guards state, not a result: marked scratch, so a
    // failing Backward does not make every later Forward be skipped.
    VarHandle state_var = nullptr;
  };
  std::vector<Run> runs;  // per node
  // Vars of the arrays the user cannot reach (planned memory, head
  // gradients, auxiliary states, gradients of unused outputs): a failure
  // in them is cleared at the start of the next Forward (see Forward).
  std::vector<VarHandle> internal_vars;

  int Entry(NodeEntry e) const { return entry_base[static_cast<std::size_t>(e.node)] + e.index; }
  int NumOutputs(int n) const { return nodes[n].op ? nodes[n].op->NumOutputs() : 1; }
  bool IsOp(int n) const { return nodes[n].op != nullptr; }
  bool Declared(int n, int id) const {
    return std::find(deps[n].begin(), deps[n].end(), id) != deps[n].end();
  }
  // Backward ids: out_grad k -> k, in_data j -> no + j, out_data k -> no + ni + k.
  int OgId(int, int k) const { return k; }
  int InId(int n, int j) const { return NumOutputs(n) + j; }
  int OutId(int n, int k) const {
    return NumOutputs(n) + static_cast<int>(nodes[n].inputs.size()) + k;
  }
  std::string EntryName(int n, int k) const {
    const auto outs = nodes[n].op->ListOutputs();
    return nodes[n].name + "_" + outs[static_cast<std::size_t>(k)];
  }

  void InferShapes(const ExecutorOptions& o);
  void FindGradients(const ExecutorOptions& o);
  void CollectTensors();
  void Plan(const ExecutorOptions& o, MemoryPlanStats* stats);
  void Allocate(const ExecutorOptions& o, std::map<std::string, NDArray>* args,
                std::map<std::string, NDArray>* grads, std::vector<NDArray>* outputs);
  void PrepareRuns(const ExecutorOptions& o);
  void CollectInternalVars(const std::vector<NDArray>& outputs,
                           const std::map<std::string, NDArray>& args,
                           const std::map<std::string, NDArray>& grads);
  OprHandle BuildForward(int n, bool is_train);
  OprHandle BuildBackward(int n);
};

// ---------------------------------------------------------------------------
// Shapes.

void Executor::Impl::InferShapes(const ExecutorOptions& o) {
  for (int n = 0; n < static_cast<int>(nodes.size()); ++n) {
    if (IsOp(n)) continue;
    const std::string& name = nodes[n].name;
    TShape& s = shape[static_cast<std::size_t>(Entry({n, 0}))];
    if (auto it = o.arg_shapes.find(name); it != o.arg_shapes.end()) s = it->second;
    if (auto it = o.shared_args.find(name); it != o.shared_args.end()) {
      if (s.known() && s != it->second.shape()) {
        throw ShapeError("Executor: variable '" + name + "' is given shape " + s.ToString() +
                         " but its shared array has shape " + it->second.shape().ToString());
      }
      s = it->second.shape();
    }
    if (s.known()) CheckAllocatable(s, "node '" + name + "' (variable)", "the variable");
  }
  // Propagate until nothing changes; each pass visits the nodes in order,
  // and InferShape may fill inputs (weights) as well as outputs.
  for (std::size_t pass = 0; pass <= nodes.size(); ++pass) {
    bool changed = false;
    for (int n = 0; n < static_cast<int>(nodes.size()); ++n) {
      if (!IsOp(n)) continue;
      const Graph::Node& node = nodes[n];
      std::vector<TShape> in, out, aux = aux_shape[n];
      for (const NodeEntry& e : node.inputs) in.push_back(shape[Entry(e)]);
      for (int k = 0; k < NumOutputs(n); ++k) out.push_back(shape[Entry({n, k})]);
      try {
        node.op->InferShape(&in, &out, &aux);
      } catch (const ShapeError& e) {
        throw ShapeError("node '" + node.name + "': " + e.what());
      }
      auto merge = [&](int entry, const TShape& s, const std::string& what) {
        TShape& cur = shape[static_cast<std::size_t>(entry)];
        if (!s.known()) return;
        if (!cur.known()) {
          cur = s;
          changed = true;
        } else if (cur != s) {
          throw ShapeError("node '" + node.name + "' (" + node.op->TypeString() + "): " + what +
                           " has shape " + cur.ToString() + " but " + s.ToString() +
                           " is required");
        }
      };
      const auto arg_names = node.op->ListArguments();
      for (std::size_t j = 0; j < node.inputs.size() && j < in.size(); ++j) {
        merge(Entry(node.inputs[j]), in[j], "input '" + arg_names[j] + "'");
      }
      for (int k = 0; k < NumOutputs(n) && k < static_cast<int>(out.size()); ++k) {
        merge(Entry({n, k}), out[static_cast<std::size_t>(k)], "output " + std::to_string(k));
      }
      aux_shape[n] = aux;
    }
    if (!changed) break;
  }
  for (int n = 0; n < static_cast<int>(nodes.size()); ++n) {
    if (!IsOp(n)) continue;
    const Graph::Node& node = nodes[n];
    bool complete = true;
    for (const NodeEntry& e : node.inputs) complete = complete && shape[Entry(e)].known();
    for (int k = 0; k < NumOutputs(n); ++k) complete = complete && shape[Entry({n, k})].known();
    if (complete) continue;
    std::string msg =
        "node '" + node.name + "' (" + node.op->TypeString() + "): cannot infer shapes; inputs";
    const auto arg_names = node.op->ListArguments();
    for (std::size_t j = 0; j < node.inputs.size(); ++j) {
      msg += " " + arg_names[j] + "=" + ShapeOrUnknown(shape[Entry(node.inputs[j])]);
    }
    msg += "; give the shapes of the variables (ExecutorOptions::arg_shapes)";
    throw ShapeError(msg);
  }
  // Every variable an operator reads has a shape now (else the loop above
  // threw); one still unknown is read by no operator, so nothing can infer it.
  for (int n = 0; n < static_cast<int>(nodes.size()); ++n) {
    if (IsOp(n) || shape[Entry({n, 0})].known()) continue;
    throw ShapeError("node '" + nodes[n].name +
                     "' (variable): cannot infer its shape (?): no operator reads it; give its "
                     "shape (ExecutorOptions::arg_shapes) or leave it out of the graph");
  }
  // What the operators inferred must be allocatable too: an output or an
  // auxiliary state without elements (or still unknown) is the node's
  // error, named here rather than by the allocation.
  for (int n = 0; n < static_cast<int>(nodes.size()); ++n) {
    if (!IsOp(n)) continue;
    const std::string who = "node '" + nodes[n].name + "' (" + nodes[n].op->TypeString() + ")";
    const auto outs = nodes[n].op->ListOutputs();
    for (int k = 0; k < NumOutputs(n); ++k) {
      CheckAllocatable(shape[Entry({n, k})], who,
                       "output '" + outs[static_cast<std::size_t>(k)] + "'");
    }
    const auto aux_names = nodes[n].op->ListAuxiliaryStates();
    if (aux_shape[n].size() != aux_names.size()) {
      throw ShapeError(who + ": InferShape gave " + std::to_string(aux_shape[n].size()) +
                       " auxiliary shapes for " + std::to_string(aux_names.size()) +
                       " auxiliary states (ListAuxiliaryStates)");
    }
    for (std::size_t a = 0; a < aux_names.size(); ++a) {
      const TShape& s = aux_shape[n][a];
      const std::string what = "auxiliary state '" + aux_names[a] + "'";
      if (!s.known()) {
        throw ShapeError(who + ": cannot infer the shape of " + what +
                         " (InferShape left it unknown)");
      }
      CheckAllocatable(s, who, what);
    }
  }
}

// ---------------------------------------------------------------------------
// Which entries get gradients, and the schedule.

void Executor::Impl::FindGradients(const ExecutorOptions& o) {
  const int num_nodes = static_cast<int>(nodes.size());
  std::vector<bool> need_backward(static_cast<std::size_t>(num_nodes), false);
  int step = 0;
  for (int n = 0; n < num_nodes; ++n) {
    if (!IsOp(n)) {
      const auto it = o.grad_req.find(nodes[n].name);
      const OpReqType req = it == o.grad_req.end() ? kWriteTo : it->second;
      need_grad[Entry({n, 0})] = training && req != kNullOp;
      continue;
    }
    fwd_step[n] = step++;
    bool any = false;
    for (const NodeEntry& e : nodes[n].inputs) any = any || need_grad[Entry(e)];
    need_backward[n] = training && any;
    for (int k = 0; k < NumOutputs(n); ++k) need_grad[Entry({n, k})] = need_backward[n];
    for (const NodeEntry& e : nodes[n].inputs) consumers[Entry(e)].push_back(n);
  }
  for (int n = num_nodes - 1; n >= 0; --n) {
    if (IsOp(n) && need_backward[n]) {
      bwd_step[n] = step++;
      backward_order.push_back(n);
    }
  }
  for (int n = 0; n < num_nodes; ++n) {
    if (!IsOp(n)) continue;
    const int no = NumOutputs(n), ni = static_cast<int>(nodes[n].inputs.size());
    std::vector<int> og(no), in(ni), out(no);
    for (int k = 0; k < no; ++k) og[k] = OgId(n, k), out[k] = OutId(n, k);
    for (int j = 0; j < ni; ++j) in[j] = InId(n, j);
    deps[n] = nodes[n].op->DeclareBackwardDependency(og, in, out);
  }
}

void Executor::Impl::CollectTensors() {
  std::set<int> head_entries;
  for (const NodeEntry& h : heads) {
    head_entries.insert(Entry(h));
    if (!consumers[Entry(h)].empty()) {
      throw std::invalid_argument(
          "Executor: head '" + EntryName(h.node, h.index) + "' is also an input of node '" +
          nodes[consumers[Entry(h)][0]].name + "'; heads must be final outputs");
    }
  }
  for (int n = 0; n < static_cast<int>(nodes.size()); ++n) {
    if (!IsOp(n)) continue;
    for (int k = 0; k < NumOutputs(n); ++k) {
      const int e = Entry({n, k});
      if (head_entries.count(e)) continue;
      Tensor t;
      t.name = EntryName(n, k);
      t.shape = shape[e];
      t.def = t.last = fwd_step[n];
      for (int c : consumers[e]) t.last = std::max(t.last, fwd_step[c]);
      if (bwd_step[n] >= 0 && Declared(n, OutId(n, k))) {
        t.last = std::max(t.last, bwd_step[n]);
        t.kept = true;
      }
      for (int c : consumers[e]) {
        if (bwd_step[c] < 0) continue;
        for (std::size_t j = 0; j < nodes[c].inputs.size(); ++j) {
          if (Entry(nodes[c].inputs[j]) == e && Declared(c, InId(c, static_cast<int>(j)))) {
            t.last = std::max(t.last, bwd_step[c]);
            t.kept = true;
          }
        }
      }
      fwd_tensor[e] = static_cast<int>(tensors.size());
      tensors.push_back(t);
    }
  }
  // Gradients of internal entries that some consumer writes.
  for (int n : backward_order) {
    for (int k = 0; k < NumOutputs(n); ++k) {
      const int e = Entry({n, k});
      if (head_entries.count(e) || consumers[e].empty()) continue;
      Tensor t;
      t.name = EntryName(n, k) + "_grad";
      t.shape = shape[e];
      t.forward = false;
      t.def = std::numeric_limits<int>::max();
      for (int c : consumers[e]) {
        t.def = std::min(t.def, bwd_step[c]);
        t.last = std::max(t.last, bwd_step[c]);
      }
      if (Declared(n, OgId(n, k))) t.last = std::max(t.last, bwd_step[n]);
      grad_tensor[e] = static_cast<int>(tensors.size());
      tensors.push_back(t);
    }
  }
  const std::size_t elem = TypeSize(dtype);
  for (Tensor& t : tensors) t.bytes = static_cast<std::size_t>(t.shape.Size()) * elem;
}

// ---------------------------------------------------------------------------
// The memory plan: a walk over the steps that places each tensor when it is
// first written, in place of a dying input when the operator allows it,
// else in the smallest free block that fits (or the largest free one,
// grown), else a new block; a tensor's block is freed after its last step.

void Executor::Impl::Plan(const ExecutorOptions& o, MemoryPlanStats* stats) {
  stats->tensors = static_cast<int>(tensors.size());
  for (const Tensor& t : tensors) {
    stats->naive_bytes += t.bytes;
    if (t.forward && !t.kept) ++stats->not_kept_for_backward;
  }
  if (!o.plan_memory) {
    for (Tensor& t : tensors) {
      t.block = static_cast<int>(blocks.size());
      blocks.push_back(Block{t.bytes, 1});
    }
  } else {
    int num_steps = 0;
    for (int n = 0; n < static_cast<int>(nodes.size()); ++n) {
      num_steps = std::max({num_steps, fwd_step[n] + 1, bwd_step[n] + 1});
    }
    std::vector<int> node_at(static_cast<std::size_t>(num_steps), -1);
    for (int n = 0; n < static_cast<int>(nodes.size()); ++n) {
      if (fwd_step[n] >= 0) node_at[fwd_step[n]] = n;
      if (bwd_step[n] >= 0) node_at[bwd_step[n]] = n;
    }
    std::vector<int> free_blocks;
    for (int s = 0; s < num_steps; ++s) {
      const int n = node_at[s];
      const bool backward = s == bwd_step[n];
      const Graph::Node& node = nodes[n];
      const int no = NumOutputs(n), ni = static_cast<int>(node.inputs.size());
      auto uses = [&](int entry) {
        int c = 0;
        for (const NodeEntry& e : node.inputs) c += Entry(e) == entry;
        return c;
      };
      // In-place pairs as (source tensor, target tensor).
      std::vector<std::pair<int, int>> pairs;
      if (o.allow_inplace) {
        std::vector<int> slots(static_cast<std::size_t>(std::max(no, ni)));
        std::vector<void*> ptrs;
        ptrs.reserve(slots.size());
        for (auto& v : slots) ptrs.push_back(&v);
        // The operator's options are checked before they are used: an id
        // or a pointer it was not given is its bug, named here instead of
        // indexing out of bounds.
        auto bad_option = [&](const char* which, const std::string& what) {
          return std::logic_error("Executor: node '" + node.name + "' (" + node.op->TypeString() +
                                  "): " + which + " names " + what);
        };
        auto slot_of = [&](void* p, const char* which, const char* what) {
          const auto it = std::find(ptrs.begin(), ptrs.end(), p);
          if (p == nullptr || it == ptrs.end()) {
            throw bad_option(which, std::string("a pointer that is not one of its ") + what);
          }
          return static_cast<int>(it - ptrs.begin());
        };
        if (!backward) {
          std::vector<int> in(ni);
          for (int j = 0; j < ni; ++j) in[j] = j;
          ptrs.resize(static_cast<std::size_t>(no));
          for (const auto& [j, p] : node.op->ForwardInplaceOption(in, ptrs)) {
            if (j < 0 || j >= ni) {
              throw bad_option("ForwardInplaceOption",
                               "input " + std::to_string(j) + " of " + std::to_string(ni));
            }
            const int k = slot_of(p, "ForwardInplaceOption", "outputs");
            const int src_entry = Entry(node.inputs[j]);
            if (uses(src_entry) != 1) continue;
            pairs.emplace_back(fwd_tensor[src_entry], fwd_tensor[Entry({n, k})]);
          }
        } else {
          std::vector<int> og(no), in(ni), out(no);
          for (int k = 0; k < no; ++k) og[k] = OgId(n, k), out[k] = OutId(n, k);
          for (int j = 0; j < ni; ++j) in[j] = InId(n, j);
          ptrs.resize(static_cast<std::size_t>(ni));
          for (const auto& [id, p] : node.op->BackwardInplaceOption(og, in, out, ptrs)) {
            if (id < 0 || id >= 2 * no + ni) {
              throw bad_option("BackwardInplaceOption",
                               "id " + std::to_string(id) + ", not an out_grad, in_data or " +
                                   "out_data id (0 to " + std::to_string(2 * no + ni - 1) + ")");
            }
            const int j = slot_of(p, "BackwardInplaceOption", "input gradients");
            const int dst_entry = Entry(node.inputs[j]);
            if (uses(dst_entry) != 1) continue;
            int src = -1;
            if (id < no) {
              src = grad_tensor[Entry({n, id})];
            } else if (id < no + ni) {
              src = fwd_tensor[Entry(node.inputs[id - no])];
            } else {
              src = fwd_tensor[Entry({n, id - no - ni})];
            }
            pairs.emplace_back(src, grad_tensor[dst_entry]);
          }
        }
      }
      std::set<int> taken;
      for (const auto& [src, dst] : pairs) {
        if (src < 0 || dst < 0) continue;  // an argument or a head: never shared
        Tensor& a = tensors[src];
        Tensor& b = tensors[dst];
        if (b.def != s || b.block >= 0 || a.block < 0 || a.last != s || a.def >= s ||
            a.bytes != b.bytes || blocks[a.block].live != 1 || taken.count(a.block)) {
          continue;
        }
        b.block = a.block;
        b.inplace = true;
        ++blocks[a.block].live;
        taken.insert(a.block);
      }
      for (Tensor& t : tensors) {
        if (t.def != s || t.block >= 0) continue;
        int best = -1;
        for (int b : free_blocks) {
          if (blocks[b].bytes >= t.bytes && (best < 0 || blocks[b].bytes < blocks[best].bytes))
            best = b;
        }
        if (best < 0) {
          for (int b : free_blocks) {
            if (best < 0 || blocks[b].bytes > blocks[best].bytes) best = b;
          }
        }
        if (best >= 0) {
          std::erase(free_blocks, best);
          blocks[best].bytes = std::max(blocks[best].bytes, t.bytes);
        } else {
          best = static_cast<int>(blocks.size());
          blocks.push_back(Block{t.bytes, 0});
        }
        t.block = best;
        ++blocks[best].live;
      }
      for (Tensor& t : tensors) {
        if (t.last != s) continue;
        if (--blocks[t.block].live == 0) free_blocks.push_back(t.block);
      }
    }
  }
  stats->blocks = static_cast<int>(blocks.size());
  for (const Block& b : blocks) stats->planned_bytes += b.bytes;
  for (const Tensor& t : tensors) stats->inplace += t.inplace;
}

// ---------------------------------------------------------------------------
// Arrays.

void Executor::Impl::Allocate(const ExecutorOptions& o, std::map<std::string, NDArray>* args,
                              std::map<std::string, NDArray>* grads,
                              std::vector<NDArray>* outputs) {
  auto make = [&](const TShape& s, double fill) {
    NDArray a(s, ctx, engine, dtype);
    a = fill;
    return a;
  };
  std::vector<NDArray> block_arrays;
  const std::size_t elem = TypeSize(dtype);
  for (const Block& b : blocks) {
    block_arrays.emplace_back(
        TShape{static_cast<TShape::index_t>(std::max<std::size_t>(b.bytes / elem, 1))}, ctx, engine,
        dtype);
  }
  auto view = [&](const Tensor& t) {
    return block_arrays[t.block].Slice(0, t.shape.Size()).Reshape(t.shape);
  };
  for (int n = 0; n < static_cast<int>(nodes.size()); ++n) {
    if (!IsOp(n)) {
      const int e = Entry({n, 0});
      const std::string& name = nodes[n].name;
      auto it = o.shared_args.find(name);
      value[e] = it != o.shared_args.end() ? it->second : make(shape[e], 0);
      if (value[e].dtype() != dtype || value[e].engine() != engine) {
        throw std::invalid_argument("Executor: shared array '" + name +
                                    "' has another type or engine");
      }
      (*args)[name] = value[e];
      if (need_grad[e]) {
        grad[e] = make(shape[e], 0);
        (*grads)[name] = grad[e];
      }
      continue;
    }
    for (int k = 0; k < NumOutputs(n); ++k) {
      const int e = Entry({n, k});
      if (fwd_tensor[e] >= 0) {
        value[e] = view(tensors[fwd_tensor[e]]);
      } else {
        value[e] = make(shape[e], 0);  // a head
      }
      if (grad_tensor[e] >= 0) {
        grad[e] = view(tensors[grad_tensor[e]]);
      } else if (need_grad[e] && Declared(n, OgId(n, k))) {
        grad[e] = make(shape[e], 0);  // a head's (set below) or an unused output's: zeros
      }
    }
    runs[n].aux.clear();
    for (const TShape& s : aux_shape[n]) runs[n].aux.push_back(make(s, 0));
  }
  for (const NodeEntry& h : heads) {
    const int e = Entry(h);
    outputs->push_back(value[e]);
    if (training) {
      if (grad[e].is_none()) grad[e] = make(shape[e], 1);
      grad[e] = 1.0;
      head_grads.push_back(grad[e]);
    }
  }
}

void Executor::Impl::PrepareRuns(const ExecutorOptions& o) {
  std::vector<bool> written(value.size(), false);
  for (int n = 0; n < static_cast<int>(nodes.size()); ++n) {
    if (!IsOp(n)) continue;
    Run& r = runs[n];
    r.op.reset(nodes[n].op->CreateOperator(ctx));
    if (r.op == nullptr) {
      throw std::logic_error("Executor: node '" + nodes[n].name + "' (" +
                             nodes[n].op->TypeString() +
                             "): CreateOperator returned no operator (nullptr)");
    }
    r.name = std::make_shared<const std::string>(nodes[n].name);
    std::vector<TShape> in_shapes;
    for (const NodeEntry& e : nodes[n].inputs) in_shapes.push_back(shape[Entry(e)]);
    for (const ResourceRequest& q : nodes[n].op->ForwardResource(in_shapes))
      r.fwd_res.push_back(rm->Request(ctx, q));
    for (int k = 0; k < NumOutputs(n); ++k) {
      const int t = fwd_tensor[Entry({n, k})];
      r.fwd_req.push_back(t >= 0 && tensors[t].inplace ? kWriteInplace : kWriteTo);
    }
    if (bwd_step[n] >= 0) {
      for (const ResourceRequest& q : nodes[n].op->BackwardResource(in_shapes)) {
        r.bwd_res.push_back(rm->Request(ctx, q));
      }
    }
  }
  // Gradient requests in backward order: the first writer of a gradient
  // writes it, the later ones add to it.
  for (int n : backward_order) {
    Run& r = runs[n];
    for (const NodeEntry& in : nodes[n].inputs) {
      const int e = Entry(in);
      OpReqType req = kNullOp;
      if (need_grad[e] && !grad[e].is_none()) {
        if (written[e]) {
          req = kAddTo;
        } else if (!IsOp(in.node)) {
          const auto it = o.grad_req.find(nodes[in.node].name);
          req = it == o.grad_req.end() || it->second == kWriteInplace ? kWriteTo : it->second;
        } else {
          const int t = grad_tensor[e];
          req = t >= 0 && tensors[t].inplace && tensors[t].def == bwd_step[n] ? kWriteInplace
                                                                              : kWriteTo;
        }
        written[e] = true;
      }
      r.bwd_req.push_back(req);
    }
  }
  // Last, once nothing here can raise any more: the constructor raising
  // would leave these vars undeleted (the destructor deletes them).
  for (int n = 0; n < static_cast<int>(nodes.size()); ++n) {
    if (!IsOp(n) || bwd_step[n] < 0) continue;
    runs[n].state_var = engine->NewVariable();
    internal::MarkScratchVar(engine, runs[n].state_var);
  }
}

void Executor::Impl::CollectInternalVars(const std::vector<NDArray>& outputs,
                                         const std::map<std::string, NDArray>& args,
                                         const std::map<std::string, NDArray>& grads) {
  std::set<VarHandle> visible, internal;
  for (const NDArray& a : outputs) visible.insert(a.var());
  for (const auto& [name, a] : args) visible.insert(a.var());
  for (const auto& [name, a] : grads) visible.insert(a.var());
  auto add = [&](const NDArray& a) {
    if (!a.is_none() && !visible.count(a.var())) internal.insert(a.var());
  };
  for (const NDArray& a : value) add(a);
  for (const NDArray& a : grad) add(a);
  for (const NDArray& a : head_grads) add(a);
  for (const Run& r : runs) {
    for (const NDArray& a : r.aux) add(a);
  }
  internal_vars.assign(internal.begin(), internal.end());
}

OprHandle Executor::Impl::BuildForward(int n, bool is_train) {
  const Graph::Node& node = nodes[n];
  Run& r = runs[n];
  internal::VarLists vars;
  std::vector<TBlob> in, out, aux;
  for (const NodeEntry& e : node.inputs) {
    in.push_back(value[Entry(e)].data());
    vars.Read(value[Entry(e)].var());
  }
  for (int k = 0; k < NumOutputs(n); ++k) {
    out.push_back(value[Entry({n, k})].data());
    vars.Write(value[Entry({n, k})].var());
  }
  for (const NDArray& a : r.aux) {
    aux.push_back(a.data());
    vars.Write(a.var());
  }
  for (const Resource& res : r.fwd_res) vars.Write(res.var);
  vars.Write(r.state_var);  // null (ignored) for a node without backward
  vars.Finish();
  AsyncFn fn = [op = r.op, name = r.name, in, out, aux, req = r.fwd_req, res = r.fwd_res, is_train](
                   RunContext rctx, CallbackOnComplete done) {
    RunOperatorCall(is_train, rctx, res, done,
                    [&](const OpContext& op_ctx) { op->Forward(op_ctx, in, req, out, aux); });
  };
  return engine->NewOperator(std::move(fn), vars.reads(), vars.writes(), FnProperty::kNormal,
                             r.name->c_str());
}

OprHandle Executor::Impl::BuildBackward(int n) {
  const Graph::Node& node = nodes[n];
  Run& r = runs[n];
  const int no = NumOutputs(n), ni = static_cast<int>(node.inputs.size());
  internal::VarLists vars;
  auto use = [&](int id, const NDArray& a) {
    if (!Declared(n, id) || a.is_none()) return TBlob();
    vars.Read(a.var());
    return a.data();
  };
  std::vector<TBlob> og(no), in(ni), out(no), ig(ni), aux;
  for (int k = 0; k < no; ++k) {
    og[k] = use(OgId(n, k), grad[Entry({n, k})]);
    out[k] = use(OutId(n, k), value[Entry({n, k})]);
  }
  for (int j = 0; j < ni; ++j) {
    const int e = Entry(node.inputs[j]);
    in[j] = use(InId(n, j), value[e]);
    if (r.bwd_req[j] != kNullOp) {
      ig[j] = grad[e].data();
      vars.Write(grad[e].var());
    }
  }
  for (const NDArray& a : r.aux) {
    aux.push_back(a.data());
    vars.Write(a.var());
  }
  for (const Resource& res : r.bwd_res) vars.Write(res.var);
  vars.Write(r.state_var);
  vars.Finish();
  AsyncFn fn = [op = r.op, name = r.name, og, in, out, ig, aux, req = r.bwd_req, res = r.bwd_res](
                   RunContext rctx, CallbackOnComplete done) {
    RunOperatorCall(1, rctx, res, done, [&](const OpContext& op_ctx) {
      op->Backward(op_ctx, og, in, out, req, ig, aux);
    });
  };
  return engine->NewOperator(std::move(fn), vars.reads(), vars.writes(), FnProperty::kNormal,
                             r.name->c_str());
}

// ---------------------------------------------------------------------------
// Executor.

Executor::Executor(const Graph& graph, const std::vector<NodeEntry>& heads,
                   const ExecutorOptions& o)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.engine = o.engine != nullptr ? o.engine : Engine::Get();
  m.rm = o.resources != nullptr ? o.resources : ResourceManager::Get();
  if (m.rm->engine() != m.engine) {
    throw std::invalid_argument("Executor: the resource manager belongs to another engine");
  }
  m.ctx = o.ctx;
  m.dtype = o.dtype;
  m.training = o.for_training;
  if (heads.empty()) throw std::invalid_argument("Executor: no heads to compute");
  const int num_nodes = graph.num_nodes();
  for (int n = 0; n < num_nodes; ++n) m.nodes.push_back(graph.node(n));
  int entries = 0;
  for (int n = 0; n < num_nodes; ++n) {
    m.entry_base.push_back(entries);
    entries += m.NumOutputs(n);
  }
  for (const NodeEntry& h : heads) {
    if (h.node < 0 || h.node >= num_nodes || !m.IsOp(h.node) || h.index < 0 ||
        h.index >= m.NumOutputs(h.node)) {
      throw std::invalid_argument(
          "Executor: every head must be an output of an operator node of the graph");
    }
  }
  // One head gradient per head entry: the same entry given twice would need
  // its two head gradients summed; rejected instead (executor.h).
  for (std::size_t i = 0; i < heads.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (heads[i].node == heads[j].node && heads[i].index == heads[j].index) {
        throw std::invalid_argument("Executor: head '" +
                                    m.EntryName(heads[i].node, heads[i].index) +
                                    "' is given twice (heads " + std::to_string(j) + " and " +
                                    std::to_string(i) + "); give each output once");
      }
    }
  }
  std::set<std::string> vars;
  for (const std::string& a : graph.ListArguments()) vars.insert(a);
  auto check_names = [&](const auto& map, const char* what) {
    for (const auto& [name, v] : map) {
      if (!vars.count(name)) {
        std::string list;
        for (const auto& a : vars) list += (list.empty() ? "" : ", ") + a;
        throw std::invalid_argument(std::string("Executor: ") + what + " names unknown variable '" +
                                    name + "'; variables: " + list);
      }
    }
  };
  check_names(o.arg_shapes, "arg_shapes");
  check_names(o.shared_args, "shared_args");
  check_names(o.grad_req, "grad_req");
  m.heads = heads;
  m.shape.resize(static_cast<std::size_t>(entries));
  m.value.resize(static_cast<std::size_t>(entries));
  m.grad.resize(static_cast<std::size_t>(entries));
  m.need_grad.assign(static_cast<std::size_t>(entries), false);
  m.consumers.resize(static_cast<std::size_t>(entries));
  m.fwd_tensor.assign(static_cast<std::size_t>(entries), -1);
  m.grad_tensor.assign(static_cast<std::size_t>(entries), -1);
  m.aux_shape.resize(static_cast<std::size_t>(num_nodes));
  for (int n = 0; n < num_nodes; ++n) {
    if (m.IsOp(n)) m.aux_shape[n].resize(m.nodes[n].op->ListAuxiliaryStates().size());
  }
  m.fwd_step.assign(static_cast<std::size_t>(num_nodes), -1);
  m.bwd_step.assign(static_cast<std::size_t>(num_nodes), -1);
  m.deps.resize(static_cast<std::size_t>(num_nodes));
  m.runs.resize(static_cast<std::size_t>(num_nodes));

  m.InferShapes(o);
  for (int n = 0; n < num_nodes; ++n) {
    if (!m.IsOp(n)) arg_shapes_[m.nodes[n].name] = m.shape[m.Entry({n, 0})];
  }
  m.FindGradients(o);
  m.CollectTensors();
  m.Plan(o, &stats_);
  m.Allocate(o, &args_, &grads_, &outputs_);
  m.PrepareRuns(o);
  m.CollectInternalVars(outputs_, args_, grads_);
}

Executor::~Executor() {
  // Each engine operator finishes its pending pushes before it is deleted;
  // the closures own what they use.
  for (Impl::Run& r : impl_->runs) {
    for (OprHandle h : {r.fwd[0], r.fwd[1], r.bwd}) {
      if (h != nullptr) impl_->engine->DeleteOperator(h);
    }
    // After every pushed function that writes it.
    if (r.state_var != nullptr) {
      impl_->engine->DeleteVariable([](RunContext) {}, impl_->ctx, r.state_var);
    }
  }
}

void Executor::Forward(bool is_train) {
  Impl& m = *impl_;
  // A new run. A failure of an earlier run stays in the internal arrays
  // (the user cannot wait on them to clear it) and would make every later
  // run be skipped. So when some var may hold a failure (one load; never
  // in a run without failures), clear the internal vars first, after every
  // earlier use of them: every function of the earlier runs that reads them
  // has passed their failure on by then (to the arrays the user sees, or,
  // for a dead end, it is left to WaitForAll, which still reports it). The
  // arrays the user sees keep theirs until delivered.
  if (!m.internal_vars.empty() && internal::MayHaveFailedVars(m.engine)) {
    internal::PushClearFailures(m.engine, m.ctx, m.internal_vars);
  }
  for (int n = 0; n < static_cast<int>(m.nodes.size()); ++n) {
    if (!m.IsOp(n)) continue;
    OprHandle& h = m.runs[n].fwd[is_train ? 1 : 0];
    if (h == nullptr) h = m.BuildForward(n, is_train);
    m.engine->Push(h, m.ctx);
  }
}

void Executor::Backward(const std::vector<NDArray>& head_grads) {
  Impl& m = *impl_;
  if (!m.training) throw std::logic_error("Executor::Backward: bound with for_training = false");
  if (!head_grads.empty()) {
    if (head_grads.size() != m.head_grads.size()) {
      throw std::invalid_argument("Executor::Backward: expected " +
                                  std::to_string(m.head_grads.size()) + " head gradients, got " +
                                  std::to_string(head_grads.size()));
    }
    m.head_grads_are_ones = false;
    for (std::size_t i = 0; i < head_grads.size(); ++i) CopyFromTo(head_grads[i], &m.head_grads[i]);
  } else if (!m.head_grads_are_ones) {
    // An earlier Backward(head_grads) overwrote them: ones again (pushed,
    // ordered before the backward operators that read them).
    for (NDArray& g : m.head_grads) g = 1.0;
    m.head_grads_are_ones = true;
  }
  for (int n : m.backward_order) {
    OprHandle& h = m.runs[n].bwd;
    if (h == nullptr) h = m.BuildBackward(n);
    m.engine->Push(h, m.ctx);
  }
}

const NDArray& Executor::arg(const std::string& name) const {
  auto it = args_.find(name);
  if (it == args_.end())
    throw std::invalid_argument("Executor::arg: unknown variable '" + name + "'");
  return it->second;
}

const NDArray& Executor::grad(const std::string& name) const {
  static const NDArray kNone;
  if (!args_.count(name))
    throw std::invalid_argument("Executor::grad: unknown variable '" + name + "'");
  auto it = grads_.find(name);
  return it == grads_.end() ? kNone : it->second;
}

std::string Executor::PlanString() const {
  std::ostringstream s;
  for (const Tensor& t : impl_->tensors) {
    s << t.name << " " << t.shape.ToString() << " " << t.bytes << " B steps [" << t.def << ", "
      << t.last << "] block " << t.block << (t.inplace ? " (in place)" : "")
      << (t.forward && !t.kept && impl_->training ? " (not kept for backward)" : "") << "\n";
  }
  s << "tensors " << stats_.tensors << ", blocks " << stats_.blocks << ", in place "
    << stats_.inplace << "; naive " << stats_.naive_bytes << " B, planned " << stats_.planned_bytes
    << " B, saved " << stats_.saved_bytes() << " B";
  if (stats_.naive_bytes > 0)
    s << " (" << (100 * stats_.saved_bytes() / stats_.naive_bytes) << "%)";
  s << "\n";
  return s.str();
}

}  // namespace depengine
