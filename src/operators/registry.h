// Internal side of the operator registries: adding entries without
// triggering the registration of the built-in operators, and that
// registration itself (builtin_ops.cc).
#pragma once

#include <string>

#include "depengine/operator.h"
#include "depengine/simple_op.h"

namespace depengine::internal {

// Registers the built-in operators and simple ops, once. Every public
// registry call runs it first, so built-ins exist before any lookup and
// before a user registration can collide with them.
void EnsureBuiltinOps();

// Adds to the registries directly; for EnsureBuiltinOps's callees.
void AddOperator(const std::string& name, OperatorRegistry::Factory factory,
                 std::string description);
SimpleOpRegEntry& AddSimpleOp(const std::string& name);

// The OperatorProperty that runs simple op `entry` (simple_op.cc).
std::unique_ptr<OperatorProperty> MakeSimpleOpProperty(const SimpleOpRegEntry& entry);

}  // namespace depengine::internal
