/*
 * Destroying an engine while its last functions finish (ThreadedEngine::
 * Drain in src/engine/threaded_engine_lifetime.cc, with CountPush,
 * FinishPending's path for threads outside the pools, SubtractPending and
 * WaitPendingZero) as a SPIN model. Drain flips generations and waits for
 * each counter to drain until both are empty, since running functions may
 * push more; then it waits until no thread outside the pools is still
 * inside SubtractPending (external_completers_), and the engine is freed.
 *
 * Each access to shared data is one step, in the code's order (SPIN
 * explores every interleaving: sequential consistency). See
 * docs/reliability.md, "Protocol models".
 *
 * The program's thread pushes functions 1 and 3, then destroys the engine.
 * A worker runs them; function 1's body pushes function 2, which is async:
 * a thread outside the engine calls its callback, so its completion counts
 * down through the external path.
 *
 * Checked in every interleaving:
 *   - the engine is freed only after every function finished;
 *   - no thread touches the engine after it was freed (a worker may, until
 *     its pool is joined, which comes first);
 *   - no lost wake-up (else Drain never returns: an invalid end state).
 *
 * Mutations (check_models.sh builds each and expects SPIN to find an error):
 *   MUT_NO_EXTERNAL_WAIT   Drain returns without waiting for
 *                          external_completers_ to reach 0
 *   MUT_EXTERNAL_LATE      the outside thread counts itself in
 *                          external_completers_ after its decrement of the
 *                          pending count
 *   MUT_ONE_ROUND          Drain waits for one generation only, not until
 *                          both counters are empty
 */

byte generation = 0;
byte pending[2];
byte idle_waiters = 0;
bool idle_mu = 0;
bool in_wait = 0;
bool woken = 0;
byte spurious_left = 1;
byte external_completers = 0;
bool freed = 0;
bool stopping = 0;       /* the pools are told to stop (after Drain) */
bool worker_exited = 0;  /* joined */

/* The checker's records. */
byte slot_of[4];
bool ready[4];
bool finished[4];

inline lock(m) { atomic { assert(!freed); m == 0 -> m = 1 } }
inline unlock(m) { atomic { assert(!freed); m = 0 } }

/* CountPush for function f. */
inline count_push(f, g, g2, sl, before, t) {
  do
  :: true ->
     atomic { assert(!freed); g = generation; sl = g & 1 };
     atomic { assert(!freed); pending[sl]++ };
     atomic { assert(!freed); g2 = generation };
     if
     :: g2 == g -> break
     :: else -> subtract_pending(sl, 1, before, t)
     fi
  od;
  slot_of[f] = sl;
  g = 0; g2 = 0; sl = 0
}

/* SubtractPending(sp, 1). */
inline subtract_pending(sp, n, before, t) {
  atomic { assert(!freed); before = pending[sp]; pending[sp] = pending[sp] - n };
  if
  :: before == n ->
     atomic { assert(!freed); t = idle_waiters };
     if
     :: t > 0 ->
        lock(idle_mu);
        atomic { assert(!freed); if :: in_wait -> in_wait = 0; woken = 1 :: else -> skip fi };
        unlock(idle_mu)
     :: else -> skip
     fi
  :: else -> skip
  fi;
  before = 0; t = 0
}

/* The program's thread: pushed functions 1 and 3, then destroys the engine
   (Drain, then the engine is freed). */
proctype Program() {
  byte g, g2, sl, before, t;
  bool p, done;
  count_push(1, g, g2, sl, before, t);
  ready[1] = 1;
  count_push(3, g, g2, sl, before, t);
  ready[3] = 1;
  /* Drain */
  do
  :: true ->
     atomic { g = generation; generation++; sl = g & 1 };
     /* WaitPendingZero(sl) */
     if
     :: atomic { pending[sl] == 0 -> skip } -> skip
     :: true ->
        idle_waiters++;
        lock(idle_mu);
        do
        :: atomic { p = (pending[sl] == 0) };
           if
           :: p -> break
           :: else ->
              atomic { in_wait = 1; idle_mu = 0 };
              if
              :: atomic { woken -> woken = 0 }
              :: atomic { spurious_left > 0 && in_wait -> in_wait = 0; spurious_left-- }
              fi;
              lock(idle_mu)
           fi
        od;
        unlock(idle_mu);
        idle_waiters--
     fi;
#ifdef MUT_ONE_ROUND
     break
#else
     atomic { done = (pending[0] == 0) };
     if :: done -> atomic { done = (pending[1] == 0) } :: else -> skip fi;
     if :: done -> break :: else -> skip fi
#endif
  od;
#ifndef MUT_NO_EXTERNAL_WAIT
  external_completers == 0;
#endif
  /* Then the engine kind's destructor stops and joins its pools (workers
     need no count: they are joined before the engine is freed). */
  stopping = 1;
  worker_exited;
  atomic {
    assert(finished[1] && finished[2] && finished[3]);
    freed = 1
  }
}

/* A worker: runs function 1, whose body pushes function 2 (async: a thread
   outside the engine finishes it), then runs function 3. Its own
   completions count down at once here (its batched counts are flushed
   before it would sleep; wait_for_all.pml checks the batching). */
proctype Worker() {
  byte g, g2, sl, before, t;
  ready[1];
  count_push(2, g, g2, sl, before, t);  /* pushed from inside function 1 */
  ready[2] = 1;                         /* it starts and hands its callback out */
  finished[1] = 1;
  subtract_pending(slot_of[1], 1, before, t);
  ready[3];
  finished[3] = 1;
  subtract_pending(slot_of[3], 1, before, t);
  stopping;  /* its queue's Stop, then the thread ends */
  worker_exited = 1
}

/* A thread outside the engine calls function 2's callback. */
proctype Outside() {
  byte before, t;
  ready[2];
  finished[2] = 1;
#ifndef MUT_EXTERNAL_LATE
  atomic { assert(!freed); external_completers++ };
  subtract_pending(slot_of[2], 1, before, t);
#else
  subtract_pending(slot_of[2], 1, before, t);
  atomic { assert(!freed); external_completers++ };
#endif
  atomic { assert(!freed); external_completers-- }
}

init {
  atomic {
    run Program();
    run Worker();
    run Outside()
  }
}
