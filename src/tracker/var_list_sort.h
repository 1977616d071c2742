// A function's var list as sortable keys: how a push and NewOperator turn
// const_vars and mutable_vars into one list in lock order.
#pragma once

#include <cstdint>

namespace depengine::internal {

// Sorts a function's var list, given as keys (`Var* | 1` for a write), by
// var, a read before a write of the same var; merges duplicates within a
// list and returns how many keys remain. A var in both lists is an error:
// std::invalid_argument, named after `call` (a null handle in both is left
// to the null check that follows).
std::uint32_t SortAndMergeVarKeys(std::uintptr_t* keys, std::uint32_t n, const char* call);

}  // namespace depengine::internal
