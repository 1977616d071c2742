// Graph: building a DAG of variables and operators.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "depengine/executor.h"

namespace depengine {

namespace {

void CheckNewName(const std::vector<Graph::Node>& nodes, const std::string& name) {
  for (const Graph::Node& n : nodes) {
    if (n.name == name)
      throw std::invalid_argument("Graph: the name '" + name + "' is already used");
  }
}

}  // namespace

NodeEntry Graph::Variable(const std::string& name) {
  CheckNewName(nodes_, name);
  nodes_.push_back(Node{name, nullptr, {}});
  return NodeEntry{static_cast<int>(nodes_.size()) - 1, 0};
}

std::vector<NodeEntry> Graph::AddOp(const std::string& op_type, const std::string& name,
                                    const KwArgs& kwargs, const std::vector<NodeEntry>& inputs) {
  CheckNewName(nodes_, name);
  std::shared_ptr<const OperatorProperty> prop = OperatorProperty::Create(op_type, kwargs);
  const std::vector<std::string> args = prop->ListArguments();
  if (inputs.size() > args.size()) {
    throw std::invalid_argument("Graph: " + op_type + " '" + name + "' takes " +
                                std::to_string(args.size()) + " inputs, got " +
                                std::to_string(inputs.size()));
  }
  for (const NodeEntry& e : inputs) {
    if (e.node < 0 || e.node >= num_nodes()) {
      throw std::invalid_argument("Graph: an input of '" + name + "' is not a node of this graph");
    }
    const Node& src = nodes_[static_cast<std::size_t>(e.node)];
    const int outs = src.op ? src.op->NumOutputs() : 1;
    if (e.index < 0 || e.index >= outs) {
      throw std::invalid_argument("Graph: an input of '" + name + "' names output " +
                                  std::to_string(e.index) + " of '" + src.name + "', which has " +
                                  std::to_string(outs));
    }
  }
  // The executor indexes ListOutputs() by output and the caller the visible
  // outputs: declarations that contradict each other are the operator's
  // bug, reported here rather than as a crash later.
  const int num_outputs = prop->NumOutputs();
  const int visible = prop->NumVisibleOutputs();
  const std::size_t names = prop->ListOutputs().size();
  if (num_outputs < 1 || static_cast<std::size_t>(num_outputs) != names || visible < 1 ||
      visible > num_outputs) {
    throw std::logic_error("Graph: operator " + op_type + " (node '" + name +
                           "') declares NumOutputs() = " + std::to_string(num_outputs) +
                           ", NumVisibleOutputs() = " + std::to_string(visible) +
                           " and ListOutputs() with " + std::to_string(names) +
                           " names; it needs NumOutputs() = ListOutputs().size() >= 1 and 1 <= "
                           "NumVisibleOutputs() <= NumOutputs()");
  }
  // Every name is checked before anything is added, so a failed AddOp
  // leaves the graph as it was.
  std::vector<std::string> new_vars;
  for (std::size_t i = inputs.size(); i < args.size(); ++i) {
    // MXNet's convention for the loss label: "<name>_label".
    const std::string var = name + "_" + args[i];
    CheckNewName(nodes_, var);
    if (std::find(new_vars.begin(), new_vars.end(), var) != new_vars.end()) {
      throw std::invalid_argument("Graph: the name '" + var + "' is already used");
    }
    new_vars.push_back(var);
  }
  std::vector<NodeEntry> bound(inputs);
  for (const std::string& var : new_vars) bound.push_back(Variable(var));
  nodes_.push_back(Node{name, std::move(prop), std::move(bound)});
  std::vector<NodeEntry> outs;
  outs.reserve(static_cast<std::size_t>(visible));
  for (int k = 0; k < visible; ++k)
    outs.push_back(NodeEntry{static_cast<int>(nodes_.size()) - 1, k});
  return outs;
}

std::vector<std::string> Graph::ListArguments() const {
  std::vector<std::string> names;
  for (const Node& n : nodes_) {
    if (!n.op) names.push_back(n.name);
  }
  return names;
}

}  // namespace depengine
