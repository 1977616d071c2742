// The profiler's recording side: per-thread buffers, the records of
// functions and waits, and the vars' names. The dumps are in
// trace_writer.cc, stats_writer.cc and graph_writer.cc.
#include "profiler/profiler.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>

#include "profiler/dump_format.h"
#include "tracker/opr_block.h"

namespace depengine::internal {
namespace {

std::atomic<std::uint64_t> g_next_profiler_id{1};
std::atomic<int> g_next_thread_number{0};

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
  return dump::LabelOf(var_names_, id);
}

std::unordered_map<std::uint64_t, std::string> Profiler::VarNames() {
  std::lock_guard<std::mutex> lock(var_names_mu_);
  return var_names_;
}

}  // namespace depengine::internal
