// The ticket tracker (bench/experiments/tickets/ticket_var.h) on its own,
// with no engine: the contract is that a task holds all its uses exactly when
// every earlier task that conflicts with it on a shared var (either of the
// two writes) has finished, that it is handed out exactly once, and that
// nothing stays parked once everything finished. Driven step by step with no
// threads (including the counts' wrap-around), then by threads with the
// park / complete race widened.
#include "tickets/ticket_var.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

namespace depengine::internal {
namespace {

struct UseSpec {
  int var;
  bool write;
};

// A program: tasks in push order, each with its uses stamped at "push".
class Program {
 public:
  Program(int num_vars, std::uint32_t start_writes = 0, std::uint32_t start_reads = 0)
      : vars_(static_cast<std::size_t>(num_vars)) {
    for (auto& v : vars_) {
      v = std::make_unique<TicketVar>();
      if (start_writes != 0 || start_reads != 0) v->StartAtForTesting(start_writes, start_reads);
    }
  }

  // Pushes a task; returns its index. Uses must name distinct vars.
  int Push(const std::vector<UseSpec>& spec) NO_THREAD_SAFETY_ANALYSIS {
    auto task = std::make_unique<Task>();
    task->spec = spec;
    task->uses.resize(spec.size());
    for (std::size_t i = 0; i < spec.size(); ++i) {
      TicketVar& v = *vars_[static_cast<std::size_t>(spec[i].var)];
      v.push_lock.lock();
      task->uses[i] = spec[i].write ? v.StampWrite() : v.StampRead();
      v.push_lock.unlock();
    }
    task->t.uses = task->uses.data();
    task->t.num_uses = static_cast<std::uint16_t>(spec.size());
    task->index = static_cast<int>(tasks_.size());
    tasks_.push_back(std::move(task));
    return tasks_.back()->index;
  }

  struct Task : TicketTask {
    TicketTask& t = *this;
    std::vector<TicketUse> uses;
    std::vector<UseSpec> spec;
    int index = 0;
  };
  static Task* Of(TicketTask* t) { return static_cast<Task*>(t); }

  Task& task(int i) { return *tasks_[static_cast<std::size_t>(i)]; }
  int size() const { return static_cast<int>(tasks_.size()); }
  TicketVar& var(int i) { return *vars_[static_cast<std::size_t>(i)]; }
  int num_vars() const { return static_cast<int>(vars_.size()); }

  // Whether tasks a and b (a < b) conflict: a shared var that either writes.
  bool Conflict(int a, int b) const {
    for (const UseSpec& x : tasks_[static_cast<std::size_t>(a)]->spec) {
      for (const UseSpec& y : tasks_[static_cast<std::size_t>(b)]->spec) {
        if (x.var == y.var && (x.write || y.write)) return true;
      }
    }
    return false;
  }

 private:
  std::vector<std::unique_ptr<TicketVar>> vars_;
  std::vector<std::unique_ptr<Task>> tasks_;
};

// Runs a program single-threaded as a scheduler would, but in a random
// order: tasks are taken (AcquireUses) in a shuffled order, and running ones
// complete (ReleaseUses) at random moments. Checks the contract at each step.
class Simulation {
 public:
  Simulation(Program& p, std::uint64_t seed) : p_(p), rng_(seed) {
    state_.assign(static_cast<std::size_t>(p.size()), kPending);
    for (int i = 0; i < p.size(); ++i) untaken_.push_back(i);
  }

  void Run() {
    while (done_ < p_.size()) {
      const bool can_take = !untaken_.empty();
      const bool can_finish = !running_.empty();
      ASSERT_TRUE(can_take || can_finish)
          << "stalled: " << done_ << " of " << p_.size()
          << " finished, nothing running and nothing left to take (a lost resumption)";
      if (can_take && (!can_finish || rng_() % 2 == 0)) {
        Take();
      } else {
        Finish();
      }
      if (::testing::Test::HasFatalFailure()) return;
    }
    for (int v = 0; v < p_.num_vars(); ++v) {
      EXPECT_EQ(p_.var(v).ParkedCountForTesting(), 0) << "var " << v;
    }
  }

