// Profiler: records the functions an engine runs into per-thread,
// append-only buffers, and turns them into a Chrome trace, statistics and a
// dependency graph (include/depengine/profiler.h).
//
// Recording path (only for blocks that carry a ProfileRecord):
//   push      Begin()       record made: name, vars, priority, push time
//             AssignSeq()   seq, with the push locks of its vars held
//   ready     MarkReady()   when the block's last grant arrives
//   start     MarkStart()   thread row, queue depth, pending count
//   complete  MarkEnd()     end time
//             released      the blocks whose last grant it handed out
//             Finish()      appended to the completing thread's buffer
// A buffer is written by its thread only and read by Dump* through an
// acquire load of each chunk's count, so recording takes no lock. Buffers
// belong to the Profiler; a thread reaches its own through a
// trivially destructible thread_local pointer, so a call made after the
// thread's thread_locals were destroyed (at thread or process exit) finds
// none and records into a shared buffer under mu_ instead.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <unordered_map>
#include <vector>

#include "depengine/engine.h"

namespace depengine::internal {

struct OprBlock;

// One recorded function. Written without a lock by one thread at a time as
// the block moves on: the pusher (Begin, AssignSeq), the granting thread
// (MarkReady), the executing worker (MarkStart, failed, skipped) and the
// completer, possibly a callback's thread (MarkEnd, released). The var
// locks and OprBlock::wait (acq_rel), the queue link (release/acquire) or
// the inline run, and the callback ticket order those hand-offs. After
// Finish it is read-only, published to dumps by Chunk::count.
struct ProfileRecord {
  // Push order within the profiler, taken with the function's vars locked
  // (AssignSeq): on each var, the order the engine queued its uses.
  std::uint64_t seq = 0;
  std::string name;
  std::vector<std::uint64_t> reads, writes;  // var ids
  int priority = 0;
  FnProperty prop = FnProperty::kNormal;
  Context ctx;
  std::int64_t push_ns = 0, ready_ns = 0, start_ns = 0, end_ns = 0;
  int row = -1;  // the thread row it ran on
  std::int64_t pending_at_start = 0;
  // The profiled functions waiting in its pool's queue when it started
  // (TaskQueue::SizeHint); -1: ran inline, no queue.
  std::int64_t queue_depth_at_start = -1;
  // A copy: the pool (and its name) may be gone when the trace is written
  // (DEPENGINE_PROFILE writes it after the pools are joined).
  std::string queue_name;
  bool failed = false;   // raised an error
  bool skipped = false;  // not run: a var it uses had failed
  // (released block's seq, var id) for the blocks this one made ready: those
  // whose last dependency its completion released (the grant that took
  // their wait count to zero), not every block it granted a var to.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> released;
  // Not a function: a WaitForVar or WaitForAll of a thread outside the
  // engine, from its call (start_ns) to its return (end_ns), on that
  // thread's row; `reads` holds WaitForVar's var. Only in the trace.
  bool wait = false;
};

class Profiler {
 public:
  Profiler();
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Makes the record of block `b` (its slots already sorted); its seq comes
  // later, from AssignSeq.
  ProfileRecord* Begin(const OprBlock& b);
  // Gives `r` the next seq. The push calls it while it holds the push lock
  // of every var of the function, before it queues the function on them:
  // then the seqs of two functions that share a var are in the order they
  // were queued on it (the order the engine runs them in), which the graph
  // relies on. (relaxed suffices: the push locks order the two updates, and
  // a read-modify-write reads the latest value in the modification order.)
  void AssignSeq(ProfileRecord* r) { r->seq = next_seq_.fetch_add(1, std::memory_order_relaxed); }
  static void MarkReady(ProfileRecord* r);
  // `queue_name`/`queue_depth`: the pool the block came from, if any.
  void MarkStart(ProfileRecord* r, std::int64_t pending, const char* queue_name,
                 std::int64_t queue_depth);
  // The end time, taken before the completion hands out its grants.
  static void MarkEnd(ProfileRecord* r);
  // Takes ownership of `r`, complete (MarkEnd, released) by now.
  void Finish(ProfileRecord* r);
  // Records a wait of the calling thread that began at `start_ns` and ends
  // now: `name` is "WaitForVar" (with `var`, a var id) or "WaitForAll".
  void RecordWait(const char* name, const std::uint64_t* var, std::int64_t start_ns);

