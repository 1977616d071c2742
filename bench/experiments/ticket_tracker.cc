// depengine-ticket-proto: a prototype of a "ticket" dependency tracker,
// measured on W1, W2, W4 and W5 of WORKLOADS.md against a no-tracking
// handoff floor. It does not use the library (only W4's definition from
// bench/workloads/workload_spec.h); see the last section of
// docs/performance.md ("A ticket tracker: measured prototype") for the design and
// the figures.
//
// Scope: one pushing thread (the main thread); functions with up to 5 vars,
// read (const) or written, at least one; no priorities, no failures. W4
// (random DAG: 2 reads and 1 write per function) runs too; see "W4 with
// reads and several vars" in docs/performance.md. Every shared field says what
// protects it.
//
// The idea: the pusher never loads from, and never does a locked
// read-modify-write on, a cache line that a worker writes, in the common
// case.
//  - A var has a pusher side (`writes_pushed`, the ticket the next write
//    gets; only the pusher touches it) and a worker side (`state`, the number
//    of the var's functions completed; only workers touch it), 128 bytes
//    apart. (With reads both count writes and reads: see below; a "ticket"
//    of a write-only var is its write count, shifted left 32 bits.)
//  - A push stamps the function with its var's next ticket and writes it,
//    closure included, into a slot of one worker's single-producer /
//    single-consumer ring: no block pool, no free list, no links. The pusher
//    publishes its tail every `--batch` pushes and reloads the worker's head
//    only when its cached copy says the ring is full, so freed slots come
//    back in batches.
//  - A worker that takes a slot runs it if `state == ticket`, then stores
//    the next ticket. Otherwise it parks the function on the var (a list
//    under a spin lock only workers take), and whoever completes the
//    previous ticket runs it. The park / complete race is a Dekker handshake
//    on (state, has_parked), both seq_cst: worker side only.
//  - Ring choice (`--policy`): `affinity` sends a function to its var's home
//    worker (vars get homes round robin at creation), so a var's functions
//    reach one worker in push order and never park; `rr` deals functions to
//    the workers round robin whatever their var, so a chain parks on every
//    other function: the tracker's general path.
//  - The floor (`floor-W2`): the same rings and closures with no var, no
//    ticket and no completion check; rr, so with K even var k's functions
//    all reach worker k % 2 and the plain ++ is race free.
//  - Waiting: an idle worker spins (`--spin` polls, yielding every 64), then
//    sleeps on a futex; the pusher wakes it when it publishes (a seq_cst
//    store of the tail, then a load of the worker's flag: once per batch).
//    `--publish=flag` publishes every push by a word in its slot instead
//    (no tail; the pusher passes a compiler barrier only, and a worker about
//    to sleep runs membarrier), `--publish=flag-fence` the same with a fence
//    on the pusher: docs/performance.md, "Publishing every push".
//    A pusher that waits (ring full, WaitForAll) spins briefly, then sleeps
//    on a futex that a worker bumps when it passes the head the pusher wants
//    or runs dry: on two cores, a spinning waiter takes a worker's core.
//  - `--locked` models the extra cost of pushes from several threads: the
//    ticket is taken by a locked fetch_add and a ring slot claimed by another
//    (the prototype still has one pusher). `--ring` large enough for every
//    push of a repetition models an unbounded (segmented) ring: a push never
//    waits, as `max_in_flight = 0` promises.
//  - `--pin` / `--pin=split` place the threads on fixed CPUs (see Options),
//    and `taskset -c 0` runs all three on one: experiments on how much of
//    the figure is cross-core traffic, which on this VM costs 60-250 ns per
//    line handoff depending on the other tenants' load.
//
// Reads and several vars (W4):
//  - The pusher side counts writes pushed and reads pushed since the last
//    write. A write is stamped (W, R), a read (W, 0), packed as
//    (W << 32) | R. The worker side is one word, state = (writes done, reads
//    done since the last write): a write is due when state == its stamp, a
//    read when state's write count is W. A write completes with a store of
//    (W + 1, 0), a read with a fetch_add(1) (among workers only).
//  - A function with several vars takes two ring slots (vars 1-4 in the
//    second). A worker checks its vars in order (writes first); on the first
//    one not due it moves the function to a pooled node and parks it on that
//    var (a list sorted by stamp, so the due functions are a prefix). A
//    completer that finds has_parked set pops the due prefix and resumes each
//    node from its next var: exactly one thread takes a node off a list, so
//    exactly one runs it.
//  - Resumed nodes go to a ready list, run before the ring. `--resume=here`
//    (default): the completer's own; `--resume=home`: the ready list of the
//    worker whose ring the function came from (the affinity worker), under a
//    spin lock; `--steal`: an idle worker takes half of another's ready list.
//    W4 needs home + steal: with `here`, one worker runs nearly everything
//    (the completer of a var runs its successors) while the other idles.
//    `--resume=short[:N]`: home only while the home worker's ready list holds
//    fewer than N nodes, else the completer keeps the node (performance.md, "Step
//    4 measured").
//
// Correctness: every repetition checks its counters (WORKLOADS.md), and the
// program runs clean under -fsanitize=thread, with `--park-delay` widening
// the park / complete race so that the parker's take-back path runs.
#include <linux/membarrier.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/process_cpu.h"
#include "workloads/workload_spec.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PROTO_PAUSE() _mm_pause()
#else
#define PROTO_PAUSE() ((void)0)
#endif

namespace {

using depengine::bench::ProcessCpuSeconds;

struct RunCtx {
  int dev_type;
  int dev_id;
  void* stream;
};
using Fn = std::function<void(RunCtx)>;

// The completion callback handed to a prebuilt (async) operator. The
// prototype's operators call it inside their body; it records that in a
// thread-local flag, as depengine's InlineCompletion does, and the worker
// completes the function when the body returns. (A callback called later,
// from another thread, is a feature the prototype lacks.)
thread_local bool tls_called = false;
struct Callback {
  void operator()() const { tls_called = true; }
};
using AsyncFn = std::function<void(RunCtx, Callback)>;
constexpr std::uint64_t kVarMagic = 0x7661725f70726f74ULL;

struct Options {
  std::string only = "floor-W2,W1,W2,W5";
  std::string policy = "affinity";
  std::size_t n = 1'000'000;   // W1 and W5 functions
  std::size_t n2 = 1'048'576;  // W2 functions
  std::size_t k = 4096;        // W2 vars
  int reps = 5;
  int workers = 2;
  std::uint64_t ring = 4096;    // slots per worker, power of two
  std::uint64_t batch = 32;     // pushes per tail publication
  // --publish=flag: every push is published at once, by a flag in its slot
  // (no tail line, no fence on the pusher); the worker's sleep uses an
  // asymmetric barrier (membarrier) so the pusher needs none. See Emit.
  bool flag_publish = false;
  // --publish=flag-fence: the same, with a full fence on the pusher between
  // the slot's flag and the sleep flag, and none on the worker (to price the
  // fence that the asymmetric barrier saves).
  bool flag_fence = false;
  std::uint64_t prefetch = 0;   // pusher's prefetchw distance in slots (0: off)
  std::uint64_t wprefetch = 4;  // worker's prefetch distance in slots
  int spin = 4000;              // idle polls before a worker sleeps
  int park_delay = 0;           // test only: pauses in Park before publishing
  // --locked: model what pushes from several threads would cost: the
  // ticket is taken by a locked fetch_add and the ring slot claimed by one
  // (both on lines only pushers write). Still one pusher here.
  bool locked = false;
  // --biased: the fast path of a var owned by the thread that pushes to it,
  // the way a multi-threaded engine could avoid --locked's instructions:
  // check ownership, mark the var busy, a compiler barrier, check that no
  // other thread asked for the var (a thief would set that flag, pass a
  // membarrier and wait for busy to clear), stamp, clear busy. Only the
  // fast path is modelled: the prototype has one pusher, so nobody steals.
  bool biased = false;
  // --pin (=mixed): the pusher on CPU 0, worker 0 on CPU 1, worker 1 on
  // CPU 0; --pin=split: the pusher on CPU 0, both workers on CPU 1. An
  // experiment: every slot then crosses cores (W1's chain, half of W2 with
  // mixed, all of it with split).
  int pin = 0;
  bool wait_sleeps = true;  // --wait=sleep: the pusher's waits sleep on a futex; spin: spin + yield
  // --steal: an idle worker takes half of another worker's ready list (the
  // functions that other worker's completions resumed); ready lists are then
  // under a spin lock.
  bool steal = false;
  // --resume=home: a completer hands each function it makes due to the
  // worker whose ring it came from (its ready list, under a lock); default
  // (here): the completer runs it.
  bool resume_home = false;
  // --resume=mixed: home, but a completer with nothing ready keeps one.
  bool resume_mixed = false;
  // --resume=short[:N] (N = short_limit >= 1, default 4; 0: off): home, but
  // only while the home worker's ready list holds fewer than N nodes,
  // counting those this completion hands it; otherwise the completer keeps
  // the node (on its own ready list, under its lock).
  std::uint32_t short_limit = 0;
  int t_us = 0;              // W4: the body's spin, microseconds
  std::size_t n4 = 200'000;  // W4 functions
  std::size_t v4 = 1000;     // W4 vars
};

void PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set);
}

