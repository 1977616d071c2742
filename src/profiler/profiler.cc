#include "profiler/profiler.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <locale>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <unordered_map>

#include "tracker/opr_block.h"

namespace depengine::internal {
namespace {

std::atomic<std::uint64_t> g_next_profiler_id{1};
std::atomic<int> g_next_thread_number{0};

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
  return it != names.end() ? it->second : "v" + std::to_string(id);
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
  return (negative ? "-" : "") + std::to_string(mag / 1000) + "." + frac;
}

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

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto idx = static_cast<std::size_t>(std::llround(p * static_cast<double>(v.size() - 1)));
  return v[std::min(idx, v.size() - 1)];
}

}  // namespace

std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// An append-only array of records: written by one thread, read by dumps.
// A buffer's first chunk is small and each next one twice as large, up to
// kMaxCapacity: a thread that records a function or two (one that finished
// a callback) keeps a few hundred bytes, not a full chunk, for as long as
// the engine lives.
struct Profiler::Chunk {
  static constexpr int kFirstCapacity = 16;
  static constexpr int kMaxCapacity = 1024;
  explicit Chunk(int capacity_in)
      : capacity(capacity_in), items(std::make_unique<ProfileRecord*[]>(capacity_in)) {}
  const int capacity;  // set before the chunk is published
  const std::unique_ptr<ProfileRecord*[]> items;
  std::atomic<int> count{0};          // release by the writer, acquire by readers
  std::atomic<Chunk*> next{nullptr};  // likewise
};

struct Profiler::Buffer {
  Chunk* head = nullptr;  // immutable after creation
  Chunk* tail = nullptr;  // the writer's
  ~Buffer() {
    for (Chunk* c = head; c != nullptr;) {
      Chunk* next = c->next.load(std::memory_order_acquire);
      const int n = c->count.load(std::memory_order_acquire);
      for (int i = 0; i < n; ++i) delete c->items[i];
      delete c;
      c = next;
    }
  }
  void Append(ProfileRecord* r) {
    int n = tail->count.load(std::memory_order_relaxed);
    if (n == tail->capacity) {
      auto* c = new Chunk(std::min(2 * tail->capacity, Chunk::kMaxCapacity));
      tail->next.store(c, std::memory_order_release);
      tail = c;
      n = 0;
    }
    tail->items[n] = r;
    tail->count.store(n + 1, std::memory_order_release);
  }
};

namespace {
// One time origin for every engine's trace, so that the traces of several
// engines written to one file (WriteTraceAtDestruction) line up.
std::int64_t ProcessOriginNs() {
  static const std::int64_t origin = NowNs();
  return origin;
}
}  // namespace

Profiler::Profiler() : id_(g_next_profiler_id.fetch_add(1)), origin_ns_(ProcessOriginNs()) {}
Profiler::~Profiler() = default;

namespace {
// The calling thread's buffer and row for each profiler it wrote to.
struct ThreadSlot {
  std::uint64_t profiler_id;
  void* buffer;  // Profiler::Buffer*, owned by that profiler
  int row;
};
// What the profiler keeps per thread: heap-allocated, reached through a
// trivially destructible thread_local pointer, and freed by ThreadStateGuard
// when the thread's thread_locals are destroyed. A call after that (from a
// thread_local destructor that ran later, or from a static destructor at
// exit on the main thread) finds tls_exited set and takes the slow path
// instead of touching freed memory.
struct ThreadState {
  // The pool row name ("cpu/normal/0") of a worker, in the trace of the
  // engine whose worker it is (the profiler `pool_profiler_id`) only.
  std::string pool_name;
  std::uint64_t pool_profiler_id = 0;  // 0: not a worker
  std::string name;                    // "thread/<n>", its name elsewhere; made on first need
  std::vector<ThreadSlot> slots;
};
// Both trivially destructible: usable until the thread is gone.
thread_local ThreadState* tls_state = nullptr;
thread_local bool tls_exited = false;

struct ThreadStateGuard {
  ~ThreadStateGuard() {
    delete tls_state;
    tls_state = nullptr;
    tls_exited = true;
  }
};

// The calling thread's state, made on first use; nullptr once its
// thread_locals were destroyed (or are being destroyed and the guard ran).
ThreadState* ThisThreadState() {
  if (tls_state != nullptr) return tls_state;
  if (tls_exited) return nullptr;
  // Constructed here, after whatever thread_locals the thread made before
  // its first profiled call: destroyed before them, so their destructors
  // see tls_exited.
  thread_local ThreadStateGuard guard;
  (void)&guard;
  tls_state = new ThreadState;
  return tls_state;
}
}  // namespace