  // Names the calling thread's row in this profiler's trace: a worker of
  // the engine calls it with its pool's name ("cpu/normal/0"). Other threads,
  // the workers of other engines included, get "thread/<n>". Functions run
  // or finished on a thread after its thread_locals were destroyed share
  // the row "exiting threads".
  void NameThisThread(const std::string& name);

  // DumpProfile: writes the trace to `path`, as process 1.
  void WriteTrace(const std::string& path);
  // The trace of an engine with EngineOptions::profile_path, written when
  // it is destroyed: when an earlier engine of this process wrote its trace
  // to the same path (DEPENGINE_PROFILE gives every engine made from
  // FromEnv() the same one), added to that file as the next process
  // ("depengine engine 2", ...) instead of replacing it.
  void WriteTraceAtDestruction(const std::string& path);
  void WriteStats(std::ostream& table, const std::string& json_path);
  // SetVarName: var `id` is `name` in the trace and the graph; an empty
  // name gives it back its default, "v<id>".
  void NameVar(std::uint64_t id, std::string name);
  // Var `id` as the dumps show it: its SetVarName name, else "v<id>".
  std::string VarLabel(std::uint64_t id);
  void WriteGraph(const std::string& path);
  void Clear();
  std::size_t Count();

 private:
  struct Chunk;
  struct Buffer;
  // The calling thread's buffer and row, registered on first use. After the
  // thread's thread_locals were destroyed (a call from a later thread_local
  // destructor, or from a static destructor at exit): buffer == nullptr and
  // the row of exited_buffer_, which is appended to under mu_.
  struct Slot {
    Buffer* buffer;
    int row;
  };
  Slot ThisThreadSlot();
  // Writes the trace's events (metadata, functions, counters, flows) for
  // process `pid`; each but the file's first is preceded by ",\n".
  void WriteTraceEvents(std::ostream& out, int pid, const std::string& process_name, bool first);
  // Finished records with seq >= clear_floor_, sorted by seq: the
  // functions, or (waits = true) the waits.
  std::vector<const ProfileRecord*> Snapshot(bool waits = false);
  // A copy of var_names_, taken once per dump.
  std::unordered_map<std::uint64_t, std::string> VarNames();

  const std::uint64_t id_;  // tells thread caches apart from a dead profiler
  // Relaxed: the fetch_adds give unique seqs; between pushes that share a
  // var the push locks order them (AssignSeq), and waits (RecordWait) need
  // only uniqueness. Clear's relaxed read is a cut-off point, not a
  // synchronization.
  std::atomic<std::uint64_t> next_seq_{0};
  // Seqs below it are hidden from dumps. Release (Clear) and acquire (the
  // dumps): a dump that sees a Clear sees what that thread did before it.
  // The records themselves are published by Chunk::count.
  std::atomic<std::uint64_t> clear_floor_{0};
  // Timestamps are written relative to it; the same for every profiler of
  // the process.
  const std::int64_t origin_ns_;

  // Guards buffers_, rows_, exited_buffer_ and exited_row_ (registration,
  // dumps, and appends to exited_buffer_).
  std::mutex mu_;
  std::vector<std::unique_ptr<Buffer>> buffers_;
  std::vector<std::string> rows_;
  // Records finished on threads whose profiler state was destroyed; made on
  // first need, owned by buffers_.
  Buffer* exited_buffer_ = nullptr;
  int exited_row_ = -1;

  // SetVarName's names, by var id; kept after the var is deleted (dumps
  // still show the functions that used it) and by Clear (they name vars,
  // not records). Guarded by var_names_mu_, a lock of its own: naming a
  // var must not wait for a dump that holds mu_ while it copies rows.
  std::mutex var_names_mu_;
  std::unordered_map<std::uint64_t, std::string> var_names_;
};

std::int64_t NowNs();

}  // namespace depengine::internal
