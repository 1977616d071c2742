// ThreadedEngine's lifetime and its objects': the engine's construction and
// destruction (Drain waits for every pushed function), and the making and
// freeing of vars and prebuilt operators. The path of a function is in
// threaded_engine.cc.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "engine/threaded_engine.h"
#include "engine/threaded_engine_impl.h"
#include "gpu/device.h"
#include "tracker/var_list_sort.h"

namespace depengine::internal {
namespace {

// Why the trace could not be written at `path`, or "" when it can be as far
// as the file system tells now: the file is writable, or it is missing and
// its directory is writable. A full disk still shows only at the write.
std::string WhyProfilePathIsUnwritable(const std::string& path) {
  // The system's reason for the last call's failure. strerror may share one
  // buffer between threads; this reads errno at once, before any other call.
  const auto reason = [] { return std::generic_category().message(errno); };
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return "it is a directory";
    return access(path.c_str(), W_OK) == 0 ? "" : reason();
  }
  if (errno != ENOENT) return reason();
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  // ENOENT for the path itself (a file in its way gives ENOTDIR, above), so
  // the directory is a directory, or missing.
  if (stat(dir.c_str(), &st) != 0 || access(dir.c_str(), W_OK | X_OK) != 0) {
    const std::string why = reason();
    return "directory '" + dir + "': " + why;
  }
  return "";
}

}  // namespace

ThreadedEngine::ThreadedEngine(const EngineOptions& options)
    : options_(options),
      creator_pid_(getpid()),
      gpu_count_(options.simulated_gpus > 0 ? options.simulated_gpus : gpu::DeviceCount()),
      real_gpus_(options.simulated_gpus == 0 && gpu_count_ > 0),
      in_flight_(options.max_in_flight),
      profiler_(std::make_unique<Profiler>()),
      watchdog_(options.watchdog_seconds > 0
                    ? std::make_unique<Watchdog>(
                          options.watchdog_seconds,
                          Watchdog::EngineView{
                              [this](std::uint64_t id) { return profiler_->VarLabel(id); },
                              [this] {
                                return pending_[0].load(std::memory_order_relaxed) +
                                       pending_[1].load(std::memory_order_relaxed);
                              }})
                    : nullptr) {
  profile_all_.store(!options.profile_path.empty(), std::memory_order_relaxed);
  const std::pair<const char*, int> counts[] = {
      {"cpu_worker_threads", options.cpu_worker_threads},
      {"cpu_priority_threads", options.cpu_priority_threads},
      {"gpu_worker_threads", options.gpu_worker_threads},
      {"gpu_copy_threads", options.gpu_copy_threads},
      {"simulated_gpus", options.simulated_gpus}};
  for (const auto& [name, value] : counts) {
    if (value < 0) {
      throw std::invalid_argument(std::string("CreateEngine: EngineOptions::") + name + " = " +
                                  std::to_string(value) +
                                  ": thread counts and simulated_gpus must be >= 0 (0 = default)");
    }
  }
  if (!options.profile_path.empty()) {
    // Said now, not when the engine is destroyed and the run's trace is lost.
    if (std::string why = WhyProfilePathIsUnwritable(options.profile_path); !why.empty()) {
      throw std::invalid_argument(
          "CreateEngine: EngineOptions::profile_path (DEPENGINE_PROFILE) = '" +
          options.profile_path + "': cannot write the trace there: " + why);
    }
  }
  if (options.worker_spin_us < 0 || options.worker_spin_us > EngineOptions::kMaxWorkerSpinUs) {
    throw std::invalid_argument(
        "CreateEngine: EngineOptions::worker_spin_us = " + std::to_string(options.worker_spin_us) +
        ": must be in [0, " + std::to_string(EngineOptions::kMaxWorkerSpinUs) +
        "] microseconds (0 = sleep at once)");
  }
  if (!(options.watchdog_seconds >= 0)) {  // negative or NaN
    throw std::invalid_argument("CreateEngine: EngineOptions::watchdog_seconds = " +
                                std::to_string(options.watchdog_seconds) +
                                ": must be a non-negative number of seconds (0 = off)");
  }
}

