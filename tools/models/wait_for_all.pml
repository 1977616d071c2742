/*
 * WaitForAll's accounting (src/engine/threaded_engine.cc: CountPush,
 * FinishPending and the worker loop's batched counts;
 * src/engine/threaded_engine_waits.cc: SubtractPending, WaitPendingZero and
 * WaitForAll) as a SPIN model. A push counts itself in
 * pending_[generation_ & 1]; WaitForAll bumps generation_ and waits for the
 * old counter to drain, so that pushes made after it started never delay
 * it; a worker batches its completions' decrements per counter.
 *
 * Each access to shared data is one step, in the code's order (they are all
 * seq_cst in the code); SPIN explores every interleaving. See
 * docs/reliability.md, "Protocol models".
 *
 * One pusher pushes three functions, one thread calls WaitForAll twice, one
 * worker runs the functions in push order (one pool's FIFO) and completes
 * them, batching its decrements (kFlushEvery is 2 here); `f` is the last
 * function it took. The third function's body blocks until the first
 * WaitForAll has returned whenever that function was counted after the
 * first WaitForAll began: a function pushed after a WaitForAll started may
 * wait for it, since the WaitForAll must not wait for that function.
 *
 * Checked in every interleaving:
 *   - a WaitForAll returns only after every function whose push returned
 *     before the WaitForAll started has finished;
 *   - no counter goes below zero;
 *   - no lost wake-up and no wait on the wrong function: a WaitForAll
 *     blocked for good, or a worker whose batched count keeps it blocked,
 *     is a state where no process can move (an invalid end state).
 *
 * Mutations (check_models.sh builds each and expects SPIN to find an error):
 *   MUT_NO_GEN_RECHECK    CountPush does not re-read generation_ after its
 *                         increment
 *   MUT_NO_CROSS_FLUSH    the worker does not flush the other counter's
 *                         batch before it runs a function
 *   MUT_WAITER_COUNT_LATE WaitPendingZero counts itself in idle_waiters_
 *                         after it checks the counter under idle_mu_
 */

#define NFUNCS 3
#define FLUSH_EVERY 2

byte generation = 0;
byte pending[2];
byte idle_waiters = 0;
bool idle_mu = 0;
bool in_wait = 0;  /* the waiter is inside idle_cv_.wait */
bool woken = 0;
/* A condition variable may wake a waiter for no reason: once here, so that
   a wait that nothing ends still blocks (a lost wake-up stays visible). */
byte spurious_left = 1;

/* Functions 1..NFUNCS. */
byte slot_of[NFUNCS + 1];
byte gen_of[NFUNCS + 1];
bool ready[NFUNCS + 1];
bool completed[NFUNCS + 1];
byte returned = 0;       /* bit f: the push of f has returned */
bool pushes_done = 0;
byte waits_returned = 0;

inline lock(m) { atomic { m == 0 -> m = 1 } }
inline unlock(m) { m = 0 }

/* SubtractPending(sp, n). */
inline subtract_pending(sp, n, before, t) {
  atomic {
    before = pending[sp];
    assert(before >= n);
    pending[sp] = pending[sp] - n
  };
  if
  :: before == n ->
     atomic { t = idle_waiters };
     if
     :: t > 0 ->
        lock(idle_mu);
        atomic { if :: in_wait -> in_wait = 0; woken = 1 :: else -> skip fi };
        unlock(idle_mu)
     :: else -> skip
     fi
  :: else -> skip
  fi;
  before = 0;
  t = 0
}

proctype Pusher() {
  byte f = 1, g, g2, sl, before, t;
  do
  :: f <= NFUNCS ->
     /* CountPush */
     do
     :: true ->
        atomic { g = generation; sl = g & 1 };
        pending[sl]++;
#ifdef MUT_NO_GEN_RECHECK
        break
#else
        atomic { g2 = generation };
        if
        :: g2 == g -> g2 = 0; break
        :: else -> g2 = 0; subtract_pending(sl, 1, before, t)
        fi
#endif
     od;
     atomic {
       slot_of[f] = sl;
       gen_of[f] = g;
       ready[f] = 1;  /* dispatched */
       returned = returned | (1 << f);
       f++;
       g = 0;
       sl = 0
     }
  :: else -> break
  od;
  pushes_done = 1
}

