// JsonString: a string as a JSON string literal, for the reports that the
// benchmark programs write (depengine-bench and depengine-peers).
#pragma once

#include <cstdio>
#include <string>

namespace depengine::bench {

inline std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace depengine::bench
