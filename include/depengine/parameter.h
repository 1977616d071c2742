// Typed operator parameters parsed from key=value strings (the role of
// dmlc::Parameter in MXNet). An operator describes its parameter struct once
// with a ParamSchema; Init parses a kwargs list into the struct and raises a
// ParamError that names the operator, the parameter and what it accepts when
// a value is bad, a required parameter is missing or a key is unknown:
//
//   struct PoolingParam {
//     TShape kernel;
//     int pool_type;
//     static const ParamSchema<PoolingParam>& Schema() {
//       static const ParamSchema<PoolingParam> schema = [] {
//         ParamSchema<PoolingParam> s;
//         s.Field("kernel", &PoolingParam::kernel).describe("pooling window (h,w)");
//         s.Field("pool_type", &PoolingParam::pool_type)
//             .add_enum("max", 0).add_enum("avg", 1).set_default(0);
//         return s;
//       }();
//       return schema;
//     }
//   };
//   PoolingParam p;
//   PoolingParam::Schema().Init(&p, {{"kernel", "(2,2)"}}, "Pooling");
//
// A schema is immutable once built and may be used from any thread.
#pragma once

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "depengine/tensor.h"

namespace depengine {

using KwArgs = std::vector<std::pair<std::string, std::string>>;

// A bad, missing or unknown parameter. what() names the owner (the operator),
// the parameter and what it accepts.
class ParamError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

namespace internal {

// One field of a parameter struct P, type-erased for the schema.
template <class P>
class FieldBase {
 public:
  explicit FieldBase(std::string name) : name_(std::move(name)) {}
  virtual ~FieldBase() = default;
  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }
  bool has_default() const { return has_default_; }
  // Parses `value` into p; returns false when it is not acceptable.
  virtual bool Parse(P* p, const std::string& value) const = 0;
  virtual void SetDefault(P* p) const = 0;
  virtual std::string Format(const P& p) const = 0;
  // What the field accepts, e.g. "an integer >= 1" or "one of relu, tanh".
  virtual std::string Accepts() const = 0;

 protected:
  std::string name_;
  std::string description_;
  bool has_default_ = false;
};

inline bool ParseValue(const std::string& s, bool* out) {
  if (s == "true" || s == "True" || s == "1") {
    *out = true;
  } else if (s == "false" || s == "False" || s == "0") {
    *out = false;
  } else {
    return false;
  }
  return true;
}
template <class T>
requires std::is_integral_v<T>
bool ParseValue(const std::string& s, T* out) {
  const char* b = s.data();
  const char* e = s.data() + s.size();
  while (b < e && *b == ' ') ++b;
  const auto r = std::from_chars(b, e, *out);
  return r.ec == std::errc() && r.ptr == e && b != e;
}
template <class T>
requires std::is_floating_point_v<T>
bool ParseValue(const std::string& s, T* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end != s.c_str() + s.size()) return false;
  *out = static_cast<T>(v);
  return true;
}
inline bool ParseValue(const std::string& s, std::string* out) {
  *out = s;
  return true;
}
inline bool ParseValue(const std::string& s, TShape* out) {
  try {
    *out = TShape::Parse(s);
  } catch (const std::invalid_argument&) {
    return false;
  }
  return true;
}

inline std::string FormatValue(bool v) { return v ? "true" : "false"; }
template <class T>
requires std::is_arithmetic_v<T> std::string FormatValue(T v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}
inline std::string FormatValue(const std::string& v) { return v; }
inline std::string FormatValue(const TShape& v) { return v.ToString(); }

template <class T>
std::string TypeDescription() {
  if constexpr (std::is_same_v<T, bool>) {
    return "a boolean (true, false, 1 or 0)";
  } else if constexpr (std::is_integral_v<T>) {
    return "an integer";
  } else if constexpr (std::is_floating_point_v<T>) {
    return "a number";
  } else if constexpr (std::is_same_v<T, TShape>) {
    return "a shape such as (2,2)";
  } else {
    return "a string";
  }
}

}  // namespace internal

// One field of a parameter struct: its type T, default, bounds, enum names.
// Built through ParamSchema::Field; the setters chain. A floating-point
// field never accepts NaN, and one with a bound, or marked set_finite(),
// accepts only finite values ("a finite number in [0, 1]").
template <class P, class T>
class ParamField final : public internal::FieldBase<P> {
 public:
  ParamField(std::string name, T P::*member)
      : internal::FieldBase<P>(std::move(name)), member_(member) {}