void Profiler::NameThisThread(const std::string& name) {
  if (ThreadState* t = ThisThreadState()) {
    t->pool_name = name;
    t->pool_profiler_id = id_;
  }
}

Profiler::Slot Profiler::ThisThreadSlot() {
  ThreadState* t = ThisThreadState();
  if (t == nullptr) {
    // The thread's state is gone: one shared buffer and row, under mu_.
    std::lock_guard<std::mutex> lock(mu_);
    if (exited_buffer_ == nullptr) {
      auto buf = std::make_unique<Buffer>();
      buf->head = buf->tail = new Chunk(Chunk::kFirstCapacity);
      exited_buffer_ = buf.get();
      buffers_.push_back(std::move(buf));
      rows_.emplace_back("exiting threads");
      exited_row_ = static_cast<int>(rows_.size() - 1);
    }
    return {nullptr, exited_row_};
  }
  for (const ThreadSlot& s : t->slots) {
    if (s.profiler_id == id_) return {static_cast<Buffer*>(s.buffer), s.row};
  }
  // A worker of another engine is a thread outside this one (profiler.md).
  if (t->pool_profiler_id != id_ && t->name.empty()) {
    t->name = "thread/" + std::to_string(g_next_thread_number++);
  }
  const std::string& row_name = t->pool_profiler_id == id_ ? t->pool_name : t->name;
  auto buf = std::make_unique<Buffer>();
  buf->head = buf->tail = new Chunk(Chunk::kFirstCapacity);
  Buffer* raw = buf.get();
  int row;
  {
    std::lock_guard<std::mutex> lock(mu_);
    buffers_.push_back(std::move(buf));
    rows_.push_back(row_name);
    row = static_cast<int>(rows_.size() - 1);
  }
  t->slots.push_back({id_, raw, row});
  return {raw, row};
}

ProfileRecord* Profiler::Begin(const OprBlock& b) {
  auto* r = new ProfileRecord;
  r->name = b.name != nullptr ? b.name : (b.kind == OprKind::kDeleteVar ? "DeleteVariable" : "fn");
  for (const VarSlot& s : b.slots()) {
    (s.write() ? r->writes : r->reads).push_back(s.var->profile_id);
  }
  r->priority = b.priority;
  r->prop = b.prop();
  r->ctx = b.ctx;
  r->push_ns = NowNs();
  return r;
}

void Profiler::MarkReady(ProfileRecord* r) { r->ready_ns = NowNs(); }

void Profiler::MarkStart(ProfileRecord* r, std::int64_t pending, const char* queue_name,
                         std::int64_t queue_depth) {
  r->start_ns = NowNs();
  if (r->ready_ns == 0) r->ready_ns = r->start_ns;
  r->row = ThisThreadSlot().row;
  r->pending_at_start = pending;
  if (queue_name != nullptr) r->queue_name = queue_name;
  r->queue_depth_at_start = queue_depth;
}

void Profiler::MarkEnd(ProfileRecord* r) { r->end_ns = NowNs(); }

void Profiler::Finish(ProfileRecord* r) {
  const Slot slot = ThisThreadSlot();
  if (slot.buffer != nullptr) {
    slot.buffer->Append(r);
  } else {
    // The shared buffer of exited threads: one writer at a time, under mu_.
    std::lock_guard<std::mutex> lock(mu_);
    exited_buffer_->Append(r);
  }
}

