/*
 * The ready queue's protocols (src/exec/task_queue.{h,cc}) as a SPIN model:
 * the intrusive multi-producer FIFO (D. Vyukov's design: a stub node, a tail
 * that producers exchange, a head that consumers move under a lock), the
 * priority heap beside it, and the wake-up protocol (sleepers_, spinners_,
 * sleep_mu_ and sleep_cv_) with Stop.
 *
 * Each access of the C++ code to shared state that another thread reads or
 * writes without the same lock is one step here, in the code's order; SPIN
 * explores every interleaving of those steps, which is sequential
 * consistency (the protocols' accesses are seq_cst in the code). A section
 * under a lock whose data no other thread touches without it is one step.
 * The hints (EmptyHint, FifoEmptyHint, heap_max_) answer either way,
 * whatever the queue holds: the code may act on them only as hints, so a
 * wrong answer must cost time, never a block. docs/reliability.md, "Protocol
 * models", says what such a model shows and what it does not.
 *
 * Checked in every interleaving:
 *   - every block pushed is taken exactly once;
 *   - the blocks of one producer leave the FIFO in the order it pushed them;
 *   - no lost wake-up: init waits for every block to be taken before it
 *     calls Stop, as the engine drains a pool before it stops it; a block
 *     left waiting while every worker sleeps is a state where no process can
 *     move, which SPIN reports as an invalid end state;
 *   - with -DSTOP_EARLY, Stop races with the pushes instead, and every block
 *     pushed before Stop still runs before the workers exit.
 *
 * Scenarios (-DSCENARIO=n): 1: one producer, two Push calls. 2: two
 * producers, Push and Push against PushBatch of two. 3: a Push of a block of
 * priority 1 against two Push calls. -DNWORKERS=1 runs one worker instead of
 * two: a lost wake-up that a second worker would cover hangs it.
 *
 * Mutations (check_models.sh builds each and expects SPIN to find an error):
 *   MUT_EMPTY_TAIL_ONLY   Empty() looks at the tail alone
 *   MUT_REGISTER_LATE     a sleeper counts itself after it checks Empty()
 *   MUT_NO_NOTIFY_LOCK    a waker notifies without passing through sleep_mu_
 *   MUT_SLEEP_AS_SPINNER  a worker stays counted as a spinner while it sleeps
 *   MUT_NO_TAIL_CHECK     a consumer re-pushes the stub behind the last block
 *                         it sees without checking that it is the tail
 */

#ifndef SCENARIO
#define SCENARIO 1
#endif
#ifndef NWORKERS
#define NWORKERS 2
#endif
/* FIFO_A before FIFO_B, and FIFO_C before FIFO_D: pushed in that order by
   one producer. */
#if SCENARIO == 1
#define NBLOCKS 2
#define NPRODUCERS 1
#define FIFO_A 1
#define FIFO_B 2
#define FIFO_C 1
#define FIFO_D 2
#elif SCENARIO == 2
#define NBLOCKS 4
#define NPRODUCERS 2
#define FIFO_A 1
#define FIFO_B 2
#define FIFO_C 3
#define FIFO_D 4
#else
#define NBLOCKS 3
#define NPRODUCERS 2
#define FIFO_A 2
#define FIFO_B 3
#define FIFO_C 2
#define FIFO_D 3
#endif
#define NIL 255
#define STUB 0
#define SPIN_ROUNDS 2   /* kSpinRounds: round 0 unregistered, then registered */

/* The FIFO: next[] links nodes (0 = the stub), as OprBlock::queue_next. */
byte next[NBLOCKS + 1];
byte tail = STUB;
byte head = STUB;
bool consumer_mu = 0;

/* The heap (blocks of priority != 0): at most one here. heap_block is
   heap_ (under heap_mu_, so each locked section is one step); heap_size is
   its size as the lock-free readers see it. */
byte heap_block = NIL;
byte heap_size = 0;

/* Sleeping. */
byte sleepers = 0;
byte spinners = 0;
bool sleep_mu = 0;
bool in_wait[2];
bool woken[2];
bool stop = 0;
/* A condition variable may wake a waiter for no reason: once per worker
   here, so that a wait that nothing ends still blocks (a lost wake-up stays
   visible). */
byte spurious_left[2];

/* The checker's records. */
bool taken[NBLOCKS + 1];
bool dequeued[NBLOCKS + 1];
byte taken_count = 0;
byte producers_done = 0;
byte workers_done = 0;

inline lock(m) { atomic { m == 0 -> m = 1 } }
inline unlock(m) { m = 0 }