 private:
  enum State { kPending, kRunning, kDone };

  void Take() {
    // Mostly near push order, as from a FIFO, sometimes far out of it.
    std::size_t pick = 0;
    if (rng_() % 4 == 0)
      pick = rng_() % untaken_.size();
    else
      pick = std::min<std::size_t>(rng_() % 3, untaken_.size() - 1);
    const int i = untaken_[pick];
    untaken_.erase(untaken_.begin() + static_cast<std::ptrdiff_t>(pick));
    TaskList ready;
    if (AcquireUses(&p_.task(i).t, &ready)) Started(i);
    StartAll(ready);
  }

  void Finish() {
    const std::size_t pick = rng_() % running_.size();
    const int i = running_[pick];
    running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(pick));
    state_[static_cast<std::size_t>(i)] = kDone;
    ++done_;
    TaskList ready;
    ReleaseUses(p_.task(i).t, &ready);
    StartAll(ready);
  }

  void StartAll(const TaskList& ready) {
    for (int k = 0; k < ready.size(); ++k) Started(Program::Of(ready[k])->index);
  }

  void Started(int i) {
    ASSERT_EQ(state_[static_cast<std::size_t>(i)], kPending) << "task " << i << " handed out twice";
    ASSERT_EQ(p_.task(i).t.acquired, p_.task(i).t.num_uses) << "task " << i;
    for (int j = 0; j < i; ++j) {
      if (state_[static_cast<std::size_t>(j)] != kDone && p_.Conflict(j, i)) {
        FAIL() << "task " << i << " started before task " << j << ", an earlier conflicting one";
      }
    }
    state_[static_cast<std::size_t>(i)] = kRunning;
    running_.push_back(i);
  }