void Profiler::RecordWait(const char* name, const std::uint64_t* var, std::int64_t start_ns) {
  auto* r = new ProfileRecord;
  r->wait = true;
  r->name = name;
  if (var != nullptr) r->reads.push_back(*var);
  // A seq of its own, so that Clear() drops it with the functions before it.
  AssignSeq(r);
  r->push_ns = r->ready_ns = r->start_ns = start_ns;
  r->end_ns = NowNs();
  r->row = ThisThreadSlot().row;
  Finish(r);
}

std::vector<const ProfileRecord*> Profiler::Snapshot(bool waits) {
  std::vector<const ProfileRecord*> out;
  const std::uint64_t floor = clear_floor_.load(std::memory_order_acquire);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& b : buffers_) {
    for (Chunk* c = b->head; c != nullptr; c = c->next.load(std::memory_order_acquire)) {
      const int n = c->count.load(std::memory_order_acquire);
      for (int i = 0; i < n; ++i) {
        const ProfileRecord* r = c->items[i];
        if (r->seq >= floor && r->wait == waits) out.push_back(r);
      }
    }
  }
  std::sort(out.begin(), out.end(),
            [](const ProfileRecord* a, const ProfileRecord* b) { return a->seq < b->seq; });
  return out;
}

void Profiler::Clear() {
  clear_floor_.store(next_seq_.load(std::memory_order_relaxed), std::memory_order_release);
}

std::size_t Profiler::Count() { return Snapshot().size(); }

void Profiler::WriteTraceEvents(std::ostream& out, int pid, const std::string& process_name,
                                bool first) {
  const auto records = Snapshot();
  const auto waits = Snapshot(/*waits=*/true);
  const VarNameMap var_names = VarNames();
  std::vector<std::string> rows;  // after the records: every row they name
  {
    std::lock_guard<std::mutex> lock(mu_);
    rows = rows_;
  }
  const std::string p = std::to_string(pid);
  auto emit = [&](const std::string& ev) {
    out << (first ? "" : ",\n") << ev;
    first = false;
  };
  emit("{\"ph\":\"M\",\"pid\":" + p +
       ",\"name\":\"process_name\",\"args\":{\"name\":" + JsonString(process_name) + "}}");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    emit("{\"ph\":\"M\",\"pid\":" + p + ",\"tid\":" + std::to_string(i) +
         ",\"name\":\"thread_name\",\"args\":{\"name\":" + JsonString(rows[i]) + "}}");
    emit("{\"ph\":\"M\",\"pid\":" + p + ",\"tid\":" + std::to_string(i) +
         ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":" + std::to_string(i) + "}}");
  }
  std::unordered_map<std::uint64_t, const ProfileRecord*> by_seq;
  for (const ProfileRecord* r : records) by_seq[r->seq] = r;
  for (const ProfileRecord* r : records) {
    std::ostringstream ev;
    ev.imbue(std::locale::classic());
    ev << "{\"ph\":\"X\",\"pid\":" << p << ",\"tid\":" << r->row
       << ",\"name\":" << JsonString(r->name)
       << ",\"cat\":\"function\",\"ts\":" << Us(r->start_ns - origin_ns_)
       << ",\"dur\":" << Us(r->end_ns - r->start_ns) << ",\"args\":{\"seq\":" << r->seq
       << ",\"reads\":" << VarList(var_names, r->reads)
       << ",\"writes\":" << VarList(var_names, r->writes) << ",\"priority\":" << r->priority
       << ",\"property\":\"" << PropName(r->prop) << "\",\"device\":\"" << DeviceName(r->ctx)
       << "\",\"queue_wait_us\":" << Us(r->start_ns - r->ready_ns)
       << ",\"dependency_wait_us\":" << Us(r->ready_ns - r->push_ns)
       << (r->failed ? ",\"failed\":true" : "") << (r->skipped ? ",\"skipped\":true" : "") << "}}";
    emit(ev.str());
    emit("{\"ph\":\"C\",\"pid\":" + p +
         ",\"name\":\"pending functions\",\"ts\":" + Us(r->start_ns - origin_ns_) +
         ",\"args\":{\"pending\":" + std::to_string(r->pending_at_start) + "}}");
    if (!r->queue_name.empty() && r->queue_depth_at_start >= 0) {
      emit("{\"ph\":\"C\",\"pid\":" + p + ",\"name\":" +
           JsonString("queue depth " + r->queue_name) + ",\"ts\":" + Us(r->start_ns - origin_ns_) +
           ",\"args\":{\"depth\":" + std::to_string(r->queue_depth_at_start) + "}}");
    }
  }
  // The waits of threads outside the engine, on their rows.
  for (const ProfileRecord* r : waits) {
    std::ostringstream ev;
    ev.imbue(std::locale::classic());
    ev << "{\"ph\":\"X\",\"pid\":" << p << ",\"tid\":" << r->row
       << ",\"name\":" << JsonString(r->name) << ",\"cat\":\"wait\",\"ts\":"
       << Us(r->start_ns - origin_ns_) << ",\"dur\":" << Us(r->end_ns - r->start_ns)
       << ",\"args\":{";
    if (!r->reads.empty()) ev << "\"var\":" << JsonString(LabelOf(var_names, r->reads[0]));
    ev << "}}";
    emit(ev.str());
  }
  // Flow arrows: from a function's end to the start of each function it
  // released. Flow ids are file-wide: each process numbers its own from
  // (pid - 1) << 32 (exact in a JSON reader's double).
  std::uint64_t flow_id = static_cast<std::uint64_t>(pid - 1) << 32;
  for (const ProfileRecord* r : records) {
    for (const auto& [to_seq, var] : r->released) {
      auto it = by_seq.find(to_seq);
      if (it == by_seq.end()) continue;
      const ProfileRecord* to = it->second;
      ++flow_id;
      emit("{\"ph\":\"s\",\"pid\":" + p + ",\"tid\":" + std::to_string(r->row) + ",\"id\":" +
           std::to_string(flow_id) + ",\"name\":\"releases\",\"cat\":\"dependency\",\"ts\":" +
           Us(r->end_ns - origin_ns_ - 1) +
           ",\"args\":{\"var\":" + JsonString(LabelOf(var_names, var)) + "}}");
      emit("{\"ph\":\"f\",\"bp\":\"e\",\"pid\":" + p + ",\"tid\":" + std::to_string(to->row) +
           ",\"id\":" + std::to_string(flow_id) +
           ",\"name\":\"releases\",\"cat\":\"dependency\",\"ts\":" + Us(to->start_ns - origin_ns_) +
           "}");
    }
  }
}