ThreadedEngine::~ThreadedEngine() {
  // Engine kinds drained and joined their pools already: every record is
  // final. Then free what the program left alive.
  if (!options_.profile_path.empty()) {
    try {
      profiler_->WriteTraceAtDestruction(options_.profile_path);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "depengine: DEPENGINE_PROFILE: %s\n", e.what());
    }
  }
  {
    // Failures nobody collected would vanish with the engine: name them.
    std::vector<FailurePtr> undelivered;
    MutexLock lock(failures_mu_);
    for (const FailurePtr& f : failure_log_) {
      if (!f->delivered.load(std::memory_order_relaxed)) undelivered.push_back(f);
    }
    if (!undelivered.empty() && !shutdown_notified_.load(std::memory_order_relaxed)) {
      ReportUndelivered("depengine: engine destroyed with " + std::to_string(undelivered.size()) +
                            " failure(s) that no WaitForVar or WaitForAll delivered:\n",
                        undelivered);
    }
  }
  // Operators never deleted: their closures are user code, destroyed
  // outside live_mu_ as FreeOpr does (a destructor that took a lock of its
  // own, or called into this engine, would otherwise run under it).
  std::vector<Opr*> leaked_oprs;
  {
    MutexLock lock(live_mu_);
    for (; live_oprs_ != nullptr; live_oprs_ = live_oprs_->live_next)
      leaked_oprs.push_back(live_oprs_);
  }
  for (Opr* op : leaked_oprs) {
    op->magic.store(Opr::kDead, std::memory_order_relaxed);
    op->Clear();
    OprPool::Free(op);
  }
  MutexLock lock(live_mu_);
  while (live_vars_ != nullptr) {
    Var* v = live_vars_;
    live_vars_ = v->live_next;
    {
      SpinLockGuard g(v->lock);
      v->failure.reset();
    }
    {
      SpinLockGuard g(v->push_lock);
      v->deleted.store(true, std::memory_order_relaxed);
    }
    v->magic.store(Var::kDead, std::memory_order_relaxed);
    VarPool::Free(v);
  }
  dead_vars_.Release([](Var* v) { VarPool::Free(v); });
  dead_oprs_.Release([](Opr* op) { OprPool::Free(op); });
}

// ---------------------------------------------------------------- vars and operators

VarHandle ThreadedEngine::NewVariable() {
  static std::atomic<std::uint64_t> next_profile_id{0};  // relaxed: only uniqueness matters
  Var* v = VarPool::Allocate();
  v->Init(this);
  v->profile_id = next_profile_id.fetch_add(1, std::memory_order_relaxed);
  MutexLock lock(live_mu_);
  LinkLive(v, live_vars_);
  return v;
}

void ThreadedEngine::FreeVar(Var* v) {
  TakeFailure(v);  // a deleted var's failure is dropped
  {
    MutexLock lock(failures_mu_);
    failed_vars_.erase(v);
  }
  v->magic.store(Var::kDead, std::memory_order_relaxed);
  Var* reusable;
  {
    MutexLock lock(live_mu_);
    UnlinkLive(v, live_vars_);
    reusable = dead_vars_.Admit(v);
  }
  if (reusable != nullptr) VarPool::Free(reusable);
}