class SpinLock {
 public:
  void lock() {
    while (flag_.exchange(true, std::memory_order_acquire)) {
      while (flag_.load(std::memory_order_relaxed)) PROTO_PAUSE();
    }
  }
  void unlock() { flag_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> flag_{false};
};

struct Opr;
struct Var;

// Vars per function: var 0 in the head slot, up to 4 more in an extension
// slot that follows it in the ring.
constexpr int kMaxVars = 5;
constexpr int kMaxWorkers = 16;
// One write in a stamp or a state word: (writes << 32) | reads.
constexpr std::uint64_t kEpoch = std::uint64_t{1} << 32;

// A function's stamp on a var, and the var's worker-side state word, are both
// (writes, reads) packed as (writes << 32) | reads. A write stamped (W, R) --
// W writes and R reads pushed on the var before it since the last write -- is
// due when the state is exactly (W, R). A read stamped (W, 0) is due when the
// state's write count is W, whatever the other reads of its epoch have done.
// Once due, a stamp stays due until its own function completes: nothing else
// can move the write count, and the next write waits for this read.
inline bool Due(std::uint64_t state, std::uint64_t stamp, bool read) {
  return read ? (state >> 32) == (stamp >> 32) : state == stamp;
}

// A function that left its ring slot: parked on the first of its vars that
// was not due for it, or resumed (on a worker's ready list) by the completer
// that made that var due. Nodes are pooled per worker.
struct Node {
  Fn fn;  // empty when `opr` is set
  Opr* opr;
  Node* next;  // guarded by the list it is on: a var's park_lock, or a ready list's owner /
               // ready_lock
  std::uint8_t nvars;
  std::uint8_t readmask;  // bit i: var i is read (const)
  std::uint8_t idx;       // parked: the var it waits on; resumed: the first var not yet checked
  std::uint8_t home;      // the worker whose ring it came from
  Var* var[kMaxVars];
  std::uint64_t stamp[kMaxVars];
};

struct Var {
  // Pusher side: the pushing thread only.
  alignas(128) std::uint64_t writes_pushed = 0;
  std::uint64_t reads_since = 0;    // reads pushed since the last write
  std::uint64_t magic = kVarMagic;  // a handle check, as the engine's
  std::uint32_t home = 0;
  // --biased: the owning thread's token, its busy flag, and the flag another
  // pusher would raise to take the var over (written by the owner and a
  // thief only; relaxed here, ordered by the asymmetric barrier).
  std::atomic<std::uint32_t> owner{1};
  std::atomic<std::uint32_t> busy{0};
  std::atomic<std::uint32_t> wanted{0};
  // Worker side: workers only. `state` = (writes done, reads done since the
  // last write). A write's completion stores (W + 1, 0): while a write runs no
  // other function of the var can run, so it is the only writer then. A
  // read's completion is a fetch_add(1) (the epoch's readers may finish
  // together): a locked RMW, but among workers; the pusher never touches this
  // line. Both seq_cst (Dekker with has_parked); loaded acquire by the next
  // function, which so sees its predecessors' effects (a read-completion
  // fetch_add continues the release sequence of every earlier one).
  alignas(128) std::atomic<std::uint64_t> state{0};
  std::atomic<bool> has_parked{false};  // written under park_lock; seq_cst (Dekker with state)
  SpinLock park_lock;
  Node* parked_head = nullptr;  // sorted by this var's stamp (push order on it); park_lock
  Node* parked_tail = nullptr;  // park_lock
};
static_assert(sizeof(Var) == 256);

// A prebuilt operator (W5): its closure is built once and reused.
struct Opr {
  AsyncFn fn;
  Var* var;
};

// One pushed function, in place in a worker's ring. The worker reads it and
// never writes it, so the pusher's next write of the slot finds the line
// shared, not modified on the other core. A function with several vars takes
// two slots: this head, then a SlotExt with vars 1..nvars-1.
struct alignas(64) Slot {
  alignas(Fn) unsigned char fn[sizeof(Fn)];  // a live Fn unless opr is set
  Opr* opr;
  Var* var;               // var 0; null: untracked (the floor)
  std::uint64_t ticket;   // var 0's stamp
  std::uint8_t nvars;     // 0: untracked; 1: this slot only; 2-5: a SlotExt follows
  std::uint8_t readmask;  // bit i: var i is read (const)
  // --publish=flag: the slot's own publication, (its ring position + 1)
  // truncated, stored last with release; the worker polls it in place of the
  // tail. Zero in a SlotExt's place (Emit clears it).
  std::atomic<std::uint32_t> seq;
};
static_assert(sizeof(Slot) == 64);
// The second slot of a multi-var function; copied in and out with memcpy.
struct SlotExt {
  Var* var[kMaxVars - 1];
  std::uint64_t stamp[kMaxVars - 1];
};
static_assert(sizeof(SlotExt) == sizeof(Slot));

struct alignas(128) Worker {
  // Pusher-private (never touched by the worker).
  std::uint64_t p_tail = 0;               // next slot the pusher writes
  std::uint64_t p_published = 0;          // last tail stored to `tail`
  std::uint64_t p_head_cache = 0;         // last head the pusher loaded
  std::uint64_t p_unpublished = 0;        // pushes since the last publication
  std::uint64_t p_pushed = 0;             // functions pushed to this ring
  std::atomic<std::uint64_t> p_claim{0};  // --locked only: a model of an MPSC slot claim
  // Read-only after construction.
  alignas(128) Slot* slots = nullptr;
  std::uint64_t mask = 0;
  // Written by the pusher (release / seq_cst), read by the worker.
  alignas(128) std::atomic<std::uint64_t> tail{0};
  // Written by the worker (release), read by the pusher when the ring looks
  // full, or in WaitForAll.
  alignas(128) std::atomic<std::uint64_t> head{0};
  std::atomic<std::uint64_t> completed{0};  // functions this worker ran, from any list
  // The sleep handshake: worker stores true then loads tail (and, with
  // --steal, the other workers' ready_count); pusher stores tail then loads
  // it, a worker that grows its ready list stores ready_count then loads it;
  // all seq_cst.
  alignas(128) std::atomic<bool> sleeping{false};
  // Written by the pusher (seq_cst) when it sleeps for room in this ring: the
  // head it waits for (0: none). The worker loads it after each head store
  // (relaxed: a stale 0 is caught at a later store or at the seq_cst barrier
  // the worker passes when its ring runs dry, before which its ring has
  // emptied past any target) and clears it by CAS, which it follows with a
  // wake-up, so a clear never strands a sleeping pusher.
  alignas(128) std::atomic<std::uint64_t> room_wanted{0};
  // Ready list: nodes this worker's completions resumed (or it stole). The
  // owner only without --steal; with it, under ready_lock (workers only).
  alignas(128) SpinLock ready_lock;
  Node* ready_head = nullptr;
  // --steal: written under ready_lock (seq_cst: Dekker with a peer's sleep
  // flag), read by idle peers without it (a hint; they lock before taking).
  std::atomic<std::uint32_t> ready_count{0};
  Node* free_nodes = nullptr;  // the owner only: its node pool
  // Statistics, written by this worker only, off the per-function path
  // (relaxed; read after WaitForAll): functions parked, parked functions the
  // parker itself found due after publishing them (the Dekker race, won by
  // it), sleeps, steals and nodes stolen.
  std::atomic<std::uint64_t> parks{0};
  std::atomic<std::uint64_t> idle_barrier{0};  // a seq_cst RMW target (its value is unused)
  std::atomic<std::uint64_t> took_back{0};
  std::atomic<std::uint64_t> sleeps{0};  // times the worker slept (its own counter)
  std::atomic<std::uint64_t> steals{0};
  std::atomic<std::uint64_t> stolen{0};
  std::atomic<std::uint64_t> ran_ready{0};  // functions run from the ready list
  // --resume=short: nodes this worker made due whose home is another worker,
  // handed there / kept here.
  std::atomic<std::uint64_t> handed{0};
  std::atomic<std::uint64_t> kept{0};
  std::atomic<std::uint64_t> idle_ns{0};
  int index = 0;  // read-only after construction
  std::thread thread;
};

template <class T>
void Bump(std::atomic<T>& c, T by = 1) {  // a single-writer statistics counter
  c.store(c.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

class Engine {
 public:
  Engine(const Options& o) : opt_(o) {
    if (o.flag_publish &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) != 0) {
      throw std::runtime_error("prototype: membarrier (private expedited) is not available");
    }
    for (int w = 0; w < o.workers; ++w) {
      auto wk = std::make_unique<Worker>();
      wk->slots = static_cast<Slot*>(::operator new(sizeof(Slot) * o.ring, std::align_val_t(128)));
      std::memset(static_cast<void*>(wk->slots), 0, sizeof(Slot) * o.ring);
      wk->mask = o.ring - 1;
      wk->index = w;
      workers_.push_back(std::move(wk));
    }
    for (int w = 0; w < o.workers; ++w) {
      workers_[w]->thread = std::thread([this, w] {
        if (opt_.pin == 1) PinTo((w + 1) % 2);  // worker 0 on CPU 1, worker 1 beside the pusher
        if (opt_.pin == 2) PinTo(1);
        WorkerLoop(*workers_[w]);
      });
    }
  }
  ~Engine() {
    WaitForAll();
    stop_.store(true, std::memory_order_seq_cst);
    for (auto& wk : workers_) {
      wk->sleeping.store(false, std::memory_order_seq_cst);
      wk->sleeping.notify_one();
    }
    for (auto& wk : workers_) wk->thread.join();
    for (auto& wk : workers_) {
      ::operator delete(wk->slots, std::align_val_t(128));
      while (Node* n = wk->free_nodes) {
        wk->free_nodes = n->next;
        delete n;
      }
    }
  }

  Var* NewVar() {
    Var* v = new Var;
    v->home = next_home_++ % static_cast<std::uint32_t>(workers_.size());
    return v;
  }
  void DeleteVar(Var* v) { delete v; }  // after WaitForAll only (prototype)

  // Untracked handoff (the floor): round robin over the workers.
  void PushUntracked(Fn&& fn) {
    Emit(NextRr(), 1, [&](std::uint64_t t) {
      Slot* s = &workers_[cur_]->slots[t & workers_[cur_]->mask];
      new (s->fn) Fn(std::move(fn));
      s->opr = nullptr;
      s->var = nullptr;
      s->nvars = 0;
    });
  }
  // The engine's PushSync shape: the engine's checks (null function, null or
  // bad var, a var both read and written; duplicates within a list merge).
  // The prototype supports at most 5 distinct vars, at least one, and
  // priority 0.
  void PushSync(Fn fn, const std::vector<Var*>& const_vars, const std::vector<Var*>& mutable_vars,
                int priority = 0, const char* name = nullptr) {
    (void)name;
    if (!fn) throw std::invalid_argument("PushSync: null function");
    if (priority != 0) throw std::invalid_argument("prototype: priority 0 only");
    if (const_vars.empty() && mutable_vars.size() == 1) {  // W1 / W2: one written var
      Var* v = mutable_vars[0];
      if (v == nullptr || v->magic != kVarMagic) throw std::invalid_argument("PushSync: bad var");
      Push(std::move(fn), v);
      return;
    }
    PushMulti(std::move(fn), const_vars, mutable_vars);
  }
  // A function writing `v`.
  void Push(Fn&& fn, Var* v) {
    const std::uint64_t t0 = StampWrite(v);
    const std::uint32_t w = Route(v);
    Emit(w, 1, [&](std::uint64_t t) {
      Slot* s = &workers_[w]->slots[t & workers_[w]->mask];
      new (s->fn) Fn(std::move(fn));
      s->opr = nullptr;
      s->var = v;
      s->ticket = t0;
      s->nvars = 1;
      s->readmask = 0;
    });
  }
  // A prebuilt operator: no closure is built or copied.
  void Push(Opr* op, int priority = 0) {
    if (op == nullptr || priority != 0) throw std::invalid_argument("Push: bad operator");
    Var* v = op->var;
    const std::uint64_t t0 = StampWrite(v);
    const std::uint32_t w = Route(v);
    Emit(w, 1, [&](std::uint64_t t) {
      Slot* s = &workers_[w]->slots[t & workers_[w]->mask];
      s->opr = op;
      s->var = v;
      s->ticket = t0;
      s->nvars = 1;
      s->readmask = 0;
    });
  }

  std::uint64_t Parks() const { return Sum(&Worker::parks); }
  std::uint64_t TookBack() const { return Sum(&Worker::took_back); }
  std::uint64_t Steals() const { return Sum(&Worker::steals); }
  std::uint64_t Stolen() const { return Sum(&Worker::stolen); }
  std::uint64_t Handed() const { return Sum(&Worker::handed); }
  std::uint64_t Kept() const { return Sum(&Worker::kept); }
  std::string WorkerStats() const {
    std::string r;
    for (auto& wk : workers_) {
      r += "w: ran " + std::to_string(wk->completed.load()) + " (ready " +
           std::to_string(wk->ran_ready.load()) + ") idle " +
           std::to_string(wk->idle_ns.load() / 1000000) + " ms; ";
    }
    return r;
  }
  std::string WaitStats() const {
    return std::to_string(room_waits_) + " full-ring waits (" + std::to_string(room_sleeps_) +
           " slept), " + std::to_string(Sum(&Worker::sleeps)) + " worker sleeps";
  }

  void WaitForAll() {
    std::uint64_t pushed = 0;
    for (auto& wk : workers_) {
      Publish(*wk);
      pushed += wk->p_pushed;
    }
    // The pusher must not take a core from the workers while it waits (two
    // cores, three threads): after a short spin it sleeps on pusher_wake_
    // until a worker that runs out of work wakes it (see WorkerLoop).
    for (int spins = 0;; ++spins) {
      if (CompletedSum() == pushed) break;
      if (spins < 256 || !opt_.wait_sleeps) {
        SpinOrYield(spins);
        continue;
      }
      all_target_.store(pushed, std::memory_order_relaxed);
      all_waiter_.store(true, std::memory_order_seq_cst);
      const std::uint32_t seq = pusher_wake_.load(std::memory_order_seq_cst);
      if (CompletedSum() != pushed) pusher_wake_.wait(seq, std::memory_order_seq_cst);
      all_waiter_.store(false, std::memory_order_relaxed);
    }
  }

 private:
  std::uint64_t Sum(std::atomic<std::uint64_t> Worker::*f) const {
    std::uint64_t n = 0;
    for (auto& wk : workers_) n += ((*wk).*f).load(std::memory_order_relaxed);
    return n;
  }
  std::uint32_t NextRr() {
    const std::uint32_t w = rr_;
    rr_ = (w + 1 == workers_.size()) ? 0 : w + 1;
    cur_ = w;
    return w;
  }
  // Pusher-side stamps: only the pusher's lines are read or written.
  // --biased: the owner's entry to and exit from its var's push side.
  static void BiasedEnter(Var* v) {
    if (v->owner.load(std::memory_order_relaxed) != 1) std::abort();  // one pusher: token 1
    v->busy.store(1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (v->wanted.load(std::memory_order_relaxed) != 0) std::abort();  // nobody steals here
  }
  static void BiasedExit(Var* v) { v->busy.store(0, std::memory_order_release); }
  std::uint64_t StampWrite(Var* v) {
    if (opt_.biased) {
      BiasedEnter(v);
      const std::uint64_t stamp = (v->writes_pushed++ << 32) | v->reads_since;
      v->reads_since = 0;
      BiasedExit(v);
      return stamp;
    }
    const std::uint64_t r = v->reads_since;
    v->reads_since = 0;
    if (!opt_.locked) return (v->writes_pushed++ << 32) | r;
    return (std::atomic_ref<std::uint64_t>(v->writes_pushed).fetch_add(1, std::memory_order_acq_rel)
            << 32) |
           r;
  }
  std::uint64_t StampRead(Var* v) {
    if (opt_.biased) BiasedEnter(v);
    ++v->reads_since;
    const std::uint64_t stamp = v->writes_pushed << 32;
    if (opt_.biased) BiasedExit(v);
    return stamp;
  }
  std::uint32_t Route(Var* v) { return opt_.policy == "rr" ? NextRr() : v->home; }

  // Several vars, or reads: writes first, then reads, duplicates merged; the
  // function is routed by its first var (a written one when it has one).
  void PushMulti(Fn&& fn, const std::vector<Var*>& reads, const std::vector<Var*>& writes) {
    Var* vars[kMaxVars];
    std::uint8_t readmask = 0;
    int n = 0;
    auto add = [&](Var* v, bool read) {
      if (v == nullptr || v->magic != kVarMagic) throw std::invalid_argument("PushSync: bad var");
      for (int j = 0; j < n; ++j) {
        if (vars[j] != v) continue;
        if (((readmask >> j) & 1) != (read ? 1 : 0)) {
          throw std::invalid_argument("PushSync: a var in both const_vars and mutable_vars");
        }
        return;  // a duplicate within one list
      }
      if (n == kMaxVars) throw std::invalid_argument("prototype: at most 5 vars per function");
      if (read) readmask = static_cast<std::uint8_t>(readmask | (1u << n));
      vars[n++] = v;
    };
    for (Var* v : writes) add(v, false);
    for (Var* v : reads) add(v, true);
    if (n == 0) throw std::invalid_argument("prototype: at least one var");
    if (opt_.flag_publish && n > kMaxVars - 1)  // the SlotExt's last stamp overlaps the flag
      throw std::invalid_argument("prototype: --publish=flag takes at most 4 vars");
    std::uint64_t stamps[kMaxVars];
    for (int i = 0; i < n; ++i)
      stamps[i] = (readmask >> i) & 1 ? StampRead(vars[i]) : StampWrite(vars[i]);
    const std::uint32_t w = Route(vars[0]);
    Worker& wk = *workers_[w];
    Emit(w, n > 1 ? 2 : 1, [&](std::uint64_t t) {
      Slot* s = &wk.slots[t & wk.mask];
      new (s->fn) Fn(std::move(fn));
      s->opr = nullptr;
      s->var = vars[0];
      s->ticket = stamps[0];
      s->nvars = static_cast<std::uint8_t>(n);
      s->readmask = readmask;
      if (n > 1) {
        SlotExt e;
        for (int i = 1; i < n; ++i) {
          e.var[i - 1] = vars[i];
          e.stamp[i - 1] = stamps[i];
        }
        std::memcpy(static_cast<void*>(&wk.slots[(t + 1) & wk.mask]), &e, sizeof(e));
      }
    });
  }

  // Writes one function into `nslots` consecutive slots of worker w's ring.
  template <class Fill>
  void Emit(std::uint32_t w, std::uint64_t nslots, Fill&& fill) {
    Worker& wk = *workers_[w];
    const std::uint64_t t = wk.p_tail;
    if (opt_.locked) wk.p_claim.fetch_add(1, std::memory_order_acq_rel);
    if (t + nslots - wk.p_head_cache > wk.mask + 1) WaitForRoom(wk, t, nslots);
    if (opt_.prefetch) __builtin_prefetch(&wk.slots[(t + opt_.prefetch) & wk.mask], 1, 3);
    fill(t);
    wk.p_tail = t + nslots;
    ++wk.p_pushed;
    if (opt_.flag_publish) {
      // The slot's flag, last: the worker polls it. Then the sleep flag,
      // with no fence between: a worker that set it ran a membarrier before
      // its last look at this slot, which either saw the flag or made its
      // own store visible to the load below (asymmetric Dekker).
      if (nslots > 1) wk.slots[(t + 1) & wk.mask].seq.store(0, std::memory_order_relaxed);
      wk.slots[t & wk.mask].seq.store(static_cast<std::uint32_t>(t + 1), std::memory_order_release);
      if (opt_.flag_fence) {
        std::atomic_thread_fence(std::memory_order_seq_cst);
      } else {
        std::atomic_signal_fence(std::memory_order_seq_cst);  // keeps the compiler in order
      }
      if (wk.sleeping.load(std::memory_order_relaxed)) [[unlikely]] {
        wk.sleeping.store(false, std::memory_order_seq_cst);
        wk.sleeping.notify_one();
      }
      return;
    }
    if (++wk.p_unpublished >= opt_.batch) Publish(wk);
  }

  void Publish(Worker& wk) {
    wk.p_unpublished = 0;
    if (wk.p_published == wk.p_tail) return;
    wk.p_published = wk.p_tail;
    wk.tail.store(wk.p_tail, std::memory_order_seq_cst);
    if (wk.sleeping.load(std::memory_order_seq_cst)) {
      wk.sleeping.store(false, std::memory_order_seq_cst);
      wk.sleeping.notify_one();
    }
  }

  std::uint64_t CompletedSum() const {
    std::uint64_t done = 0;
    for (auto& wk : workers_) done += wk->completed.load(std::memory_order_seq_cst);
    return done;
  }
  static void SpinOrYield(int spins) {
    if (spins < 256)
      PROTO_PAUSE();
    else
      sched_yield();
  }

  // The ring is full. Once the pusher has had to wait, it waits until the
  // worker has emptied half the ring (hysteresis), so that it does not
  // come back for every slot.
  void WaitForRoom(Worker& wk, std::uint64_t t, std::uint64_t nslots) {
    ++room_waits_;
    Publish(wk);
    const std::uint64_t target = t + nslots - (wk.mask + 1) / 2;  // head that frees half the ring
    for (int spins = 0;; ++spins) {
      wk.p_head_cache = wk.head.load(std::memory_order_seq_cst);
      if (wk.p_head_cache >= target) return;
      if (spins < 256 || !opt_.wait_sleeps) {
        SpinOrYield(spins);
        continue;
      }
      // Sleep until the worker passes `target`: it checks room_wanted after
      // every head store (relaxed) and, seq_cst, when it runs out of work.
      wk.room_wanted.store(target, std::memory_order_seq_cst);
      const std::uint32_t seq = pusher_wake_.load(std::memory_order_seq_cst);
      if (wk.head.load(std::memory_order_seq_cst) < target) {
        ++room_sleeps_;
        pusher_wake_.wait(seq, std::memory_order_seq_cst);
      }
      wk.room_wanted.store(0, std::memory_order_relaxed);
    }
  }

  // --- worker side ---------------------------------------------------------

  static void RunOpr(Opr* op) {
    tls_called = false;
    op->fn(RunCtx{1, 0, nullptr}, Callback{});
    if (!tls_called) std::abort();  // the prototype's operators complete inline
  }
  static void RunSlot(Slot* s) {
    if (s->opr) {
      RunOpr(s->opr);
    } else {
      Fn* f = std::launder(reinterpret_cast<Fn*>(s->fn));
      (*f)(RunCtx{1, 0, nullptr});
      f->~Fn();
    }
  }

  Node* NewNode(Worker& wk) {
    Node* n = wk.free_nodes;
    if (n == nullptr) return new Node;
    wk.free_nodes = n->next;
    return n;
  }
  static void FreeNode(Worker& wk, Node* n) {
    n->next = wk.free_nodes;
    wk.free_nodes = n;
  }
  // Moves the function in ring slot s (vars and stamps already copied out)
  // into a node, so that the slot can be reused.
  Node* ToNode(Worker& wk, Slot* s, Var* const* vars, const std::uint64_t* stamps) {
    Node* n = NewNode(wk);
    n->opr = s->opr;
    if (!s->opr) {
      Fn* f = std::launder(reinterpret_cast<Fn*>(s->fn));
      n->fn = std::move(*f);
      f->~Fn();
    }
    n->next = nullptr;
    n->home = static_cast<std::uint8_t>(wk.index);
    n->nvars = s->nvars;
    n->readmask = s->readmask;
    for (int i = 0; i < s->nvars; ++i) {
      n->var[i] = vars[i];
      n->stamp[i] = stamps[i];
    }
    return n;
  }

  // Nodes made due by this worker: to its own ready list, or with
  // --resume=home each to the ready list of the worker whose ring it came from.
  void Resume(Worker& wk, Node* first, Node* last, std::uint32_t count) {
    if (!opt_.resume_home) return AddReady(wk, first, last, count);
    if (opt_.resume_mixed && wk.ready_count.load(std::memory_order_relaxed) == 0) {
      // --resume=mixed: keep the first for this worker, which has nothing
      // else ready (the successor a completion makes ready runs here).
      Node* keep = first;
      first = first->next;
      keep->next = nullptr;
      AddReady(wk, keep, keep, 1);
      if (!first) return;
    }
    Node* f[kMaxWorkers] = {};
    Node* l[kMaxWorkers] = {};
    std::uint32_t c[kMaxWorkers] = {};
    // --resume=short: each peer's ready_count is loaded at most once per
    // call (a relaxed load of a line the peer writes: a hint; a stale value
    // only sends a node to the other list, both of which take it under
    // ready_lock). -1: not loaded yet.
    std::int64_t len[kMaxWorkers];
    std::fill(len, len + kMaxWorkers, -1);
    for (Node* n = first; n;) {
      Node* next = n->next;
      int h = n->home;
      if (opt_.short_limit != 0 && h != wk.index) {
        if (len[h] < 0) len[h] = workers_[h]->ready_count.load(std::memory_order_relaxed);
        if (static_cast<std::uint64_t>(len[h]) + c[h] >= opt_.short_limit) h = wk.index;
        Bump(h == wk.index ? wk.kept : wk.handed);
      }
      n->next = nullptr;
      if (l[h])
        l[h]->next = n;
      else
        f[h] = n;
      l[h] = n;
      ++c[h];
      n = next;
    }
    (void)last;
    for (std::size_t w = 0; w < workers_.size(); ++w) {
      if (c[w]) AddReady(*workers_[w], f[w], l[w], c[w]);
    }
  }
  // Ready list: the owner's, or under ready_lock with --steal or
  // --resume=home (then other workers add to it or take from it).
  void AddReady(Worker& wk, Node* first, Node* last, std::uint32_t count) {
    if (!locked_ready_) {
      last->next = wk.ready_head;
      wk.ready_head = first;
      return;
    }
    wk.ready_lock.lock();
    last->next = wk.ready_head;
    wk.ready_head = first;
    const std::uint32_t now = wk.ready_count.fetch_add(count, std::memory_order_seq_cst) +
                              count;  // Dekker: then sleeping
    wk.ready_lock.unlock();
    // --resume=home: wake the owner if it sleeps; --steal: with more than the
    // owner runs next, wake a sleeping peer to steal.
    if (opt_.resume_home && wk.sleeping.load(std::memory_order_seq_cst)) {
      wk.sleeping.store(false, std::memory_order_seq_cst);
      wk.sleeping.notify_one();
    }
    if (opt_.steal && now >= 2) {
      for (auto& p : workers_) {
        if (p.get() != &wk && p->sleeping.load(std::memory_order_seq_cst)) {
          p->sleeping.store(false, std::memory_order_seq_cst);
          p->sleeping.notify_one();
        }
      }
    }
  }
  Node* PopReady(Worker& wk) {
    if (!locked_ready_) {
      Node* n = wk.ready_head;
      if (n) wk.ready_head = n->next;
      return n;
    }
    // A hint: a stale zero is caught at the next poll, and before sleeping
    // (seq_cst, see WorkerLoop).
    if (wk.ready_count.load(std::memory_order_relaxed) == 0) return nullptr;
    wk.ready_lock.lock();
    Node* n = wk.ready_head;
    if (n) {
      wk.ready_head = n->next;
      wk.ready_count.fetch_sub(1, std::memory_order_relaxed);
    }
    wk.ready_lock.unlock();
    return n;
  }
  // --steal: an idle worker takes half (rounded up) of a peer's ready list.
  bool Steal(Worker& wk) {
    for (auto& p : workers_) {
      Worker& o = *p;
      if (&o == &wk || o.ready_count.load(std::memory_order_relaxed) == 0) continue;
      o.ready_lock.lock();
      const std::uint32_t c = o.ready_count.load(std::memory_order_relaxed);
      const std::uint32_t take = (c + 1) / 2;
      Node* first = o.ready_head;
      Node* last = nullptr;
      for (std::uint32_t i = 0; i < take; ++i) last = last ? last->next : first;
      if (take) {
        o.ready_head = last->next;
        o.ready_count.store(c - take, std::memory_order_relaxed);
      }
      o.ready_lock.unlock();
      if (!take) continue;
      Bump(wk.steals);
      Bump<std::uint64_t>(wk.stolen, take);
      AddReady(wk, first, last, take);
      return true;
    }
    return false;
  }

  // Under v's park_lock: removes the due prefix of v's parked list (due
  // functions form a prefix: the list is in push order on v) and returns it as
  // a chain, each node's idx moved past v.
  static std::uint32_t PopDueLocked(Var* v, Node*& first, Node*& last) {
    const std::uint64_t st = v->state.load(std::memory_order_seq_cst);
    std::uint32_t n = 0;
    first = last = nullptr;
    Node* h = v->parked_head;
    while (h && Due(st, h->stamp[h->idx], (h->readmask >> h->idx) & 1)) {
      Node* next = h->next;
      ++h->idx;
      h->next = nullptr;
      if (last)
        last->next = h;
      else
        first = h;
      last = h;
      ++n;
      h = next;
    }
    v->parked_head = h;
    if (!h) {
      v->parked_tail = nullptr;
      v->has_parked.store(false, std::memory_order_seq_cst);
    }
    return n;
  }

  // Node n is not due on its var n->idx: park it there. Under the lock it
  // then takes the due prefix back (its own node included, when a completer
  // made it due meanwhile: the Dekker race, won by the parker).
  void Park(Worker& wk, Node* n) {
    Bump(wk.parks);
    Var* v = n->var[n->idx];
    const std::uint64_t key = n->stamp[n->idx];
    for (int i = 0; i < park_delay_; ++i) PROTO_PAUSE();  // test only: widen the race
    v->park_lock.lock();
    n->next = nullptr;
    if (!v->parked_tail || v->parked_tail->stamp[v->parked_tail->idx] <= key) {  // common: append
      if (v->parked_tail)
        v->parked_tail->next = n;
      else
        v->parked_head = n;
      v->parked_tail = n;
    } else {
      Node** link = &v->parked_head;
      while ((*link)->stamp[(*link)->idx] <= key) link = &(*link)->next;
      n->next = *link;
      *link = n;
    }
    v->has_parked.store(true, std::memory_order_seq_cst);
    // Dekker with CompleteVars: it changes state, then loads has_parked.
    Node *first, *last;
    const std::uint32_t c = PopDueLocked(v, first, last);
    bool mine = false;
    for (Node* p = first; c && p; p = p->next) mine = mine || p == n;
    v->park_lock.unlock();
    if (!c) return;
    if (mine) Bump(wk.took_back);
    Resume(wk, first, last, c);
  }

  // A function has run: advance each of its vars, and move what that makes
  // due from the vars' parked lists to this worker's ready list.
  void CompleteVars(Worker& wk, Var* const* vars, const std::uint64_t* stamps, int n,
                    std::uint8_t readmask) {
    for (int i = 0; i < n; ++i) {
      Var* v = vars[i];
      if ((readmask >> i) & 1)
        v->state.fetch_add(1, std::memory_order_seq_cst);
      else
        v->state.store((stamps[i] & ~(kEpoch - 1)) + kEpoch, std::memory_order_seq_cst);
      if (!v->has_parked.load(std::memory_order_seq_cst)) continue;
      Node *first, *last;
      v->park_lock.lock();
      const std::uint32_t c = PopDueLocked(v, first, last);
      v->park_lock.unlock();
      if (c) Resume(wk, first, last, c);
    }
  }

  // A resumed node: check its remaining vars; run it, or park it again.
  // Returns the functions run (0 or 1).
  std::uint64_t RunNode(Worker& wk, Node* n) {
    for (; n->idx < n->nvars; ++n->idx) {
      const int i = n->idx;
      if (!Due(n->var[i]->state.load(std::memory_order_acquire), n->stamp[i],
               (n->readmask >> i) & 1)) {
        Park(wk, n);
        return 0;
      }
    }
    if (n->opr) {
      RunOpr(n->opr);
    } else {
      n->fn(RunCtx{1, 0, nullptr});
      n->fn = nullptr;
    }
    CompleteVars(wk, n->var, n->stamp, n->nvars, n->readmask);
    FreeNode(wk, n);
    return 1;
  }

  // A ring entry with reads or several vars. Returns the functions run.
  std::uint64_t RunGeneral(Worker& wk, Slot* s, std::uint64_t h) {
    Var* vars[kMaxVars];
    std::uint64_t stamps[kMaxVars];
    const int n = s->nvars;
    vars[0] = s->var;
    stamps[0] = s->ticket;
    if (n > 1) {
      SlotExt e;
      std::memcpy(&e, static_cast<const void*>(&wk.slots[(h + 1) & wk.mask]), sizeof(e));
      for (int i = 1; i < n; ++i) {
        vars[i] = e.var[i - 1];
        stamps[i] = e.stamp[i - 1];
      }
    }
    const std::uint8_t rm = s->readmask;
    for (int i = 0; i < n; ++i) {
      if (!Due(vars[i]->state.load(std::memory_order_acquire), stamps[i], (rm >> i) & 1)) {
        Node* node = ToNode(wk, s, vars, stamps);
        node->idx = static_cast<std::uint8_t>(i);
        Park(wk, node);
        return 0;
      }
    }
    RunSlot(s);
    CompleteVars(wk, vars, stamps, n, rm);
    return 1;
  }

  bool PeersHaveReady(const Worker& wk) const {
    for (auto& p : workers_) {
      if (p.get() != &wk && p->ready_count.load(std::memory_order_seq_cst) != 0) return true;
    }
    return false;
  }

  void WorkerLoop(Worker& wk) {
    std::uint64_t h = 0, tail = 0, completed = 0;
    int idle = 0;
    Clock::time_point idle_t0{};
    bool idling = false;  // statistics: idle_t0 is when this worker last ran dry
    for (;;) {
      if (Node* n = PopReady(wk)) {  // resumed functions first: they are older
        EndIdle(wk, idling, idle_t0);
        idle = 0;
        Bump(wk.ran_ready);
        if (RunNode(wk, n)) wk.completed.store(++completed, std::memory_order_release);
        continue;
      }
      if (h >= tail) {
        tail =
            opt_.flag_publish ? h + SlotPublished(wk, h) : wk.tail.load(std::memory_order_acquire);
        if (h >= tail) {
          if (opt_.steal && Steal(wk)) {
            EndIdle(wk, idling, idle_t0);
            idle = 0;
            continue;
          }
          if (!idling) {
            idling = true;
            idle_t0 = Clock::now();
          }
          if (idle++ == 0) {
            // Ran dry: a full barrier, then wake a pusher waiting for this.
            wk.idle_barrier.fetch_add(1, std::memory_order_seq_cst);
            const std::uint64_t rw = wk.room_wanted.load(std::memory_order_seq_cst);
            if ((rw != 0 && h >= rw) ||
                (all_waiter_.load(std::memory_order_seq_cst) &&
                 CompletedSum() == all_target_.load(std::memory_order_relaxed))) {
              WakePusher();
            }
          }
          if (idle < opt_.spin) {
            PROTO_PAUSE();
            if ((idle & 63) == 0) sched_yield();
            continue;
          }
          wk.sleeping.store(true, std::memory_order_seq_cst);
          if (opt_.flag_publish) {
            if (!opt_.flag_fence) HeavyBarrier();
            tail = h + SlotPublished(wk, h);
          } else {
            tail = wk.tail.load(std::memory_order_seq_cst);
          }
          if (h >= tail && !(opt_.steal && PeersHaveReady(wk)) &&
              !(locked_ready_ && wk.ready_count.load(std::memory_order_seq_cst) != 0)) {
            if (stop_.load(std::memory_order_seq_cst)) return;
            Bump(wk.sleeps);
            wk.sleeping.wait(true, std::memory_order_seq_cst);
          }
          wk.sleeping.store(false, std::memory_order_relaxed);
          idle = 0;
          continue;
        }
      }
      EndIdle(wk, idling, idle_t0);
      idle = 0;
      Slot* s = &wk.slots[h & wk.mask];
      __builtin_prefetch(&wk.slots[(h + opt_.wprefetch) & wk.mask], 0, 3);
      Var* v = s->var;
      std::uint64_t adv = 1;
      if (!v) {
        RunSlot(s);
        ++completed;
      } else if (s->nvars == 1 && s->readmask == 0) {  // W1 / W2 / W5: one written var
        const std::uint64_t t = s->ticket;
        if (v->state.load(std::memory_order_acquire) == t) {
          RunSlot(s);
          ++completed;
          CompleteVars(wk, &v, &t, 1, 0);
        } else {
          Node* node = ToNode(wk, s, &v, &t);
          node->idx = 0;
          Park(wk, node);
        }
      } else {
        if (s->nvars > 1) adv = 2;
        completed += RunGeneral(wk, s, h);
      }
      h += adv;
      wk.head.store(h, std::memory_order_release);
      wk.completed.store(completed, std::memory_order_release);
      std::uint64_t rw = wk.room_wanted.load(std::memory_order_relaxed);
      if (rw != 0 && h >= rw && wk.room_wanted.compare_exchange_strong(rw, 0)) WakePusher();
    }
  }

  // --publish=flag: 1 when the slot at h is published (its flag says h + 1).
  static std::uint64_t SlotPublished(Worker& wk, std::uint64_t h) {
    return wk.slots[h & wk.mask].seq.load(std::memory_order_acquire) ==
           static_cast<std::uint32_t>(h + 1);
  }
  // The heavy side of the asymmetric barrier: every running thread of the
  // process passes a full barrier before this returns.
  static void HeavyBarrier() {
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) std::abort();
  }

  static void EndIdle(Worker& wk, bool& idling, std::chrono::steady_clock::time_point t0) {
    if (!idling) return;
    idling = false;
    Bump<std::uint64_t>(
        wk.idle_ns, static_cast<std::uint64_t>((std::chrono::steady_clock::now() - t0).count()));
  }
  void WakePusher() {
    pusher_wake_.fetch_add(1, std::memory_order_seq_cst);
    pusher_wake_.notify_one();
  }

  using Clock = std::chrono::steady_clock;
  Options opt_;
  const int park_delay_ = opt_.park_delay;
  const bool locked_ready_ = opt_.steal || opt_.resume_home;
  // The pusher's sleep (WaitForAll, WaitForRoom): a futex word bumped by a
  // worker that wakes it; all_waiter_ is set (seq_cst) by a WaitForAll about
  // to sleep and read by a worker whose ring has run dry, after a seq_cst
  // read-modify-write (Dekker with the pusher's flag store and sum of the
  // completed counters).
  alignas(128) std::atomic<std::uint32_t> pusher_wake_{0};
  std::atomic<bool> all_waiter_{false};
  // The count a sleeping WaitForAll waits for: stored (relaxed) before
  // all_waiter_ (seq_cst), read after it; a worker running dry wakes the
  // pusher only when the completed counters add up to it (one wake per
  // WaitForAll rather than one per idle period: a wake costs the pusher some
  // microseconds of CPU that the workers need).
  std::atomic<std::uint64_t> all_target_{0};
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<bool> stop_{false};
  std::uint32_t next_home_ = 0;                     // NewVar; main thread only
  std::uint32_t rr_ = 0, cur_ = 0;                  // pusher only
  std::uint64_t room_waits_ = 0, room_sleeps_ = 0;  // pusher only (statistics)
};

// --- workloads ---------------------------------------------------------------

struct Result {
  bool ok = true;
  std::string error;
  double seconds = 0;
  double pusher_cpu = 0;  // W4: CPU seconds of the pushing thread in the timed region
};

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Result FloorW2(Engine& e, const Options& o) {
  std::vector<std::uint64_t> counts(o.k, 0);
  Result r;
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < o.n2; ++i) {
    std::uint64_t* c = &counts[i % o.k];
    e.PushUntracked([c](RunCtx) { ++*c; });
  }
  e.WaitForAll();
  r.seconds = Since(t0);
  for (std::size_t k = 0; k < o.k; ++k) {
    if (counts[k] != o.n2 / o.k) {
      r.ok = false;
      r.error = "floor-W2: count[" + std::to_string(k) + "] = " + std::to_string(counts[k]);
      break;
    }
  }
  return r;
}

Result W1(Engine& e, const Options& o) {
  std::uint64_t counter = 0;
  Var* v = e.NewVar();
  const std::vector<Var*> vars = {v};
  Result r;
  const auto t0 = Clock::now();
  std::uint64_t* c = &counter;
  for (std::size_t i = 0; i < o.n; ++i) e.PushSync([c](RunCtx) { ++*c; }, {}, vars);
  e.WaitForAll();
  r.seconds = Since(t0);
  if (counter != o.n) {
    r.ok = false;
    r.error = "W1: counter = " + std::to_string(counter);
  }
  e.DeleteVar(v);
  return r;
}

Result W2(Engine& e, const Options& o) {
  std::vector<std::uint64_t> counts(o.k, 0);
  std::vector<Var*> vars(o.k);
  for (Var*& v : vars) v = e.NewVar();
  Result r;
  const auto t0 = Clock::now();
  std::vector<Var*> writes(1);
  for (std::size_t i = 0; i < o.n2; ++i) {
    const std::size_t k = i % o.k;
    writes[0] = vars[k];
    std::uint64_t* c = &counts[k];
    e.PushSync([c](RunCtx) { ++*c; }, {}, writes);
  }
  e.WaitForAll();
  r.seconds = Since(t0);
  for (std::size_t k = 0; k < o.k; ++k) {
    if (counts[k] != o.n2 / o.k) {
      r.ok = false;
      r.error = "W2: count[" + std::to_string(k) + "] = " + std::to_string(counts[k]);
      break;
    }
  }
  for (Var* v : vars) e.DeleteVar(v);
  return r;
}

Result W5(Engine& e, const Options& o) {
  std::uint64_t counter = 0;
  Var* v = e.NewVar();
  std::uint64_t* c = &counter;
  Opr op{[c](RunCtx, Callback done) {
           ++*c;
           done();
         },
         v};
  Result r;
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < o.n; ++i) e.Push(&op);
  e.WaitForAll();
  r.seconds = Since(t0);
  if (counter != o.n) {
    r.ok = false;
    r.error = "W5: counter = " + std::to_string(counter);
  }
  e.DeleteVar(v);
  return r;
}