namespace {
constexpr char kTraceHead[] = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
constexpr char kTraceTail[] = "\n]}\n";
}  // namespace

void Profiler::WriteTrace(const std::string& path) {
  std::ofstream out = OpenOrThrow("DumpProfile", path);
  out.imbue(std::locale::classic());  // numbers as JSON spells them, whatever the global locale
  out << kTraceHead;
  WriteTraceEvents(out, 1, "depengine", /*first=*/true);
  out << kTraceTail;
  CloseOrThrow(out, "DumpProfile", path);
}

void Profiler::WriteTraceAtDestruction(const std::string& path) {
  // The traces this process wrote here, by path: how many engines each
  // holds. Never destroyed: Engine::Get()'s trace is written by a static
  // destructor. The mutex also keeps two engines destroyed at once from
  // writing one file together.
  static auto* const written_mu = new std::mutex;
  static auto* const written = new std::map<std::string, int>;
  std::error_code ec;
  std::string key = std::filesystem::weakly_canonical(path, ec).string();
  if (ec) key = path;
  std::lock_guard<std::mutex> lock(*written_mu);
  if (auto it = written->find(key); it != written->end()) {
    // Added to the file, as one more process, if it is still the trace
    // written there (it ends as WriteTrace ends it).
    std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
    constexpr auto kTailSize = static_cast<std::streamoff>(sizeof kTraceTail - 1);
    char tail[sizeof kTraceTail] = {};
    if (io.seekg(0, std::ios::end) && io.tellg() >= kTailSize &&
        io.seekg(-kTailSize, std::ios::end) && io.read(tail, kTailSize) &&
        std::string_view(tail) == kTraceTail && io.seekp(-kTailSize, std::ios::end)) {
      io.imbue(std::locale::classic());
      const int pid = it->second + 1;
      WriteTraceEvents(io, pid, "depengine engine " + std::to_string(pid), /*first=*/false);
      io << kTraceTail;
      CloseOrThrow(io, "DumpProfile", path);
      it->second = pid;
      return;
    }
  }
  WriteTrace(path);
  (*written)[key] = 1;
}

