// depengine-ticket-proto: a self-contained prototype of a "ticket" dependency
// tracker, measured on W1, W2 and W5 of WORKLOADS.md against a no-tracking
// handoff floor. It does not use the library; see the last section of
// docs/design.md ("A ticket tracker: measured prototype") for the design and
// the figures.
//
// Scope: one pushing thread (the main thread), functions that write one var
// (no reads, no multi-var functions, no priorities, no failures). Every
// shared field says what protects it.
//
// The idea: the pusher never loads from, and never does a locked
// read-modify-write on, a cache line that a worker writes, in the common
// case.
//  - A var has a pusher side (`next_ticket`, the ticket the next push gets;
//    only the pusher touches it) and a worker side (`done`, the number of
//    the var's functions completed; only workers touch it), 128 bytes apart.
//  - A push stamps the function with its var's next ticket and writes it,
//    closure included, into a slot of one worker's single-producer /
//    single-consumer ring: no block pool, no free list, no links. The pusher
//    publishes its tail every `--batch` pushes and reloads the worker's head
//    only when its cached copy says the ring is full, so freed slots come
//    back in batches.
//  - A worker that takes a slot runs it if `done == ticket`, then stores
//    done = ticket + 1. Otherwise it parks the function on the var (a list
//    under a spin lock only workers take), and whoever completes the
//    previous ticket runs it. The park / complete race is a Dekker handshake
//    on (done, has_parked), both seq_cst: worker side only.
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
// Correctness: every repetition checks its counters (WORKLOADS.md), and the
// program runs clean under -fsanitize=thread, with `--park-delay` widening
// the park / complete race so that the parker's take-back path runs.
#include <sched.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PROTO_PAUSE() _mm_pause()
#else
#define PROTO_PAUSE() ((void)0)
#endif

