// The text forms the profiler's dumps share (dump_format.h).
#include "profiler/dump_format.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <system_error>

namespace depengine::internal::dump {

const char* PropName(FnProperty p) {
  switch (p) {
    case FnProperty::kNormal:
      return "kNormal";
    case FnProperty::kCopyFromGPU:
      return "kCopyFromGPU";
    case FnProperty::kCopyToGPU:
      return "kCopyToGPU";
    case FnProperty::kCPUPrioritized:
      return "kCPUPrioritized";
    case FnProperty::kAsync:
      return "kAsync";
  }
  return "?";
}

std::string DeviceName(const Context& c) {
  switch (c.dev_type) {
    case DeviceType::kCPU:
      return "cpu(" + std::to_string(c.dev_id) + ")";
    case DeviceType::kGPU:
      return "gpu(" + std::to_string(c.dev_id) + ")";
    case DeviceType::kCPUPinned:
      return "cpu_pinned(" + std::to_string(c.dev_id) + ")";
  }
  return "?";
}

namespace {

// The length of the valid UTF-8 sequence at s[i] (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF), or 0 when it is not one;
// `*bad` is then how many bytes to replace with one U+FFFD (the maximal
// subpart of a sequence, as Unicode recommends), at least 1.
std::size_t Utf8SequenceAt(const std::string& s, std::size_t i, std::size_t* bad) {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t n;
  unsigned char lo = 0x80, hi = 0xbf;  // the range of the second byte
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;  // overlong below
    if (c == 0xed) hi = 0x9f;  // surrogates above
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;  // overlong below
    if (c == 0xf4) hi = 0x8f;  // above U+10FFFF
  } else {
    *bad = 1;  // a stray continuation byte, C0/C1 (always overlong), or F5..FF
    return 0;
  }
  for (std::size_t k = 1; k < n; ++k) {
    const auto d = i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0;
    if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xbf)) {
      *bad = k;
      return 0;
    }
  }
  return n;
}

// Appends the UTF-8 sequence at s[i] (a byte >= 0x80) to `out`, or U+FFFD
// when it is not valid; returns the index after what it consumed.
std::size_t AppendUtf8At(const std::string& s, std::size_t i, std::string* out) {
  std::size_t bad = 0;
  if (const std::size_t n = Utf8SequenceAt(s, i, &bad); n > 0) {
    out->append(s, i, n);
    return i + n;
  }
  *out += "\xef\xbf\xbd";  // U+FFFD REPLACEMENT CHARACTER
  return i + bad;
}

// Appends `s` to `out` as valid UTF-8 (bytes that are not become U+FFFD),
// writing each ASCII character through `ascii(c, out)`: the outputs differ
// only in how they escape those.
template <class Ascii>
void AppendEscaped(const std::string& s, std::string* out, Ascii ascii) {
  out->reserve(out->size() + s.size());
  for (std::size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) >= 0x80) {
      i = AppendUtf8At(s, i, out);
    } else {
      ascii(s[i++], out);
    }
  }
}
}  // namespace

// A JSON string literal of `s`, valid JSON (and UTF-8) whatever the name
// holds.
std::string JsonString(const std::string& s) {
  std::string out = "\"";
  AppendEscaped(s, &out, [](char c, std::string* o) {
    switch (c) {
      case '"':
        *o += "\\\"";
        break;
      case '\\':
        *o += "\\\\";
        break;
      case '\n':
        *o += "\\n";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          *o += buf;
        } else {
          *o += c;
        }
    }
  });
  return out + "\"";
}

// `s` as one cell of a Markdown table row: a '|' would end the cell and a
// line break the row, so they are written as "\|" and as a space.
std::string MarkdownCell(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

// `s` as the text of a Graphviz label inside a quoted string. There a
// backslash starts an escape (\n a line break, \N the node's name; an
// unknown one is dropped), so a JSON string literal is not one: "\u0009"
// showed as "u0009". '"' and '\' are escaped, a line break is written \n,
// other control characters become a space, and bytes that are not valid
// UTF-8 become U+FFFD, as in the JSON outputs (Graphviz reads UTF-8).
std::string DotLabelText(const std::string& s) {
  std::string out;
  AppendEscaped(s, &out, [](char c, std::string* o) {
    if (c == '"' || c == '\\') {
      *o += '\\';
      *o += c;
    } else if (c == '\n') {
      *o += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      *o += ' ';
    } else {
      *o += c;
    }
  });
  return out;
}

using VarNameMap = std::unordered_map<std::uint64_t, std::string>;

// A var as the dumps show it: its SetVarName name, else "v<id>".
std::string LabelOf(const VarNameMap& names, std::uint64_t id) {
  const auto it = names.find(id);
  if (it != names.end()) return it->second;
  // Appended, not "v" + std::to_string(id): GCC 12's -Wrestrict warns,
  // wrongly, about the inlined insert at the front of the temporary (GCC
  // bug 105651), and -Werror makes that an error.
  std::string label = "v";
  label += std::to_string(id);
  return label;
}

std::string VarList(const VarNameMap& names, const std::vector<std::uint64_t>& ids) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ',';
    out += JsonString(LabelOf(names, ids[i]));
  }
  return out + "]";
}

// Microseconds with ns precision, as the trace format expects. Integer
// arithmetic, not printf's %f: the C locale's decimal point (LC_NUMERIC, set
// by a program's setlocale) would otherwise turn "1.500" into "1,500".
std::string Us(std::int64_t ns) {
  const bool negative = ns < 0;
  const std::uint64_t mag =
      negative ? std::uint64_t{0} - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  char frac[4] = {static_cast<char>('0' + mag % 1000 / 100),
                  static_cast<char>('0' + mag % 100 / 10), static_cast<char>('0' + mag % 10), '\0'};
  std::string out = negative ? "-" : "";  // appended, for GCC 12 (LabelOf)
  out += std::to_string(mag / 1000);
  out += '.';
  out += frac;
  return out;
}

// Opens `path` for writing, or raises naming the path and why it cannot be
// opened (a missing directory, no permission, a directory).
std::ofstream OpenOrThrow(const char* call, const std::string& path) {
  errno = 0;
  std::ofstream out(path);
  if (!out) {
    const int err = errno;
    const std::string why = err != 0 ? ": " + std::generic_category().message(err) : "";
    throw std::runtime_error(std::string(call) + ": cannot write " + path + why);
  }
  return out;
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto idx = static_cast<std::size_t>(std::llround(p * static_cast<double>(v.size() - 1)));
  return v[std::min(idx, v.size() - 1)];
}

}  // namespace depengine::internal::dump