/* The loop's `continue`: ++round. Rounds past SPIN_ROUNDS behave as
   SPIN_ROUNDS does (Pop only compares round with kSpinRounds and with 0), so
   the count stops there and the state space stays finite. */
inline next_round() {
  if :: round < SPIN_ROUNDS -> round++ :: else -> skip fi
}

inline any_hint(result) {
  if
  :: result = 1
  :: result = 0
  fi
}

/* LinkFifo(first, last): the chain first..last is already linked. */
inline link_fifo(lf_first, lf_last, lf_prev) {
  next[lf_last] = NIL;
  atomic { lf_prev = tail; tail = lf_last };
  atomic { next[lf_prev] = lf_first; lf_prev = 0 }
}

/* PushHeap: its locked section; heap_size is stored last, under the lock. */
inline push_heap(b) {
  atomic { heap_block == NIL -> heap_block = b };
  heap_size = 1
}

/* notify_one: wakes one thread inside wait(), if any. */
inline notify_one() {
  atomic {
    if
    :: in_wait[0] -> in_wait[0] = 0; woken[0] = 1
    :: in_wait[1] -> in_wait[1] = 0; woken[1] = 1
    :: else -> skip
    fi
  }
}
inline notify_all() {
  atomic {
    if :: in_wait[0] -> in_wait[0] = 0; woken[0] = 1 :: else -> skip fi;
    if :: in_wait[1] -> in_wait[1] = 0; woken[1] = 1 :: else -> skip fi
  }
}

/* The waker's `{ lock_guard sync(sleep_mu_); }` before its notify. */
inline pass_sleep_mu() {
#ifndef MUT_NO_NOTIFY_LOCK
  lock(sleep_mu);
  unlock(sleep_mu)
#else
  skip
#endif
}

/* WakeIfNobodySpins: spinners_, then sleepers_. */
inline wake_if_nobody_spins(t) {
  atomic { t = spinners };
  if
  :: t == 0 ->
     atomic { t = sleepers };
     if
     :: t > 0 -> t = 0; pass_sleep_mu(); notify_one()
     :: else -> skip
     fi
  :: else -> t = 0
  fi
}

/* Empty(): the tail, then the head, then the heap's size. */
inline empty_check(result) {
  atomic { result = (tail == STUB) };
#ifndef MUT_EMPTY_TAIL_ONLY
  if :: result -> atomic { result = (head == STUB) } :: else -> skip fi;
#endif
  if :: result -> atomic { result = (heap_size == 0) } :: else -> skip fi
}

proctype Producer(byte first; byte kind) {
  byte prev, t;
  if
  :: kind == 0 ->
     /* Two Push calls of priority-0 blocks. */
     atomic { next[first] = NIL };
     link_fifo(first, first, prev);
     wake_if_nobody_spins(t);
     link_fifo(first + 1, first + 1, prev);
     wake_if_nobody_spins(t)
  :: kind == 1 ->
     /* PushBatch of two priority-0 blocks: one exchange of the tail, then
        notify_all when anyone sleeps. */
     next[first] = first + 1;
     link_fifo(first, first + 1, prev);
     atomic { t = sleepers };
     if
     :: t > 0 -> t = 0; pass_sleep_mu(); notify_all()
     :: else -> skip
     fi
  :: kind == 2 ->
     /* Push of a block of priority 1. */
     push_heap(first);
     wake_if_nobody_spins(t)
  fi;
  atomic { producers_done++ }
}

/* TryDequeueFifo, with consumer_mu held. Each load of head (which Empty()
   reads without the lock), next[] and tail is a step. */
inline try_dequeue_fifo(b, h, nx, prev) {
  atomic { h = head };
  atomic { nx = next[h] };
  if
  :: h == STUB && nx == NIL -> goto fifo_done
  :: h == STUB && nx != NIL ->
     atomic { h = nx; head = h };
     atomic { nx = next[h] }
  :: else -> skip
  fi;
  if
  :: nx == NIL ->
#ifndef MUT_NO_TAIL_CHECK
     if
     :: atomic { tail != h -> skip } -> goto fifo_done
     :: else -> skip
     fi;
#endif
     link_fifo(STUB, STUB, prev);
     atomic { nx = next[h] };
     if
     :: nx == NIL -> goto fifo_done
     :: else -> skip
     fi
  :: else -> skip
  fi;
  atomic {
    head = nx;
    b = h;
    assert(!dequeued[b]);
    dequeued[b] = 1;
    /* FIFO order within a producer. */
    assert(b != FIFO_B || dequeued[FIFO_A]);
    assert(b != FIFO_D || dequeued[FIFO_C])
  };
fifo_done:
  atomic { h = 0; nx = 0 }
}

