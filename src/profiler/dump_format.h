// The text forms shared by the profiler's dumps: the trace
// (trace_writer.cc), the statistics (stats_writer.cc) and the dependency
// graph (graph_writer.cc). Each output format escapes names its own way, and
// every one of them stays valid UTF-8 whatever a function or var name holds.
#pragma once

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <ios>
#include <stdexcept>
#include <string>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "depengine/engine.h"

namespace depengine::internal::dump {

// "kNormal", "kAsync", ...: a property as the trace names it.
const char* PropName(FnProperty p);
// "cpu(0)", "gpu(1)", "cpu_pinned(0)".
std::string DeviceName(const Context& c);

// A JSON string literal of `s`, valid JSON (and UTF-8) whatever it holds.
std::string JsonString(const std::string& s);
// `s` as one cell of a Markdown table row ('|' escaped, line breaks as spaces).
std::string MarkdownCell(const std::string& s);
// `s` as the text of a Graphviz label inside a quoted string.
std::string DotLabelText(const std::string& s);

// SetVarName's names, by var id (a copy taken once per dump).
using VarNameMap = std::unordered_map<std::uint64_t, std::string>;
// A var as the dumps show it: its SetVarName name, else "v<id>".
std::string LabelOf(const VarNameMap& names, std::uint64_t id);
// A JSON array of the vars' labels.
std::string VarList(const VarNameMap& names, const std::vector<std::uint64_t>& ids);

// Nanoseconds as microseconds with three decimals, whatever the locale.
std::string Us(std::int64_t ns);

// Opens `path` for writing, or raises naming the path and why it cannot be
// opened (a missing directory, no permission, a directory).
std::ofstream OpenOrThrow(const char* call, const std::string& path);

// Flushes and closes `out` and raises when anything could not be written: a
// small file's ENOSPC (or EIO) shows only here, when the buffer is written.
template <typename FileStream>
void CloseOrThrow(FileStream& out, const char* call, const std::string& path) {
  errno = 0;
  out.flush();
  out.close();
  if (out.fail()) {
    const int err = errno;
    const std::string why = err != 0 ? ": " + std::generic_category().message(err) : "";
    throw std::runtime_error(std::string(call) + ": error writing " + path + why);
  }
}

// Restores a stream's format flags and precision, which a dump sets for its
// own output, when it goes out of scope: the stream is the caller's.
class StreamFormatGuard {
 public:
  explicit StreamFormatGuard(std::ios_base& stream)
      : stream_(stream), flags_(stream.flags()), precision_(stream.precision()) {}
  ~StreamFormatGuard() {
    stream_.flags(flags_);
    stream_.precision(precision_);
  }
  StreamFormatGuard(const StreamFormatGuard&) = delete;
  StreamFormatGuard& operator=(const StreamFormatGuard&) = delete;

 private:
  std::ios_base& stream_;
  const std::ios_base::fmtflags flags_;
  const std::streamsize precision_;
};

// The p-quantile of `v` (0 <= p <= 1), nearest rank; sorts `v`. 0 when empty.
double Percentile(std::vector<double>& v, double p);

}  // namespace depengine::internal::dump