  Program& p_;
  std::mt19937_64 rng_;
  std::vector<State> state_;
  std::vector<int> untaken_;
  std::vector<int> running_;
  int done_ = 0;
};

// A random program over `num_vars` vars, tasks of 0 to 4 distinct vars.
void PushRandomProgram(Program& p, int tasks, std::uint64_t seed, int write_percent = 40) {
  std::mt19937_64 rng(seed);
  for (int i = 0; i < tasks; ++i) {
    const int n = static_cast<int>(rng() % 5);
    std::vector<UseSpec> spec;
    while (static_cast<int>(spec.size()) < std::min(n, p.num_vars())) {
      const int v = static_cast<int>(rng() % static_cast<std::uint64_t>(p.num_vars()));
      if (std::any_of(spec.begin(), spec.end(), [&](const UseSpec& s) { return s.var == v; })) {
        continue;
      }
      spec.push_back({v, static_cast<int>(rng() % 100) < write_percent});
    }
    p.Push(spec);
  }
}

TEST(TicketVar, ReadsShareAnEpochAndAWriteWaitsForAllOfThem) {
  Program p(1);
  const int w0 = p.Push({{0, true}});
  const int r1 = p.Push({{0, false}});
  const int r2 = p.Push({{0, false}});
  const int w3 = p.Push({{0, true}});
  TicketVar& v = p.var(0);
  EXPECT_TRUE(v.IsDue(p.task(w0).uses[0]));
  EXPECT_FALSE(v.IsDue(p.task(r1).uses[0]));
  EXPECT_FALSE(v.IsDue(p.task(w3).uses[0]));
  EXPECT_EQ(p.task(w3).uses[0].reads_before, 2u);
  TaskList ready;
  ReleaseUses(p.task(w0).t, &ready);  // w0 ran
  EXPECT_TRUE(ready.empty());         // nothing was parked
  EXPECT_TRUE(v.IsDue(p.task(r1).uses[0]));
  EXPECT_TRUE(v.IsDue(p.task(r2).uses[0]));
  EXPECT_FALSE(v.IsDue(p.task(w3).uses[0]));
  // The write parks; the first read's completion is not enough to resume it.
  EXPECT_FALSE(AcquireUses(&p.task(w3).t, &ready));
  EXPECT_EQ(v.ParkedCountForTesting(), 1);
  ReleaseUses(p.task(r2).t, &ready);
  EXPECT_TRUE(ready.empty());
  ReleaseUses(p.task(r1).t, &ready);
  ASSERT_EQ(ready.size(), 1);
  EXPECT_EQ(ready[0], &p.task(w3).t);
  EXPECT_EQ(v.ParkedCountForTesting(), 0);
}

TEST(TicketVar, OneWriteResumesEveryParkedReadOfTheNextEpoch) {
  Program p(1);
  const int w = p.Push({{0, true}});
  std::vector<int> reads;
  for (int i = 0; i < 100; ++i)
    reads.push_back(p.Push({{0, false}}));  // past TaskList's inline room
  const int w2 = p.Push({{0, true}});
  TaskList ready;
  // Parked newest first: the list must still come out in ticket order.
  EXPECT_FALSE(AcquireUses(&p.task(w2).t, &ready));
  for (auto it = reads.rbegin(); it != reads.rend(); ++it) {
    EXPECT_FALSE(AcquireUses(&p.task(*it).t, &ready));
  }
  EXPECT_EQ(p.var(0).ParkedCountForTesting(), 101);
  ReleaseUses(p.task(w).t, &ready);
  EXPECT_EQ(ready.size(), 100);  // every read, and not the write
  EXPECT_EQ(p.var(0).ParkedCountForTesting(), 1);
  for (int r : reads) ReleaseUses(p.task(r).t, &ready);
  EXPECT_EQ(ready.size(), 101);
  EXPECT_EQ(ready[100], &p.task(w2).t);
}

TEST(TicketVar, ATaskParksOnEachVarInTurnAndIsHandedOutOnce) {
  Program p(3);
  const int a = p.Push({{0, true}});
  const int b = p.Push({{1, true}});
  const int c = p.Push({{2, false}, {0, false}, {1, true}});
  TaskList ready;
  EXPECT_FALSE(AcquireUses(&p.task(c).t, &ready));  // var 2 was due, var 0 not
  EXPECT_EQ(p.task(c).t.acquired, 1);
  EXPECT_EQ(p.var(0).ParkedCountForTesting(), 1);
  ReleaseUses(p.task(a).t, &ready);  // resumes c, which parks again on var 1
  EXPECT_TRUE(ready.empty());
  EXPECT_EQ(p.task(c).t.acquired, 2);
  EXPECT_EQ(p.var(0).ParkedCountForTesting(), 0);
  EXPECT_EQ(p.var(1).ParkedCountForTesting(), 1);
  ReleaseUses(p.task(b).t, &ready);
  ASSERT_EQ(ready.size(), 1);
  EXPECT_EQ(ready[0], &p.task(c).t);
}

TEST(TicketVar, AFunctionWithNoVarsIsReadyAtOnce) {
  Program p(1);
  const int t = p.Push({});
  TaskList ready;
  EXPECT_TRUE(AcquireUses(&p.task(t).t, &ready));
  EXPECT_TRUE(ready.empty());
}

TEST(TicketVar, AllFinishedOnlyOnceEveryPushedUseFinished) NO_THREAD_SAFETY_ANALYSIS {
  Program p(1);
  TicketVar& v = p.var(0);
  auto all_finished = [&] {
    v.push_lock.lock();
    const bool done = v.AllFinished();
    v.push_lock.unlock();
    return done;
  };
  EXPECT_TRUE(all_finished());
  const int w = p.Push({{0, true}});
  const int r = p.Push({{0, false}});
  EXPECT_FALSE(all_finished());
  TaskList ready;
  ReleaseUses(p.task(w).t, &ready);
  EXPECT_FALSE(all_finished());  // the read is still pending
  ReleaseUses(p.task(r).t, &ready);
  EXPECT_TRUE(all_finished());
  // A var reused from a pool starts over: counts at zero, no failure.
  v.SetFailure(std::make_shared<Failure>());
  v.ResetForReuse();
  EXPECT_EQ(v.Failure(), nullptr);
  const int w2 = p.Push({{0, true}});
  EXPECT_EQ(p.task(w2).uses[0].epoch, 0u);
  EXPECT_TRUE(v.IsDue(p.task(w2).uses[0]));
}

TEST(TicketVar, FailureIsSetReadAndTakenOnce) {
  TicketVar v;
  EXPECT_EQ(v.Failure(), nullptr);
  auto f = std::make_shared<Failure>();
  v.SetFailure(f);
  EXPECT_EQ(v.Failure(), f);
  EXPECT_EQ(v.TakeFailure(), f);
  EXPECT_EQ(v.TakeFailure(), nullptr);
}

TEST(TicketVarRandom, EveryTaskRunsOnceAndOnlyAfterItsConflicts) {
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    SCOPED_TRACE(seed);
    Program p(seed % 3 == 0 ? 1 : 6);
    PushRandomProgram(p, 400, seed, seed % 2 == 0 ? 40 : 10);
    Simulation(p, seed * 7919).Run();
    if (HasFatalFailure()) return;
  }
}

