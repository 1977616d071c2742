// The Chrome trace (DumpProfile, EngineOptions::profile_path): one event per
// function, per wait of an outside thread, pending-count and queue-depth
// counters, and flow arrows from each function to those it released. Opens
// in ui.perfetto.dev or chrome://tracing (docs/profiler.md).
#include <filesystem>
#include <fstream>
#include <locale>
#include <map>
#include <mutex>
#include <sstream>
#include <string_view>
#include <system_error>
#include <unordered_map>

#include "profiler/dump_format.h"
#include "profiler/profiler.h"

namespace depengine::internal {

using namespace dump;  // the text forms the dumps share

namespace {
// The head of a Chrome "complete" (ph X) event for one record, on the
// record's row, up to and including the opening brace of its args. Times
// are from origin_ns, the profiler's zero.
void WriteXEventHead(std::ostream& ev, const std::string& pid, const ProfileRecord& r,
                     const char* category, std::int64_t origin_ns) {
  ev << "{\"ph\":\"X\",\"pid\":" << pid << ",\"tid\":" << r.row
     << ",\"name\":" << JsonString(r.name) << ",\"cat\":\"" << category
     << "\",\"ts\":" << Us(r.start_ns - origin_ns) << ",\"dur\":" << Us(r.end_ns - r.start_ns)
     << ",\"args\":{";
}
}  // namespace

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
    WriteXEventHead(ev, p, *r, "function", origin_ns_);
    ev << "\"seq\":" << r->seq << ",\"reads\":" << VarList(var_names, r->reads)
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
    WriteXEventHead(ev, p, *r, "wait", origin_ns_);
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

}  // namespace depengine::internal