void Profiler::WriteStats(std::ostream& table, const std::string& json_path) {
  struct Acc {
    std::vector<double> run_us, wait_us;
  };
  std::map<std::string, Acc> by_name;
  for (const ProfileRecord* r : Snapshot()) {
    Acc& a = by_name[r->name];
    a.run_us.push_back(static_cast<double>(r->end_ns - r->start_ns) / 1000.0);
    a.wait_us.push_back(static_cast<double>(r->start_ns - r->ready_ns) / 1000.0);
  }
  struct Row {
    std::string name;
    std::size_t count;
    double total, mean, p50, p99, max;
    double wtotal, wmean, wp50, wp99, wmax;
  };
  std::vector<Row> rows;
  for (auto& [name, a] : by_name) {
    Row row{name, a.run_us.size(), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    for (double x : a.run_us) row.total += x;
    for (double x : a.wait_us) row.wtotal += x;
    row.mean = row.total / static_cast<double>(row.count);
    row.wmean = row.wtotal / static_cast<double>(row.count);
    row.p50 = Percentile(a.run_us, 0.50);
    row.p99 = Percentile(a.run_us, 0.99);
    row.max = a.run_us.back();
    row.wp50 = Percentile(a.wait_us, 0.50);
    row.wp99 = Percentile(a.wait_us, 0.99);
    row.wmax = a.wait_us.back();
    rows.push_back(row);
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.total > b.total; });
  {
    // The table's own format (decimal, 3 decimals), on the caller's stream.
    StreamFormatGuard keep_format(table);
    table.flags(std::ios_base::dec | std::ios_base::fixed);
    table.precision(3);
    table << "| function | count | run total us | run mean | run p50 | run p99 | run max | "
             "wait total us | wait mean | wait p50 | wait p99 | wait max |\n"
             "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    for (const Row& r : rows) {
      table << "| " << MarkdownCell(r.name) << " | " << r.count << " | " << r.total << " | "
            << r.mean << " | " << r.p50 << " | " << r.p99 << " | " << r.max << " | " << r.wtotal
            << " | " << r.wmean << " | " << r.wp50 << " | " << r.wp99 << " | " << r.wmax << " |\n";
    }
  }
  if (json_path.empty()) return;
  std::ofstream out = OpenOrThrow("DumpProfileStats", json_path);
  // The table's numbers (3 decimals: the recorded ns), spelled as JSON
  // spells them whatever the global locale. The default 6 significant digits
  // wrote a 1234.567 us total as 1234.57, and 1.2 s as 1.20001e+06.
  out.imbue(std::locale::classic());
  out << std::fixed << std::setprecision(3);
  out << "{\"unit\":\"us\",\"functions\":[\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    out << (i ? ",\n" : "") << "{\"name\":" << JsonString(r.name) << ",\"count\":" << r.count
        << ",\"run\":{\"total\":" << r.total << ",\"mean\":" << r.mean << ",\"p50\":" << r.p50
        << ",\"p99\":" << r.p99 << ",\"max\":" << r.max
        << "},\"queue_wait\":{\"total\":" << r.wtotal << ",\"mean\":" << r.wmean
        << ",\"p50\":" << r.wp50 << ",\"p99\":" << r.wp99 << ",\"max\":" << r.wmax << "}}";
  }
  out << "\n]}\n";
  CloseOrThrow(out, "DumpProfileStats", json_path);
}

void Profiler::NameVar(std::uint64_t id, std::string name) {
  std::lock_guard<std::mutex> lock(var_names_mu_);
  if (name.empty()) {
    var_names_.erase(id);
  } else {
    var_names_[id] = std::move(name);
  }
}

std::string Profiler::VarLabel(std::uint64_t id) {
  std::lock_guard<std::mutex> lock(var_names_mu_);
  return LabelOf(var_names_, id);
}