TEST(TicketVarRandom, CountsWrapAroundTheirThirtyTwoBits) {
  // Writes start 8 short of 2^32 and reads 8 short of 2^31, so both wrap
  // within the run;
  // a carry from the reads into the writes, or an order by raw epoch, fails.
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    SCOPED_TRACE(seed);
    Program p(seed % 2 == 0 ? 1 : 3, 0xfffffff8u, 0x7ffffff8u);
    PushRandomProgram(p, 300, seed, seed % 3 == 0 ? 5 : 30);
    Simulation(p, seed * 104729).Run();
    if (HasFatalFailure()) return;
  }
}

// Threads run a program: they take tasks from a shared FIFO, acquire, run
// (a read-modify-write of plain ints standing for the vars' data: a race is
// a wrong result here and a report under ThreadSanitizer), release, and run
// what that makes ready. The result must equal a serial run's.
class ThreadedRun {
 public:
  ThreadedRun(Program& p, int threads) : p_(p), threads_(threads) {
    data_.assign(static_cast<std::size_t>(p.num_vars()), 1);
  }

  static std::uint64_t Body(Program::Task& task, std::vector<std::uint64_t>& data) {
    std::uint64_t h = static_cast<std::uint64_t>(task.index) * 0x9e3779b97f4a7c15u;
    for (const UseSpec& s : task.spec)
      h = (h ^ data[static_cast<std::size_t>(s.var)]) * 1099511628211u;
    for (const UseSpec& s : task.spec) {
      if (s.write) data[static_cast<std::size_t>(s.var)] += h | 1;
    }
    return h;
  }

  std::vector<std::uint64_t> Serial() const {
    std::vector<std::uint64_t> data(static_cast<std::size_t>(p_.num_vars()), 1);
    for (int i = 0; i < p_.size(); ++i) Body(p_.task(i), data);
    return data;
  }

  std::vector<std::uint64_t> Run() {
    for (int i = 0; i < p_.size(); ++i) queue_.push_back(&p_.task(i).t);
    std::vector<std::thread> workers;
    for (int i = 0; i < threads_; ++i) workers.emplace_back([this] { Work(); });
    for (auto& w : workers) w.join();
    return data_;
  }

