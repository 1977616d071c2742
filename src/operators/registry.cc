// The registries of OperatorProperty factories and simple ops. One mutex
// guards both tables so that a name is unique across them.
#include "operators/registry.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>

namespace depengine {
namespace {

struct Registries {
  std::mutex mu;
  struct OpEntry {
    OperatorRegistry::Factory factory;
    std::string description;
  };
  // mu guards the maps. Entries are never removed (std::map nodes and the
  // SimpleOpRegEntry objects stay put), so Find's pointers outlive the lock;
  // an entry is filled in by its registration, which must come before any
  // concurrent use (simple_op.h).
  std::map<std::string, OpEntry> ops;
  std::map<std::string, std::unique_ptr<SimpleOpRegEntry>> simple_ops;
};

Registries& Tables() {
  static Registries r;
  return r;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

namespace internal {

void AddOperator(const std::string& name, OperatorRegistry::Factory factory,
                 std::string description) {
  Registries& t = Tables();
  std::lock_guard<std::mutex> lock(t.mu);
  if (t.ops.count(name) || t.simple_ops.count(name)) {
    throw std::invalid_argument("OperatorRegistry::Register: the name '" + name +
                                "' is already registered");
  }
  t.ops.emplace(name, Registries::OpEntry{std::move(factory), std::move(description)});
}

SimpleOpRegEntry& AddSimpleOp(const std::string& name) {
  Registries& t = Tables();
  std::lock_guard<std::mutex> lock(t.mu);
  if (t.ops.count(name) || t.simple_ops.count(name)) {
    throw std::invalid_argument("SimpleOpRegistry::Register: the name '" + name +
                                "' is already registered");
  }
  auto entry = std::make_unique<SimpleOpRegEntry>(name);
  SimpleOpRegEntry& ref = *entry;
  t.simple_ops.emplace(name, std::move(entry));
  return ref;
}

}  // namespace internal

bool OperatorRegistry::Register(const std::string& name, Factory factory, std::string description) {
  if (!factory) {
    throw std::invalid_argument("OperatorRegistry::Register: the factory of '" + name +
                                "' is empty");
  }
  internal::EnsureBuiltinOps();
  internal::AddOperator(name, std::move(factory), std::move(description));
  return true;
}

const OperatorRegistry::Factory* OperatorRegistry::Find(const std::string& name) {
  internal::EnsureBuiltinOps();
  Registries& t = Tables();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.ops.find(name);
  return it == t.ops.end() ? nullptr : &it->second.factory;
}

std::vector<std::string> OperatorRegistry::ListNames() {
  internal::EnsureBuiltinOps();
  Registries& t = Tables();
  std::lock_guard<std::mutex> lock(t.mu);
  std::vector<std::string> names;
  for (const auto& [n, e] : t.ops) names.push_back(n);
  for (const auto& [n, e] : t.simple_ops) {
    if (e->symbolic()) names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string OperatorRegistry::Describe(const std::string& name) {
  internal::EnsureBuiltinOps();
  Registries& t = Tables();
  std::lock_guard<std::mutex> lock(t.mu);
  if (auto it = t.ops.find(name); it != t.ops.end()) return it->second.description;
  if (auto it = t.simple_ops.find(name); it != t.simple_ops.end()) return it->second->description();
  return "";
}

SimpleOpRegEntry& SimpleOpRegistry::Register(const std::string& name) {
  internal::EnsureBuiltinOps();
  return internal::AddSimpleOp(name);
}

const SimpleOpRegEntry* SimpleOpRegistry::Find(const std::string& name) {
  internal::EnsureBuiltinOps();
  Registries& t = Tables();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.simple_ops.find(name);
  return it == t.simple_ops.end() ? nullptr : it->second.get();
}

const SimpleOpRegEntry& SimpleOpRegistry::Get(const std::string& name) {
  const SimpleOpRegEntry* e = Find(name);
  if (e == nullptr) {
    throw std::invalid_argument("unknown simple op '" + name +
                                "'; registered simple ops: " + JoinNames(ListNames()));
  }
  return *e;
}

std::vector<std::string> SimpleOpRegistry::ListNames() {
  internal::EnsureBuiltinOps();
  Registries& t = Tables();
  std::lock_guard<std::mutex> lock(t.mu);
  std::vector<std::string> names;
  for (const auto& [n, e] : t.simple_ops) names.push_back(n);
  return names;
}

std::unique_ptr<OperatorProperty> OperatorProperty::Create(const std::string& type_name) {
  if (const auto* factory = OperatorRegistry::Find(type_name)) {
    std::unique_ptr<OperatorProperty> p = (*factory)();
    if (p == nullptr) {
      throw std::logic_error("OperatorProperty::Create: the factory registered for '" + type_name +
                             "' returned no property (nullptr)");
    }
    return p;
  }
  if (const SimpleOpRegEntry* e = SimpleOpRegistry::Find(type_name);
      e != nullptr && e->symbolic()) {
    return internal::MakeSimpleOpProperty(*e);
  }
  throw std::invalid_argument("unknown operator '" + type_name + "'; registered operators: " +
                              JoinNames(OperatorRegistry::ListNames()));
}

std::unique_ptr<OperatorProperty> OperatorProperty::Create(const std::string& type_name,
                                                           const KwArgs& kwargs) {
  auto p = Create(type_name);
  p->Init(kwargs);
  return p;
}

}  // namespace depengine