  ParamField& set_default(T value) {
    default_ = std::move(value);
    this->has_default_ = true;
    return *this;
  }
  ParamField& set_lower_bound(T value) requires std::is_arithmetic_v<T> {
    lower_ = value;
    return *this;
  }
  ParamField& set_upper_bound(T value) requires std::is_arithmetic_v<T> {
    upper_ = value;
    return *this;
  }
  ParamField& set_range(T lo, T hi) requires std::is_arithmetic_v<T> {
    lower_ = lo;
    upper_ = hi;
    return *this;
  }
  // Refuses infinities too, for a field with no bound (a bounded one
  // already does).
  ParamField& set_finite() requires std::is_floating_point_v<T> {
    finite_ = true;
    return *this;
  }
  // Makes the field an enumeration: only the added names are accepted, and
  // each stores its value. Only for integer fields.
  ParamField& add_enum(std::string name,
                       T value) requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    enum_.emplace_back(std::move(name), value);
    return *this;
  }
  // `text` is moved below; clang-tidy 14 misses a move into a member of a
  // dependent base.
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  ParamField& describe(std::string text) {
    this->description_ = std::move(text);
    return *this;
  }

  bool Parse(P* p, const std::string& value) const override {
    T v{};
    if (!enum_.empty()) {
      for (const auto& [n, ev] : enum_) {
        if (n == value) {
          p->*member_ = ev;
          return true;
        }
      }
      return false;
    }
    if (!internal::ParseValue(value, &v)) return false;
    if constexpr (std::is_floating_point_v<T>) {
      // NaN compares false against both bounds, so it would pass any range:
      // never accepted. A bounded field takes finite values only (an
      // infinite learning rate or weight decay is not "a number >= 0").
      if (std::isnan(v)) return false;
      if ((finite_ || lower_ || upper_) && std::isinf(v)) return false;
    }
    if constexpr (std::is_arithmetic_v<T>) {
      if (lower_ && v < *lower_) return false;
      if (upper_ && v > *upper_) return false;
    }
    p->*member_ = std::move(v);
    return true;
  }
  void SetDefault(P* p) const override { p->*member_ = default_; }
  std::string Format(const P& p) const override {
    // Enumerations are integer fields only (add_enum): no floating-point
    // == in a user's build (-Wfloat-equal).
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      for (const auto& [n, ev] : enum_) {
        if (ev == p.*member_) return n;
      }
    }
    return internal::FormatValue(p.*member_);
  }
  std::string Accepts() const override {
    if (!enum_.empty()) {
      std::string s = "one of ";
      for (std::size_t i = 0; i < enum_.size(); ++i) s += (i ? ", " : "") + enum_[i].first;
      return s;
    }
    std::string s = internal::TypeDescription<T>();
    if constexpr (std::is_floating_point_v<T>) {
      if (finite_ || lower_ || upper_) s = "a finite number";
    }
    if constexpr (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) {
      if (lower_ && upper_) {
        s += " in [" + internal::FormatValue(*lower_) + ", " + internal::FormatValue(*upper_) + "]";
      } else if (lower_) {
        s += " >= " + internal::FormatValue(*lower_);
      } else if (upper_) {
        s += " <= " + internal::FormatValue(*upper_);
      }
    }
    return s;
  }

 private:
  T P::*member_;
  T default_{};
  std::optional<T> lower_, upper_;
  bool finite_ = false;  // set_finite()
  std::vector<std::pair<std::string, T>> enum_;
};

// The description of a parameter struct P: its fields in order.
template <class P>
class ParamSchema {
 public:
  // Adds a field named `name` stored in `member`; required unless
  // set_default is called on the result.
  template <class T>
  ParamField<P, T>& Field(std::string name, T P::*member) {
    auto f = std::make_unique<ParamField<P, T>>(std::move(name), member);
    ParamField<P, T>& ref = *f;
    fields_.push_back(std::move(f));
    return ref;
  }

  // Sets every field of *p from `kwargs`, defaults for the rest. Raises
  // ParamError naming `owner` for an unknown or repeated key, a value the
  // field does not accept, or a missing required field.
  void Init(P* p, const KwArgs& kwargs, std::string_view owner) const {
    std::set<std::string> seen;
    for (const auto& [key, value] : kwargs) {
      const internal::FieldBase<P>* f = Find(key);
      if (f == nullptr) {
        throw ParamError(std::string(owner) + ": unknown parameter '" + key +
                         "'; accepted parameters: " + Describe());
      }
      if (!seen.insert(key).second) {
        throw ParamError(std::string(owner) + ": parameter '" + key + "' is given twice");
      }
      if (!f->Parse(p, value)) {
        throw ParamError(std::string(owner) + ": parameter '" + key + "' expects " + f->Accepts() +
                         ", got '" + value + "'");
      }
    }
    for (const auto& f : fields_) {
      if (seen.count(f->name())) continue;
      if (!f->has_default()) {
        throw ParamError(std::string(owner) + ": required parameter '" + f->name() + "' (" +
                         f->Accepts() + ") is missing");
      }
      f->SetDefault(p);
    }
  }

  // The value of every field as key=value strings, which Init accepts back.
  std::map<std::string, std::string> ToMap(const P& p) const {
    std::map<std::string, std::string> m;
    for (const auto& f : fields_) m[f->name()] = f->Format(p);
    return m;
  }

  // "name (accepts[, required])" for every field, comma separated; "none"
  // when there are no fields.
  std::string Describe() const {
    if (fields_.empty()) return "none";
    std::string s;
    for (const auto& f : fields_) {
      if (!s.empty()) s += ", ";
      s += f->name() + " (" + f->Accepts() + (f->has_default() ? "" : ", required") + ")";
    }
    return s;
  }

  bool Has(std::string_view name) const { return Find(name) != nullptr; }

 private:
  const internal::FieldBase<P>* Find(std::string_view name) const {
    for (const auto& f : fields_) {
      if (f->name() == name) return f.get();
    }
    return nullptr;
  }
  std::vector<std::unique_ptr<internal::FieldBase<P>>> fields_;
};

}  // namespace depengine