namespace {

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
  std::uint64_t prefetch = 0;   // pusher's prefetchw distance in slots (0: off)
  std::uint64_t wprefetch = 4;  // worker's prefetch distance in slots
  int spin = 4000;              // idle polls before a worker sleeps
  int park_delay = 0;           // test only: pauses in Park before publishing
  // --locked: model what pushes from several threads would cost: the
  // ticket is taken by a locked fetch_add and the ring slot claimed by one
  // (both on lines only pushers write). Still one pusher here.
  bool locked = false;
  // --pin (=mixed): the pusher on CPU 0, worker 0 on CPU 1, worker 1 on
  // CPU 0; --pin=split: the pusher on CPU 0, both workers on CPU 1. An
  // experiment: every slot then crosses cores (W1's chain, half of W2 with
  // mixed, all of it with split).
  int pin = 0;
  bool wait_sleeps = true;  // --wait=sleep: the pusher's waits sleep on a futex; spin: spin + yield
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

// A function parked on its var until the var's previous ticket completes.
struct Parked {
  Fn fn;  // empty when `opr` is set
  Opr* opr;
  std::uint64_t ticket;
  Parked* next;  // guarded by the var's park_lock
};

struct Var {
  // Pusher side: the pushing thread only.
  alignas(128) std::uint64_t next_ticket = 0;
  std::uint64_t magic = kVarMagic;  // a handle check, as the engine's
  std::uint32_t home = 0;
  // Worker side: workers only. `done` is stored only by the thread that ran
  // ticket done - 1 (single writer); loaded by any worker (acquire pairs
  // with that store, so a function sees its predecessor's effects).
  alignas(128) std::atomic<std::uint64_t> done{0};
  std::atomic<bool> has_parked{false};  // written under park_lock; seq_cst (Dekker with done)
  SpinLock park_lock;
  Parked* parked_head = nullptr;  // sorted by ticket; park_lock
  Parked* parked_tail = nullptr;  // park_lock
};
static_assert(sizeof(Var) == 256);

// A prebuilt operator (W5): its closure is built once and reused.
struct Opr {
  AsyncFn fn;
  Var* var;
};

// One pushed function, in place in a worker's ring. The worker reads it and
// never writes it, so the pusher's next write of the slot finds the line
// shared, not modified on the other core.
struct alignas(64) Slot {
  alignas(Fn) unsigned char fn[sizeof(Fn)];  // a live Fn unless opr is set
  Opr* opr;
  Var* var;  // null: untracked (the floor)
  std::uint64_t ticket;
};
static_assert(sizeof(Slot) == 64);

struct alignas(128) Worker {
  // Pusher-private (never touched by the worker).
  std::uint64_t p_tail = 0;               // next slot the pusher writes
  std::uint64_t p_published = 0;          // last tail stored to `tail`
  std::uint64_t p_head_cache = 0;         // last head the pusher loaded
  std::atomic<std::uint64_t> p_claim{0};  // --locked only: a model of an MPSC slot claim
  // Read-only after construction.
  alignas(128) Slot* slots = nullptr;
  std::uint64_t mask = 0;
  // Written by the pusher (release / seq_cst), read by the worker.
  alignas(128) std::atomic<std::uint64_t> tail{0};
  // Written by the worker (release), read by the pusher when the ring looks
  // full, or in WaitForAll.
  alignas(128) std::atomic<std::uint64_t> head{0};
  std::atomic<std::uint64_t> completed{0};
  // The sleep handshake: worker stores true then loads tail; pusher stores
  // tail then loads it; all seq_cst.
  alignas(128) std::atomic<bool> sleeping{false};
  // Written by the pusher (seq_cst) when it sleeps for room in this ring: the
  // head it waits for (0: none). The worker loads it after each head store
  // (relaxed: a stale 0 is caught at a later store or at the seq_cst barrier
  // the worker passes when its ring runs dry, before which its ring has
  // emptied past any target) and clears it by CAS, which it follows with a
  // wake-up, so a clear never strands a sleeping pusher.
  alignas(128) std::atomic<std::uint64_t> room_wanted{0};
  // Statistics, written by this worker only, off the per-function path
  // (relaxed; read after WaitForAll): functions parked, parked functions the
  // parker itself found due after publishing them (the Dekker race, won by
  // it), and sleeps.
  std::atomic<std::uint64_t> parks{0};
  std::atomic<std::uint64_t> idle_barrier{0};  // a seq_cst RMW target (its value is unused)
  std::atomic<std::uint64_t> took_back{0};
  std::atomic<std::uint64_t> sleeps{0};  // times the worker slept (its own counter)
  std::thread thread;
};

class Engine {
 public:
  Engine(const Options& o) : opt_(o) {
    for (int w = 0; w < o.workers; ++w) {
      auto wk = std::make_unique<Worker>();
      wk->slots = static_cast<Slot*>(::operator new(sizeof(Slot) * o.ring, std::align_val_t(128)));
      std::memset(static_cast<void*>(wk->slots), 0, sizeof(Slot) * o.ring);
      wk->mask = o.ring - 1;
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
    for (auto& wk : workers_) ::operator delete(wk->slots, std::align_val_t(128));
  }

  Var* NewVar() {
    Var* v = new Var;
    v->home = next_home_++ % static_cast<std::uint32_t>(workers_.size());
    return v;
  }
  void DeleteVar(Var* v) { delete v; }  // after WaitForAll only (prototype)

  // Untracked handoff (the floor): round robin over the workers.
  void PushUntracked(Fn&& fn) {
    Emit(NextRr(), [&](Slot* s) {
      new (s->fn) Fn(std::move(fn));
      s->opr = nullptr;
      s->var = nullptr;
    });
  }
  // The engine's PushSync shape. The prototype supports one mutable var and
  // no const vars; it checks what the engine checks for that case.
  void PushSync(Fn fn, const std::vector<Var*>& const_vars, const std::vector<Var*>& mutable_vars,
                int priority = 0, const char* name = nullptr) {
    (void)name;
    if (!fn) throw std::invalid_argument("PushSync: null function");
    if (!const_vars.empty() || mutable_vars.size() != 1 || priority != 0) {
      throw std::invalid_argument("prototype: one mutable var, no const vars, priority 0 only");
    }
    Var* v = mutable_vars[0];
    if (v == nullptr || v->magic != kVarMagic) throw std::invalid_argument("PushSync: bad var");
    Push(std::move(fn), v);
  }
  // A function writing `v`.
  void Push(Fn&& fn, Var* v) {
    const std::uint64_t t = TakeTicket(v);
    Emit(Route(v), [&](Slot* s) {
      new (s->fn) Fn(std::move(fn));
      s->opr = nullptr;
      s->var = v;
      s->ticket = t;
    });
  }
  // A prebuilt operator: no closure is built or copied.
  void Push(Opr* op, int priority = 0) {
    if (op == nullptr || priority != 0) throw std::invalid_argument("Push: bad operator");
    Var* v = op->var;
    const std::uint64_t t = TakeTicket(v);
    Emit(Route(v), [&](Slot* s) {
      s->opr = op;
      s->var = v;
      s->ticket = t;
    });
  }

  std::uint64_t Parks() const {
    std::uint64_t n = 0;
    for (auto& wk : workers_) n += wk->parks.load(std::memory_order_relaxed);
    return n;
  }
  std::string WaitStats() const {
    std::uint64_t sleeps = 0;
    for (auto& wk : workers_) sleeps += wk->sleeps.load(std::memory_order_relaxed);
    return std::to_string(room_waits_) + " full-ring waits (" + std::to_string(room_sleeps_) +
           " slept), " + std::to_string(sleeps) + " worker sleeps";
  }
  std::uint64_t TookBack() const {
    std::uint64_t n = 0;
    for (auto& wk : workers_) n += wk->took_back.load(std::memory_order_relaxed);
    return n;
  }

  void WaitForAll() {
    std::uint64_t pushed = 0;
    for (auto& wk : workers_) {
      Publish(*wk);
      pushed += wk->p_tail;
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
      all_waiter_.store(true, std::memory_order_seq_cst);
      const std::uint32_t seq = pusher_wake_.load(std::memory_order_seq_cst);
      if (CompletedSum() != pushed) pusher_wake_.wait(seq, std::memory_order_seq_cst);
      all_waiter_.store(false, std::memory_order_relaxed);
    }
  }

 private:
  std::uint32_t NextRr() {
    const std::uint32_t w = rr_;
    rr_ = (w + 1 == workers_.size()) ? 0 : w + 1;
    return w;
  }
  std::uint64_t TakeTicket(Var* v) {
    if (!opt_.locked) return v->next_ticket++;
    return std::atomic_ref<std::uint64_t>(v->next_ticket).fetch_add(1, std::memory_order_acq_rel);
  }
  std::uint32_t Route(Var* v) { return opt_.policy == "rr" ? NextRr() : v->home; }

  template <class Fill>
  void Emit(std::uint32_t w, Fill&& fill) {
    Worker& wk = *workers_[w];
    const std::uint64_t t = wk.p_tail;
    if (opt_.locked) wk.p_claim.fetch_add(1, std::memory_order_acq_rel);
    if (t - wk.p_head_cache > wk.mask) WaitForRoom(wk, t);
    Slot* s = &wk.slots[t & wk.mask];
    if (opt_.prefetch) __builtin_prefetch(&wk.slots[(t + opt_.prefetch) & wk.mask], 1, 3);
    fill(s);
    wk.p_tail = t + 1;
    if (t + 1 - wk.p_published >= opt_.batch) Publish(wk);
  }

  void Publish(Worker& wk) {
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
  void WaitForRoom(Worker& wk, std::uint64_t t) {
    ++room_waits_;
    Publish(wk);
    const std::uint64_t target = t + 1 - (wk.mask + 1) / 2;  // head that frees half the ring
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
  static void RunParked(Parked* p) {
    if (p->opr)
      RunOpr(p->opr);
    else
      p->fn(RunCtx{1, 0, nullptr});
  }

  // Ticket t of v has run: let ticket t + 1 go, and run it here if it is
  // parked. Returns how many parked functions it ran.
  static std::uint64_t Complete(Var* v, std::uint64_t t) {
    std::uint64_t ran = 0;
    for (;;) {
      v->done.store(t + 1, std::memory_order_seq_cst);
      if (!v->has_parked.load(std::memory_order_seq_cst)) return ran;
      Parked* p = nullptr;
      v->park_lock.lock();
      if (v->parked_head && v->parked_head->ticket == t + 1) {
        p = v->parked_head;
        v->parked_head = p->next;
        if (!v->parked_head) {
          v->parked_tail = nullptr;
          v->has_parked.store(false, std::memory_order_seq_cst);
        }
      }
      v->park_lock.unlock();
      if (!p) return ran;
      RunParked(p);
      delete p;
      ++ran;
      ++t;
    }
  }

  // Slot s's ticket is not yet due: move it to the var. Returns how many
  // functions this ran (it may find the ticket due after all).
  std::uint64_t Park(Worker& wk, Slot* s) {
    wk.parks.store(wk.parks.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    Var* v = s->var;
    Parked* p = new Parked{Fn(), s->opr, s->ticket, nullptr};
    if (!s->opr) {
      Fn* f = std::launder(reinterpret_cast<Fn*>(s->fn));
      p->fn = std::move(*f);
      f->~Fn();
    }
    for (int i = 0; i < park_delay_; ++i) PROTO_PAUSE();  // test only: widen the race
    bool mine = false;
    v->park_lock.lock();
    if (!v->parked_tail || v->parked_tail->ticket < p->ticket) {  // common: append
      if (v->parked_tail)
        v->parked_tail->next = p;
      else
        v->parked_head = p;
      v->parked_tail = p;
    } else {
      Parked** link = &v->parked_head;
      while ((*link)->ticket < p->ticket) link = &(*link)->next;
      p->next = *link;
      *link = p;
    }
    v->has_parked.store(true, std::memory_order_seq_cst);
    // Dekker with Complete: it stores done, then loads has_parked.
    if (v->done.load(std::memory_order_seq_cst) == p->ticket) {
      // Due after all, and the completer that made it due saw no flag or
      // will find the list without it: take it back (it is the head).
      mine = true;
      v->parked_head = p->next;
      if (!v->parked_head) {
        v->parked_tail = nullptr;
        v->has_parked.store(false, std::memory_order_seq_cst);
      }
    }
    v->park_lock.unlock();
    if (!mine) return 0;
    wk.took_back.store(wk.took_back.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    const std::uint64_t t = p->ticket;
    RunParked(p);
    delete p;
    return 1 + Complete(v, t);
  }

  void WorkerLoop(Worker& wk) {
    std::uint64_t h = 0, tail = 0, completed = 0;
    int idle = 0;
    for (;;) {
      if (h == tail) {
        tail = wk.tail.load(std::memory_order_acquire);
        if (h == tail) {
          if (idle++ == 0) {
            // Ran dry: a full barrier, then wake a pusher waiting for this.
            wk.idle_barrier.fetch_add(1, std::memory_order_seq_cst);
            const std::uint64_t rw = wk.room_wanted.load(std::memory_order_seq_cst);
            if ((rw != 0 && h >= rw) || all_waiter_.load(std::memory_order_seq_cst)) WakePusher();
          }
          if (idle < opt_.spin) {
            PROTO_PAUSE();
            if ((idle & 63) == 0) sched_yield();
            continue;
          }
          wk.sleeping.store(true, std::memory_order_seq_cst);
          tail = wk.tail.load(std::memory_order_seq_cst);
          if (h == tail) {
            if (stop_.load(std::memory_order_seq_cst)) return;
            wk.sleeps.store(wk.sleeps.load(std::memory_order_relaxed) + 1,
                            std::memory_order_relaxed);
            wk.sleeping.wait(true, std::memory_order_seq_cst);
          }
          wk.sleeping.store(false, std::memory_order_relaxed);
          idle = 0;
          continue;
        }
      }
      idle = 0;
      Slot* s = &wk.slots[h & wk.mask];
      __builtin_prefetch(&wk.slots[(h + opt_.wprefetch) & wk.mask], 0, 3);
      Var* v = s->var;
      if (!v) {
        RunSlot(s);
        ++completed;
      } else {
        const std::uint64_t t = s->ticket;
        if (v->done.load(std::memory_order_acquire) == t) {
          RunSlot(s);
          completed += 1 + Complete(v, t);
        } else {
          completed += Park(wk, s);
        }
      }
      ++h;
      wk.head.store(h, std::memory_order_release);
      wk.completed.store(completed, std::memory_order_release);
      std::uint64_t rw = wk.room_wanted.load(std::memory_order_relaxed);
      if (rw != 0 && h >= rw && wk.room_wanted.compare_exchange_strong(rw, 0)) WakePusher();
    }
  }

  void WakePusher() {
    pusher_wake_.fetch_add(1, std::memory_order_seq_cst);
    pusher_wake_.notify_one();
  }

  Options opt_;
  const int park_delay_ = opt_.park_delay;
  // The pusher's sleep (WaitForAll, WaitForRoom): a futex word bumped by a
  // worker that wakes it; all_waiter_ is set (seq_cst) by a WaitForAll about
  // to sleep and read by a worker whose ring has run dry, after a seq_cst
  // read-modify-write (Dekker with the pusher's flag store and sum of the
  // completed counters).
  alignas(128) std::atomic<std::uint32_t> pusher_wake_{0};
  std::atomic<bool> all_waiter_{false};
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<bool> stop_{false};
  std::uint32_t next_home_ = 0;                     // NewVar; main thread only
  std::uint32_t rr_ = 0;                            // pusher only
  std::uint64_t room_waits_ = 0, room_sleeps_ = 0;  // pusher only (statistics)
};

// --- workloads ---------------------------------------------------------------

struct Result {
  bool ok = true;
  std::string error;
  double seconds = 0;
};

using Clock = std::chrono::steady_clock;

// CPU time of the whole process (every thread), user + system, in seconds.
double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
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
  if (!fn) {
    std::fprintf(stderr, "unknown case %s\n", id.c_str());
    return false;
  }
  if (id == "floor-W2" && o.k % o.workers != 0) {
    std::fprintf(stderr, "floor-W2 needs K a multiple of the workers (the body is not atomic)\n");
    return false;
  }
  Engine e(o);
  std::vector<double> ns, cpu_ns;
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
  if ((id == "W2" || id == "floor-W2") && o.k != 4096) label += "/K" + std::to_string(o.k);
  std::printf(
      "| %-9s | %-8s | %7.1f | %s | %5.0f | checks passed | %llu parked, %llu taken back; %s |\n",
      label.c_str(), id == "floor-W2" ? "rr" : o.policy.c_str(), sorted[sorted.size() / 2],
      all.c_str(), cpu_ns[cpu_ns.size() / 2], static_cast<unsigned long long>(e.Parks()),
      static_cast<unsigned long long>(e.TookBack()), e.WaitStats().c_str());
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
    else if (flag == "--prefetch")
      o.prefetch = ParseU(flag, val);
    else if (flag == "--spin")
      o.spin = static_cast<int>(ParseU(flag, val));
    else if (flag == "--park-delay")
      o.park_delay = static_cast<int>(ParseU(flag, val));
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
          "usage: %s [--only=floor-W2,W1,W2,W5,W5x4096] [--policy=affinity|rr] [--n=1000000]\n"
          "  [--n2=1048576] [--k=4096] [--reps=5] [--workers=2] [--ring=4096]\n"
          "  [--batch=32] [--prefetch=0] [--wprefetch=4] [--spin=4000] [--park-delay=0 (test "
          "only)]\n"
          "  [--wait=sleep|spin] [--locked] [--pin[=mixed|split]]\n",
          argv[0]);
      return 2;
    }
  }
  if (o.ring == 0 || (o.ring & (o.ring - 1)) != 0 || o.batch == 0 || o.workers < 1 || o.k == 0 ||
      o.n2 % o.k != 0 || o.reps < 1 || (o.policy != "rr" && o.policy != "affinity")) {
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