std::unordered_map<std::uint64_t, std::string> Profiler::VarNames() {
  std::lock_guard<std::mutex> lock(var_names_mu_);
  return var_names_;
}

void Profiler::WriteGraph(const std::string& path) {
  const auto records = Snapshot();
  const VarNameMap var_names = VarNames();
  struct Edge {
    std::size_t from, to;
    std::uint64_t var;
    const char* kind;
  };
  std::vector<Edge> edges;
  // Serial semantics in push order: per var, the last writer and the
  // readers since it.
  struct VarState {
    long last_writer = -1;
    std::vector<std::size_t> readers;
  };
  std::unordered_map<std::uint64_t, VarState> vars;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const ProfileRecord* r = records[i];
    for (std::uint64_t v : r->reads) {
      VarState& s = vars[v];
      if (s.last_writer >= 0)
        edges.push_back({static_cast<std::size_t>(s.last_writer), i, v, "RAW"});
      s.readers.push_back(i);
    }
    for (std::uint64_t v : r->writes) {
      VarState& s = vars[v];
      if (!s.readers.empty()) {
        for (std::size_t rd : s.readers) {
          if (rd != i) edges.push_back({rd, i, v, "WAR"});
        }
      } else if (s.last_writer >= 0) {
        edges.push_back({static_cast<std::size_t>(s.last_writer), i, v, "WAW"});
      }
      s.last_writer = static_cast<long>(i);
      s.readers.clear();
    }
  }
  // Critical path: the longest chain of run times (edges go forward in
  // push order, so one pass in that order suffices).
  std::vector<double> dist(records.size(), 0);
  std::vector<long> pred(records.size(), -1);
  std::vector<std::vector<std::size_t>> incoming(records.size());
  for (std::size_t e = 0; e < edges.size(); ++e) incoming[edges[e].to].push_back(e);
  long end = -1;
  for (std::size_t i = 0; i < records.size(); ++i) {
    double best = 0;
    for (std::size_t e : incoming[i]) {
      if (dist[edges[e].from] > best) {
        best = dist[edges[e].from];
        pred[i] = static_cast<long>(edges[e].from);
      }
    }
    dist[i] = best + static_cast<double>(records[i]->end_ns - records[i]->start_ns) / 1000.0;
    if (end < 0 || dist[i] > dist[static_cast<std::size_t>(end)]) end = static_cast<long>(i);
  }
  std::vector<bool> on_path(records.size(), false);
  for (long i = end; i >= 0; i = pred[static_cast<std::size_t>(i)])
    on_path[static_cast<std::size_t>(i)] = true;

  std::ofstream out = OpenOrThrow("DumpDependencyGraph", path);
  out.imbue(std::locale::classic());  // node ids and numbers, whatever the global locale
  out << "digraph depengine {\n  rankdir=TB;\n  node [shape=box, fontname=\"Helvetica\"];\n";
  out << "  label=\"critical path: " << std::fixed << std::setprecision(3)
      << (end >= 0 ? dist[static_cast<std::size_t>(end)] : 0.0) << " us (red)\";\n";
  for (std::size_t i = 0; i < records.size(); ++i) {
    const ProfileRecord* r = records[i];
    out << "  f" << r->seq << " [label=\"" << DotLabelText(r->name) << "\\n#" << r->seq << " "
        << Us(r->end_ns - r->start_ns) << " us\"" << (on_path[i] ? ", color=red, penwidth=2" : "")
        << (r->failed || r->skipped ? ", style=dashed" : "") << "];\n";
  }
  for (const Edge& e : edges) {
    const bool critical =
        on_path[e.from] && on_path[e.to] && pred[e.to] == static_cast<long>(e.from);
    out << "  f" << records[e.from]->seq << " -> f" << records[e.to]->seq << " [label=\""
        << DotLabelText(LabelOf(var_names, e.var)) << " " << e.kind << "\""
        << (critical ? ", color=red, penwidth=2" : "") << "];\n";
  }
  out << "}\n";
  CloseOrThrow(out, "DumpDependencyGraph", path);
}

}  // namespace depengine::internal
