// Defaults of the operator interface, and ShapeAssign.
#include "depengine/operator.h"

#include <stdexcept>

namespace depengine {

void Operator::Backward(const OpContext&, const std::vector<TBlob>&, const std::vector<TBlob>&,
                        const std::vector<TBlob>&, const std::vector<OpReqType>&,
                        const std::vector<TBlob>&, const std::vector<TBlob>&) {
  throw std::logic_error("Operator::Backward: this operator has no gradient");
}

std::vector<ResourceRequest> OperatorProperty::ForwardResource(const std::vector<TShape>&) const {
  return {};
}

std::vector<ResourceRequest> OperatorProperty::BackwardResource(const std::vector<TShape>&) const {
  return {};
}

std::vector<int> OperatorProperty::DeclareBackwardDependency(
    const std::vector<int>& out_grad, const std::vector<int>& in_data,
    const std::vector<int>& out_data) const {
  std::vector<int> deps(out_grad);
  deps.insert(deps.end(), in_data.begin(), in_data.end());
  deps.insert(deps.end(), out_data.begin(), out_data.end());
  return deps;
}

std::vector<std::pair<int, void*>> OperatorProperty::ForwardInplaceOption(
    const std::vector<int>&, const std::vector<void*>&) const {
  return {};
}

std::vector<std::pair<int, void*>> OperatorProperty::BackwardInplaceOption(
    const std::vector<int>&, const std::vector<int>&, const std::vector<int>&,
    const std::vector<void*>&) const {
  return {};
}

void ShapeAssign(const std::string& op, const std::string& what, TShape* slot,
                 const TShape& expected) {
  if (!slot->known()) {
    *slot = expected;
    return;
  }
  if (*slot != expected) {
    throw ShapeError(op + ": " + what + " has shape " + slot->ToString() + " but " +
                     expected.ToString() + " is required");
  }
}

}  // namespace depengine