 private:
  void Work() {
    std::vector<TicketTask*> mine;  // ready tasks this thread runs next
    while (finished_.load(std::memory_order_acquire) < p_.size() &&
           !stalled_.load(std::memory_order_relaxed)) {
      TicketTask* t = nullptr;
      if (!mine.empty()) {
        t = mine.back();
        mine.pop_back();
      } else {
        std::lock_guard<std::mutex> lock(queue_mu_);
        if (!queue_.empty()) {
          t = queue_.front();
          queue_.pop_front();
          held_.fetch_add(1, std::memory_order_seq_cst);
        } else if (held_.load(std::memory_order_seq_cst) == 0 &&
                   finished_.load(std::memory_order_seq_cst) < p_.size()) {
          // Every task left is parked and no thread holds one that could
          // resume it: a resumption was lost.
          stalled_.store(true, std::memory_order_relaxed);
        }
      }
      if (t == nullptr) {
        std::this_thread::yield();
        continue;
      }
      TaskList ready;
      const bool run = t->acquired == t->num_uses || AcquireUses(t, &ready);
      Hand(ready, mine);
      if (run) {
        Body(*Program::Of(t), data_);
        TaskList after;
        ReleaseUses(*t, &after);
        Hand(after, mine);
        finished_.fetch_add(1, std::memory_order_seq_cst);
      }
      held_.fetch_sub(1, std::memory_order_seq_cst);  // t finished, or parked
    }
    EXPECT_TRUE(mine.empty());
  }

  // Takes ready tasks into this thread's hands, counted before the task
  // that released them is let go (held_ never drops to 0 in between).
  void Hand(const TaskList& ready, std::vector<TicketTask*>& mine) {
    held_.fetch_add(ready.size(), std::memory_order_seq_cst);
    for (int k = 0; k < ready.size(); ++k) mine.push_back(ready[k]);
  }

 public:
  bool stalled() const { return stalled_.load(); }

 private:
  Program& p_;
  const int threads_;
  std::vector<std::uint64_t> data_;  // ordered by the tracker alone
  std::mutex queue_mu_;
  std::deque<TicketTask*> queue_;
  std::atomic<int> finished_{0};
  // Tasks taken from the queue or handed out ready and not yet finished or
  // parked again (seq_cst: read with the queue's emptiness to detect a stall).
  std::atomic<int> held_{0};
  std::atomic<bool> stalled_{false};
};

void RunThreaded(int num_vars, int tasks, int threads, std::uint64_t seed) {
  Program p(num_vars);
  PushRandomProgram(p, tasks, seed);
  ThreadedRun run(p, threads);
  const std::vector<std::uint64_t> expected = run.Serial();
  EXPECT_EQ(run.Run(), expected);
  EXPECT_FALSE(run.stalled()) << "tasks were left parked with nobody to resume them";
  for (int v = 0; v < num_vars; ++v) EXPECT_EQ(p.var(v).ParkedCountForTesting(), 0) << "var " << v;
}

TEST(TicketVarThreads, ThreeThreadsMatchASerialRun) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE(seed);
    RunThreaded(8, 20000, 3, seed);
  }
}

TEST(TicketVarThreads, OneHotVarMatchesASerialRun) { RunThreaded(1, 20000, 3, 11); }

#ifdef DEPENGINE_TICKET_VAR_TEST_HOOK
// What runs in the park window (between a failed due check and the park).
std::function<void()>* in_park_window = nullptr;

// The race, made deterministic: the task a parker waits for completes after
// the parker's due check failed and before it parks, so the completion sees
// nothing parked. Only the parker can take its task back then.
TEST(TicketVar, AParkerWhoseUseBecameDueInTheWindowTakesItsTaskBack) {
  Program p(2);
  const int w0 = p.Push({{0, true}});
  const int w1 = p.Push({{0, true}, {1, false}});
  TaskList completer_ready;
  std::function<void()> complete_w0 = [&] { ReleaseUses(p.task(w0).t, &completer_ready); };
  in_park_window = &complete_w0;
  ticket_park_delay_for_testing = [] {
    std::function<void()>* f = std::exchange(in_park_window, nullptr);
    if (f != nullptr) (*f)();
  };
  TaskList ready;
  const bool holds_all = AcquireUses(&p.task(w1).t, &ready);
  ticket_park_delay_for_testing = nullptr;
  EXPECT_TRUE(holds_all) << "the parker left its due task on the list";
  EXPECT_TRUE(completer_ready.empty());
  EXPECT_TRUE(ready.empty());
  EXPECT_EQ(p.task(w1).t.acquired, 2);  // went on to var 1 after taking it back
  EXPECT_EQ(p.var(0).ParkedCountForTesting(), 0);
}