proctype Worker() {
  byte f, done0 = 0, done1 = 0, before, t, n;
top:
  if
  :: atomic { f < NFUNCS && ready[f + 1] -> f++ } -> goto run_f
  :: atomic { !(f < NFUNCS && ready[f + 1]) -> skip } ->
     /* The queue is empty: Pop's on_empty (flush_all), then wait. */
     if :: done0 > 0 -> n = done0; done0 = 0; subtract_pending(0, n, before, t) :: else -> skip fi;
     if :: done1 > 0 -> n = done1; done1 = 0; subtract_pending(1, n, before, t) :: else -> skip fi;
     n = 0
  fi;
end_idle:
  atomic { f < NFUNCS && ready[f + 1] -> f++ };
run_f:
#ifndef MUT_NO_CROSS_FLUSH
  /* flush(next->pending_slot ^ 1) */
  if
  :: slot_of[f] == 0 && done1 > 0 -> n = done1; done1 = 0; subtract_pending(1, n, before, t)
  :: slot_of[f] == 1 && done0 > 0 -> n = done0; done0 = 0; subtract_pending(0, n, before, t)
  :: else -> skip
  fi;
  n = 0;
#endif
  /* The body. The third function, when counted after the first WaitForAll
     began, waits for that WaitForAll to return. */
  if
  :: f == NFUNCS && gen_of[f] >= 1 -> waits_returned >= 1
  :: else -> skip
  fi;
  /* The completion: FinishPending, batched. */
  atomic {
    completed[f] = 1;
    if :: slot_of[f] == 0 -> done0++ :: else -> done1++ fi
  };
  if
  :: done0 >= FLUSH_EVERY -> n = done0; done0 = 0; subtract_pending(0, n, before, t)
  :: done1 >= FLUSH_EVERY -> n = done1; done1 = 0; subtract_pending(1, n, before, t)
  :: else -> skip
  fi;
  n = 0;
  goto top
}

/* One WaitForAll: checks that every function whose push returned before it
   started has finished when it returns. */
inline wait_for_all(g, sl, snapshot, p, k) {
  snapshot = returned;
  atomic { g = generation; generation++; sl = g & 1 };
  /* WaitPendingZero: the spin (it may see zero), then sleep. */
  if
  :: atomic { pending[sl] == 0 -> skip } -> skip
  :: true ->
#ifndef MUT_WAITER_COUNT_LATE
     idle_waiters++;
#endif
     lock(idle_mu);
     do
     :: atomic { p = (pending[sl] == 0) };
        if
        :: p -> p = 0; break
        :: else ->
#ifdef MUT_WAITER_COUNT_LATE
           idle_waiters++;
#endif
           atomic { in_wait = 1; idle_mu = 0 };  /* wait: unlock and block */
           if
           :: atomic { woken -> woken = 0 }
           :: atomic { spurious_left > 0 && in_wait -> in_wait = 0; spurious_left-- }
           fi;
           lock(idle_mu)
#ifdef MUT_WAITER_COUNT_LATE
           ;
           idle_waiters--
#endif
        fi
     od;
     unlock(idle_mu);
#ifndef MUT_WAITER_COUNT_LATE
     idle_waiters--
#endif
  fi;
  k = 1;
  do
  :: k <= NFUNCS ->
     assert(!(snapshot & (1 << k)) || completed[k]);
     k++
  :: else -> break
  od;
  atomic { waits_returned++; k = 0; g = 0; sl = 0; snapshot = 0 }
}

proctype Waiter() {
  byte g, sl, snapshot, k;
  bool p;
  wait_for_all(g, sl, snapshot, p, k);
  wait_for_all(g, sl, snapshot, p, k)
}

init {
  atomic {
    run Pusher();
    run Worker();
    run Waiter()
  };
  /* Everything finishes: the pushes, both waits, every function. */
  pushes_done && waits_returned == 2 && completed[1] && completed[2] && completed[3]
}