// W5 with K operators, one per var, pushed round robin.
Result W5Many(Engine& e, const Options& o) {
  std::vector<std::uint64_t> counts(o.k, 0);
  std::vector<Var*> vars(o.k);
  std::vector<std::unique_ptr<Opr>> oprs(o.k);
  for (std::size_t k = 0; k < o.k; ++k) {
    vars[k] = e.NewVar();
    std::uint64_t* c = &counts[k];
    oprs[k] = std::make_unique<Opr>(Opr{[c](RunCtx, Callback done) {
                                          ++*c;
                                          done();
                                        },
                                        vars[k]});
  }
  Result r;
  const auto t0 = Clock::now();
  for (std::size_t i = 0, k = 0; i < o.n; ++i) {
    e.Push(oprs[k].get());
    if (++k == o.k) k = 0;
  }
  e.WaitForAll();
  r.seconds = Since(t0);
  for (std::size_t k = 0; k < o.k; ++k) {
    if (counts[k] != o.n / o.k + (k < o.n % o.k ? 1 : 0)) {
      r.ok = false;
      r.error = "W5x4096: count[" + std::to_string(k) + "] = " + std::to_string(counts[k]);
      break;
    }
  }
  for (Var* v : vars) e.DeleteVar(v);
  return r;
}

// W4 of WORKLOADS.md. Its program, initial values, mix and spin are the workload runner's
// (bench/workloads/workload_spec.h), so both run the same W4 by construction.
using depengine::bench::DagInitialValue;
using depengine::bench::DagMix;
using depengine::bench::DagOp;
using depengine::bench::SpinFor;
struct Dag {
  std::vector<DagOp> ops;
  std::vector<std::uint64_t> expected;  // the serial run's final values
  std::size_t critical_path = 0;
};
const Dag& GetDag(const Options& o) {
  static const Dag dag = [&] {
    Dag d;
    depengine::bench::RandomDagParams params;
    params.vars = o.v4;
    params.ops = o.n4;
    d.ops = depengine::bench::MakeRandomDag(params).ops;
    d.expected.resize(o.v4);
    for (std::size_t v = 0; v < o.v4; ++v) d.expected[v] = DagInitialValue(v);
    std::vector<std::size_t> last_write(o.v4, 0), deepest_read(o.v4, 0);
    for (const DagOp& op : d.ops) {
      d.expected[op.write] =
          DagMix(d.expected[op.write], d.expected[op.read1], d.expected[op.read2]);
      const std::size_t depth = 1 + std::max({last_write[op.read1], last_write[op.read2],
                                              last_write[op.write], deepest_read[op.write]});
      deepest_read[op.read1] = std::max(deepest_read[op.read1], depth);
      deepest_read[op.read2] = std::max(deepest_read[op.read2], depth);
      last_write[op.write] = depth;
      deepest_read[op.write] = 0;
      d.critical_path = std::max(d.critical_path, depth);
    }
    return d;
  }();
  return dag;
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// W4: random DAG, each function reads 2 vars and writes 1, body spins T us.
Result W4(Engine& e, const Options& o) {
  const Dag& dag = GetDag(o);
  std::vector<std::uint64_t> values(o.v4);
  for (std::size_t v = 0; v < o.v4; ++v) values[v] = DagInitialValue(v);
  std::vector<Var*> vars(o.v4);
  for (Var*& v : vars) v = e.NewVar();
  struct State {
    const DagOp* ops;
    std::uint64_t* values;
    int spin_us;
  } state{dag.ops.data(), values.data(), o.t_us};
  const State* s = &state;
  Result r;
  std::vector<Var*> reads(2), writes(1);
  const double c0 = ThreadCpuSeconds();
  const auto t0 = Clock::now();
  for (std::size_t i = 0; i < dag.ops.size(); ++i) {
    const DagOp& op = dag.ops[i];
    reads[0] = vars[op.read1];
    reads[1] = vars[op.read2];
    writes[0] = vars[op.write];
    e.PushSync(
        [s, i](RunCtx) {
          const DagOp& d = s->ops[i];
          SpinFor(s->spin_us);
          s->values[d.write] = DagMix(s->values[d.write], s->values[d.read1], s->values[d.read2]);
        },
        reads, writes);
  }
  e.WaitForAll();
  r.seconds = Since(t0);
  r.pusher_cpu = ThreadCpuSeconds() - c0;
  for (std::size_t v = 0; v < o.v4; ++v) {
    if (values[v] != dag.expected[v]) {
      r.ok = false;
      r.error = "W4: var " + std::to_string(v) + " = " + std::to_string(values[v]) + ", expected " +
                std::to_string(dag.expected[v]);
      break;
    }
  }
  for (Var* v : vars) e.DeleteVar(v);
  return r;
}

bool RunCase(const std::string& id, const Options& o) {
  Result (*fn)(Engine&, const Options&) = nullptr;
  std::size_t ops = o.n;
  if (id == "floor-W2")
    fn = FloorW2, ops = o.n2;
  else if (id == "W1")
    fn = W1;
  else if (id == "W2")
    fn = W2, ops = o.n2;
  else if (id == "W5")
    fn = W5;
  else if (id == "W5x4096")
    fn = W5Many;
  else if (id == "W4")
    fn = W4, ops = o.n4;
  if (!fn) {
    std::fprintf(stderr, "unknown case %s\n", id.c_str());
    return false;
  }
  if (id == "floor-W2" && o.k % o.workers != 0) {
    std::fprintf(stderr, "floor-W2 needs K a multiple of the workers (the body is not atomic)\n");
    return false;
  }
  Engine e(o);
  std::vector<double> ns, cpu_ns, pusher_ns;
  bool ok = true;
  for (int rep = 0; rep <= o.reps; ++rep) {  // rep 0: warm-up
    const double cpu0 = ProcessCpuSeconds();
    const Result r = fn(e, o);
    if (rep > 0) cpu_ns.push_back((ProcessCpuSeconds() - cpu0) * 1e9 / static_cast<double>(ops));
    if (!r.ok) {
      std::fprintf(stderr, "%s rep %d: CHECK FAILED: %s\n", id.c_str(), rep, r.error.c_str());
      ok = false;
      continue;
    }
    if (rep > 0) ns.push_back(r.seconds * 1e9 / static_cast<double>(ops));
    if (rep > 0) pusher_ns.push_back(r.pusher_cpu * 1e9 / static_cast<double>(ops));
  }
  if (!ok || ns.empty()) {
    std::printf("| %-9s | %-8s | FAILED |\n", id.c_str(), o.policy.c_str());
    return false;
  }
  std::vector<double> sorted = ns;
  std::sort(sorted.begin(), sorted.end());
  std::sort(cpu_ns.begin(), cpu_ns.end());
  std::string all;
  for (double x : ns) {
    if (!all.empty()) all += ' ';
    all += std::to_string(static_cast<int>(x + 0.5));
  }
  std::string label = id;
  std::string policy = id == "floor-W2" ? "rr" : o.policy;
  if (o.short_limit)
    policy += "+short:" + std::to_string(o.short_limit);
  else if (o.resume_home)
    policy += o.resume_mixed ? "+mixed" : "+home";
  if (o.steal) policy += "+steal";
  std::string extra;
  if (id == "W4") {
    label += "/T" + std::to_string(o.t_us);
    if (o.short_limit)
      extra = "short: " + std::to_string(e.Handed()) + " handed home, " + std::to_string(e.Kept()) +
              " kept; ";
    std::sort(pusher_ns.begin(), pusher_ns.end());
    char buf[200];
    const double med = sorted[sorted.size() / 2];
    std::snprintf(buf, sizeof buf,
                  "efficiency %.3f, pusher CPU %.1f ns/op, critical path %zu, %llu steals (%llu "
                  "functions); ",
                  o.t_us > 0 ? 1e3 * o.t_us / o.workers / med : 0.0,
                  pusher_ns[pusher_ns.size() / 2], GetDag(o).critical_path,
                  static_cast<unsigned long long>(e.Steals()),
                  static_cast<unsigned long long>(e.Stolen()));
    extra += buf;
  }
  if ((id == "W2" || id == "floor-W2") && o.k != 4096) label += "/K" + std::to_string(o.k);
  std::printf(
      "| %-9s | %-8s | %7.1f | %s | %5.0f | checks passed | %s%llu parked, %llu taken back; %s |\n",
      label.c_str(), policy.c_str(), sorted[sorted.size() / 2], all.c_str(),
      cpu_ns[cpu_ns.size() / 2], extra.c_str(), static_cast<unsigned long long>(e.Parks()),
      static_cast<unsigned long long>(e.TookBack()),
      (e.WaitStats() + (id == "W4" ? "; " + e.WorkerStats() : "")).c_str());
  std::fflush(stdout);
  return true;
}

std::uint64_t ParseU(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0') {
    std::fprintf(stderr, "%s: not a number: %s\n", flag.c_str(), v.c_str());
    std::exit(2);
  }
  return x;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto eq = a.find('=');
    const std::string flag = a.substr(0, eq);
    const std::string val = eq == std::string::npos ? "" : a.substr(eq + 1);
    if (flag == "--only")
      o.only = val;
    else if (flag == "--policy")
      o.policy = val;
    else if (flag == "--n")
      o.n = ParseU(flag, val);
    else if (flag == "--n2")
      o.n2 = ParseU(flag, val);
    else if (flag == "--k")
      o.k = ParseU(flag, val);
    else if (flag == "--reps")
      o.reps = static_cast<int>(ParseU(flag, val));
    else if (flag == "--workers")
      o.workers = static_cast<int>(ParseU(flag, val));
    else if (flag == "--ring")
      o.ring = ParseU(flag, val);
    else if (flag == "--batch")
      o.batch = ParseU(flag, val);
    else if (flag == "--biased")
      o.biased = true;
    else if (flag == "--publish" && (val == "flag" || val == "flag-fence" || val == "batch")) {
      o.flag_publish = val != "batch";
      o.flag_fence = val == "flag-fence";
    } else if (flag == "--prefetch")
      o.prefetch = ParseU(flag, val);
    else if (flag == "--spin")
      o.spin = static_cast<int>(ParseU(flag, val));
    else if (flag == "--park-delay")
      o.park_delay = static_cast<int>(ParseU(flag, val));
    else if (flag == "--resume" && (val == "home" || val == "here" || val == "mixed"))
      o.resume_home = val != "here", o.resume_mixed = val == "mixed", o.short_limit = 0;
    else if (flag == "--resume" && (val == "short" || val.rfind("short:", 0) == 0) &&
             (val == "short" || ParseU(flag, val.substr(6)) >= 1))
      o.resume_home = true, o.resume_mixed = false,
      o.short_limit = val == "short" ? 4 : static_cast<std::uint32_t>(ParseU(flag, val.substr(6)));
    else if (flag == "--steal")
      o.steal = true;
    else if (flag == "--t")
      o.t_us = static_cast<int>(ParseU(flag, val));
    else if (flag == "--n4")
      o.n4 = ParseU(flag, val);
    else if (flag == "--v4")
      o.v4 = ParseU(flag, val);
    else if (flag == "--locked")
      o.locked = true;
    else if (flag == "--wprefetch")
      o.wprefetch = ParseU(flag, val);
    else if (flag == "--pin" && (val.empty() || val == "mixed" || val == "split"))
      o.pin = val == "split" ? 2 : 1;
    else if (flag == "--wait" && (val == "sleep" || val == "spin"))
      o.wait_sleeps = val == "sleep";
    else {
      std::fprintf(
          stderr,
          "usage: %s [--only=floor-W2,W1,W2,W5,W5x4096,W4] [--policy=affinity|rr] [--steal]\n"
          "  [--resume=here|home|mixed|short[:N]] [--t=0 (W4 spin, us)] [--n4=200000] [--v4=1000] "
          "[--n=1000000]\n"
          "  [--n2=1048576] [--k=4096] [--reps=5] [--workers=2] [--ring=4096]\n"
          "  [--batch=32] [--prefetch=0] [--wprefetch=4] [--spin=4000] [--park-delay=0 (test "
          "only)]\n"
          "  [--wait=sleep|spin] [--locked] [--biased] [--publish=batch|flag|flag-fence]\n"
          "  [--pin[=mixed|split]]\n",
          argv[0]);
      return 2;
    }
  }
  if (o.ring == 0 || (o.ring & (o.ring - 1)) != 0 || o.batch == 0 || o.workers < 1 || o.k == 0 ||
      o.n2 % o.k != 0 || o.reps < 1 || o.v4 < 3 || o.workers > kMaxWorkers ||
      (o.policy != "rr" && o.policy != "affinity")) {
    std::fprintf(stderr,
                 "bad flags: ring a power of two, batch >= 1, n2 a multiple of k, "
                 "policy affinity or rr\n");
    return 2;
  }
  std::printf(
      "ticket prototype: %d workers + main pushing, ring %llu, batch %llu, prefetch %llu, "
      "spin %d, pusher waits %s%s; median of %d after 1 warm-up, ns per function\n",
      o.workers, static_cast<unsigned long long>(o.ring), static_cast<unsigned long long>(o.batch),
      static_cast<unsigned long long>(o.prefetch), o.spin, o.wait_sleeps ? "sleep" : "spin",
      o.locked ? ", locked ticket + slot claim" : "", o.reps);
  std::printf(
      "| case      | policy   | median  | reps (ns/op) | CPU ns/op | check | park path, waits (all "
      "reps) "
      "|\n");
  if (o.pin) PinTo(0);
  bool ok = true;
  std::size_t pos = 0;
  while (pos <= o.only.size()) {
    const std::size_t comma = o.only.find(',', pos);
    const std::string id =
        o.only.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!id.empty()) ok = RunCase(id, o) && ok;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return ok ? 0 : 1;
}
