// TShape, element types and TBlob.
#include "depengine/tensor.h"

#include <cctype>
#include <stdexcept>
#include <string>

namespace depengine {

std::size_t TypeSize(int type) {
  return SwitchType(type, [](auto tag) { return sizeof(tag); });
}

const char* TypeName(int type) {
  switch (type) {
    case kFloat32:
      return "float32";
    case kFloat64:
      return "float64";
    default:
      return "unknown";
  }
}

TShape::index_t TShape::Size() const {
  if (dims_.empty()) return 0;
  return ProdShape(0, ndim());
}

TShape::index_t TShape::ProdShape(int begin, int end) const {
  // Negative dimensions first, and a zero anywhere makes the product 0, so
  // the result does not depend on the order of the dimensions.
  bool zero = false;
  for (int i = begin; i < end; ++i) {
    const index_t d = dims_[static_cast<std::size_t>(i)];
    if (d < 0) {
      throw std::invalid_argument("TShape: shape " + ToString() + " has a negative dimension (" +
                                  std::to_string(d) + " at axis " + std::to_string(i) + ")");
    }
    zero = zero || d == 0;
  }
  if (zero) return 0;
  index_t p = 1;
  for (int i = begin; i < end; ++i) {
    if (__builtin_mul_overflow(p, dims_[static_cast<std::size_t>(i)], &p) || p > kMaxSize) {
      throw std::invalid_argument("TShape: the element count of shape " + ToString() +
                                  " overflows (more than " + std::to_string(kMaxSize) +
                                  " elements)");
    }
  }
  return p;
}

TShape TShape::FlatTo2D() const {
  if (dims_.empty()) return TShape();
  if (dims_.size() == 1) return TShape{1, dims_[0]};
  return TShape{ProdShape(0, ndim() - 1), dims_.back()};
}

std::string TShape::ToString() const {
  std::string s = "(";
  for (std::size_t i = 0; i < dims_.size(); ++i) {
    if (i != 0) s += ",";
    s += std::to_string(dims_[i]);
  }
  if (dims_.size() == 1) s += ",";
  return s + ")";
}

TShape TShape::Parse(std::string_view text) {
  auto fail = [&] {
    throw std::invalid_argument("TShape::Parse: '" + std::string(text) +
                                "' is not a shape such as (2,2)");
  };
  std::size_t i = 0;
  auto skip = [&] {
    while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  };
  skip();
  char close = 0;
  if (i < text.size() && (text[i] == '(' || text[i] == '[')) {
    close = text[i] == '(' ? ')' : ']';
    ++i;
  }
  std::vector<index_t> dims;
  bool expect_number = true;
  for (;;) {
    skip();
    if (i >= text.size()) break;
    if (close != 0 && text[i] == close) break;
    if (expect_number) {
      if (!std::isdigit(static_cast<unsigned char>(text[i]))) fail();
      index_t v = 0;
      while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
        v = v * 10 + (text[i] - '0');
        if (v > (index_t{1} << 40)) fail();
        ++i;
      }
      dims.push_back(v);
      expect_number = false;
    } else {
      if (text[i] != ',') fail();
      ++i;
      expect_number = true;
    }
  }
  if (close != 0) {
    if (i >= text.size() || text[i] != close) fail();
    ++i;
    skip();
  }
  if (i != text.size()) fail();
  // A trailing comma is allowed only after a number, as in "(2,)".
  if (expect_number && !dims.empty() && close == 0) fail();
  return TShape(std::move(dims));
}

TBlob TBlob::Reshape(const TShape& shape) const {
  if (shape.Size() != shape_.Size()) {
    throw std::invalid_argument("TBlob::Reshape: cannot view " + shape_.ToString() + " as " +
                                shape.ToString());
  }
  return TBlob(dptr_, shape, type_flag_, ctx_);
}

}  // namespace depengine