/* TryDequeueHeap: one locked section. */
inline try_dequeue_heap(b) {
  atomic {
    if
    :: heap_block != NIL -> b = heap_block; heap_block = NIL
    :: else -> skip
    fi
  };
  if
  :: b != NIL -> heap_size = 0
  :: else -> skip
  fi
}

/* TryDequeue: priorities above 0 first (after the heap_max_ hint), then the
   FIFO (after its hint), then the heap if heap_size_ says it holds one. */
inline try_dequeue(b, h, nx, prev, e) {
  b = NIL;
  any_hint(e);
  if
  :: e -> try_dequeue_heap(b)
  :: else -> skip
  fi;
  if
  :: b == NIL ->
     any_hint(e);
     if
     :: e ->
        lock(consumer_mu);
        try_dequeue_fifo(b, h, nx, prev);
        unlock(consumer_mu)
     :: else -> skip
     fi
  :: else -> skip
  fi;
  if
  :: b == NIL ->
     if
     :: atomic { heap_size > 0 -> skip } -> try_dequeue_heap(b)
     :: else -> skip
     fi
  :: else -> skip
  fi;
  e = 0
}

/* SleepWhileEmpty: one wait, then back to the queue. */
inline sleep_while_empty(me, e) {
  lock(sleep_mu);
#ifndef MUT_REGISTER_LATE
  sleepers++;
#endif
  empty_check(e);
  if :: e -> atomic { e = !stop } :: else -> skip fi;
#ifdef MUT_REGISTER_LATE
  sleepers++;
#endif
  if
  :: e ->
     /* wait(lock): releases the mutex and blocks, in one step. */
     atomic { in_wait[me] = 1; sleep_mu = 0; e = 0 };
     if
     :: atomic { woken[me] -> woken[me] = 0 }
     :: atomic { spurious_left[me] > 0 && in_wait[me] -> in_wait[me] = 0; spurious_left[me]-- }
     fi;
     lock(sleep_mu)
  :: else -> skip
  fi;
  sleepers--;
  unlock(sleep_mu)
}

proctype Worker(byte me) {
  byte round = 0;
  bool spinning = 0;
  byte b = NIL, h, nx, prev, t;
  bool e;
loop:
  any_hint(e);  /* EmptyHint() */
  if
  :: !e ->
     if
     :: spinning -> spinners--; spinning = 0
     :: else -> skip
     fi;
     try_dequeue(b, h, nx, prev, e);
     if
     :: b != NIL ->
        any_hint(e);
        if
        :: !e -> wake_if_nobody_spins(t)
        :: else -> e = 0
        fi;
        goto got_block
     :: else -> next_round(); goto loop  /* taken by the other worker, or a link to come */
     fi
  :: else -> e = 0
  fi;
  if
  :: stop ->
     if
     :: spinning -> spinners--; spinning = 0
     :: else -> skip
     fi;
     empty_check(e);
     if
     :: !e -> next_round(); goto loop
     :: else -> e = 0; goto finish
     fi
  :: else -> skip
  fi;
  if
  :: round < SPIN_ROUNDS ->
     if
     :: !spinning && round > 0 -> spinners++; spinning = 1
     :: else -> skip
     fi;
     next_round();
     goto loop
  :: else -> skip
  fi;
#ifndef MUT_SLEEP_AS_SPINNER
  if
  :: spinning -> spinners--; spinning = 0
  :: else -> skip
  fi;
#endif
  sleep_while_empty(me, e);
  round = 1;  /* `round = 0`, then the loop's ++round */
  goto loop;
got_block:
  atomic {
    assert(!taken[b]);
    taken[b] = 1;
    taken_count++;
    b = NIL;
    round = 0
  };
  goto loop;
finish:
  atomic { workers_done++ }
}

init {
  byte i;
  atomic {
    spurious_left[0] = 1;
    spurious_left[1] = 1;
    for (i : 0 .. NBLOCKS) { next[i] = NIL }
    i = 0;
    run Worker(0);
#if NWORKERS == 2
    run Worker(1);
#endif
#if SCENARIO == 1
    run Producer(1, 0)
#elif SCENARIO == 2
    run Producer(1, 0);
    run Producer(3, 1)
#else
    run Producer(1, 2);
    run Producer(2, 0)
#endif
  };
#ifdef STOP_EARLY
  producers_done == NPRODUCERS;
#else
  /* The engine drains before it stops a pool: a block that no worker takes
     leaves init blocked here forever, an invalid end state. */
  taken_count == NBLOCKS;
#endif
  stop = 1;
  pass_sleep_mu();
  notify_all();
  workers_done == NWORKERS;
  assert(taken_count == NBLOCKS)
}
