// Graph: building a DAG of variables and operators.
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
  std::vector<NodeEntry> bound(inputs);
  for (std::size_t i = inputs.size(); i < args.size(); ++i) {
    // MXNet's convention for the loss label: "<name>_label".
    bound.push_back(Variable(name + "_" + args[i]));
  }
  const int visible = prop->NumVisibleOutputs();
  nodes_.push_back(Node{name, std::move(prop), std::move(bound)});
  std::vector<NodeEntry> outs;
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