OprHandle ThreadedEngine::NewOperator(AsyncFn fn, const std::vector<VarHandle>& const_vars,
                                      const std::vector<VarHandle>& mutable_vars, FnProperty prop,
                                      const char* opr_name) {
  const char* call = "NewOperator";
  if (!fn) throw std::invalid_argument(Named(call, "null function"));
  const std::size_t entries = const_vars.size() + mutable_vars.size();
  CheckVarCount(entries, call);
  std::vector<std::uintptr_t> keys;
  keys.reserve(entries);
  for (Var* v : const_vars) {
    CheckLiveVar(v, call);
    keys.push_back(reinterpret_cast<std::uintptr_t>(v));
  }
  for (Var* v : mutable_vars) {
    CheckLiveVar(v, call);
    keys.push_back(reinterpret_cast<std::uintptr_t>(v) | 1u);
  }
  const std::uint32_t count =
      SortAndMergeVarKeys(keys.data(), static_cast<std::uint32_t>(keys.size()), call);

  Opr* op = OprPool::Allocate();
  op->Clear();
  try {
    op->SetVars(keys.data(), count);  // allocates beyond Opr::kInlineVars
  } catch (...) {
    OprPool::Free(op);
    throw;
  }
  op->async_fn = std::move(fn);
  op->prop = prop;
  op->name = opr_name;
  op->engine = this;
  op->pushed.store(0, std::memory_order_relaxed);
  op->finished.store(0, std::memory_order_relaxed);
  op->magic.store(Opr::kLive, std::memory_order_relaxed);
  MutexLock lock(live_mu_);
  LinkLive(op, live_oprs_);
  return op;
}

void ThreadedEngine::DeleteOperator(OprHandle op) {
  if (op == nullptr) throw std::invalid_argument("DeleteOperator: null operator");
  if (op->magic.load(std::memory_order_relaxed) != Opr::kLive || op->engine != this) {
    throw std::invalid_argument(
        "DeleteOperator: operator was deleted or belongs to another engine");
  }
  // Named before the update: once the delete bit is set, a finishing push
  // may free the operator at any moment.
  const char* name = op->name;
  const std::uint64_t counted =
      op->pushed.fetch_or(Opr::kDeleteRequested, std::memory_order_acq_rel);
  if (counted & Opr::kDeleteRequested) {
    throw std::logic_error(std::string("DeleteOperator: operator '") +
                           (name != nullptr ? name : "<unnamed>") + "' was already deleted");
  }
  FinishPushes(op, Opr::kDeleteRequested - counted);
}

void ThreadedEngine::FinishPushes(Opr* op, std::uint64_t n) {
  if (op->finished.fetch_add(n, std::memory_order_acq_rel) + n == Opr::kDeleteRequested) {
    FreeOpr(op);
  }
}

void ThreadedEngine::FreeOpr(Opr* op) {
  op->magic.store(Opr::kDead, std::memory_order_relaxed);
  op->Clear();  // the closure goes now, outside the lock
  Opr* reusable;
  {
    MutexLock lock(live_mu_);
    UnlinkLive(op, live_oprs_);
    reusable = dead_oprs_.Admit(op);
  }
  if (reusable != nullptr) OprPool::Free(reusable);
}

// ---------------------------------------------------------------- shutdown

void ThreadedEngine::Drain() {
  // Like WaitForAll, for every generation, without reporting failures.
  if (getpid() != creator_pid_) return;  // a forked child: the workers are not here
  if (DestroyingWouldWaitForItself()) {
    // A handle (EngineHandle) never destroys its core here: it hands it to
    // a thread of its own. Only an engine used without a handle gets here.
    // The destructor would wait for that very function (and join the
    // thread it runs on): say so rather than hang. A destructor cannot
    // throw.
    std::fprintf(stderr,
                 "depengine: an engine is being destroyed on one of its own threads or inside one "
                 "of its own functions or callbacks (for example its last shared_ptr was captured "
                 "by a function and released with it); it cannot wait for itself. Destroy the "
                 "engine outside its functions. Aborting.\n");
    std::abort();
  }
  // Functions may push more while we wait, so loop until both generations
  // are empty.
  MutexLock lock(wait_all_mu_);
  for (;;) {
    const std::uint64_t g = generation_.fetch_add(1, std::memory_order_seq_cst);
    WaitPendingZero(static_cast<int>(g & 1));
    if (pending_[0].load(std::memory_order_seq_cst) == 0 &&
        pending_[1].load(std::memory_order_seq_cst) == 0) {
      // The last completer may still be returning through SubtractPending.
      while (external_completers_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
      return;
    }
  }
}

}  // namespace depengine::internal