// A multi-var task resumed on another var parks on this one behind many
// newer tasks (W3's reduce behind the next rounds' reads): its place is
// found from the near end, not by walking the whole list. With a walk from
// the newest end only, W3 took seconds per run instead of milliseconds.
TEST(TicketVar, ParkingNearEitherEndOfALongListIsCheap) {
  Program p(2);
  const int w0 = p.Push({{0, true}});
  const int older = p.Push({{1, true}, {0, true}});  // waits on var 1 first
  const int blocker = p.Push({{1, true}});
  (void)blocker;
  std::vector<int> reads;
  for (int i = 0; i < 20000; ++i) reads.push_back(p.Push({{0, false}}));
  TaskList ready;
  // The reads park in push order (each at the newest end)...
  ticket_insert_steps_for_testing = 0;
  for (int r : reads) EXPECT_FALSE(AcquireUses(&p.task(r).t, &ready));
  EXPECT_LE(ticket_insert_steps_for_testing, 20000u);
  // ...then the older write reaches var 0 and belongs at the oldest end.
  p.task(older).t.acquired = 1;  // as if resumed on var 1 (not due there)
  ticket_insert_steps_for_testing = 0;
  EXPECT_FALSE(AcquireUses(&p.task(older).t, &ready));
  EXPECT_LE(ticket_insert_steps_for_testing, 2u);
  ReleaseUses(p.task(w0).t, &ready);  // var 0's first write: the older write is next
  ASSERT_EQ(ready.size(), 1);
  EXPECT_EQ(ready[0], &p.task(older).t);
}

// Two completions of one var interleaved between their stores and their
// looks at the parked list: A (the first write) stores, then B (the second
// write, due once A stored) stores, then A looks, then B. The read parked
// behind both is due only after B, so B must take it: each parked task is
// resumed by the completion that made it due (a kAsync successor runs on
// that completion's thread). Taken with a fresh load of the state, A would
// take it.
std::atomic<int> interleave_phase{0};
std::thread::id interleave_first;

TEST(TicketVarThreads, ACompletionResumesOnlyWhatItsOwnStoreMadeDue) {
  Program p(1);
  const int w0 = p.Push({{0, true}});
  const int w1 = p.Push({{0, true}});
  const int r2 = p.Push({{0, false}});
  TaskList unused;
  ASSERT_FALSE(AcquireUses(&p.task(r2).t, &unused));  // parked
  interleave_phase = 0;
  interleave_first = std::this_thread::get_id();
  ticket_complete_delay_for_testing = [] {
    if (std::this_thread::get_id() == interleave_first) {
      interleave_phase = 1;  // A stored; let B complete up to its look
      while (interleave_phase.load() != 2) std::this_thread::yield();
    } else {
      interleave_phase = 2;  // B stored; A looks now, B after it
      while (interleave_phase.load() != 3) std::this_thread::yield();
    }
  };
  TaskList b_ready;
  std::thread b([&] {
    while (interleave_phase.load() != 1) std::this_thread::yield();
    ReleaseUses(p.task(w1).t, &b_ready);
  });
  TaskList a_ready;
  ReleaseUses(p.task(w0).t, &a_ready);
  interleave_phase = 3;
  b.join();
  ticket_complete_delay_for_testing = nullptr;
  EXPECT_TRUE(a_ready.empty()) << "the first completion took work the second one made due";
  ASSERT_EQ(b_ready.size(), 1);
  EXPECT_EQ(b_ready[0], &p.task(r2).t);
}

// With a yield between a failed due check and the park, the completion
// that makes the use due often lands in between: the parker must take its
// task back itself (or the completer take it), never neither.
TEST(TicketVarThreads, WidenedParkRaceLosesNothing) {
  ticket_park_delay_for_testing = [] { std::this_thread::yield(); };
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE(seed);
    RunThreaded(seed == 1 ? 1 : 4, 10000, 3, seed + 100);
  }
  ticket_park_delay_for_testing = nullptr;
}
#endif

}  // namespace
}  // namespace depengine::internal
