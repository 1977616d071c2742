/*
 * Backpressure (src/engine/in_flight_limiter.{h,cc}, EngineOptions::
 * max_in_flight) as a SPIN model: pushers reserve units against a bound,
 * admitted by a CAS on `reserved_` against a possibly stale sum of the
 * releases (`released_seen_`); each worker counts its releases in a counter
 * of its own, other threads in `external_released_`; a pusher out of room
 * waits on a condition variable, and is woken by a worker's periodic notify
 * (which may miss it), by a worker that runs dry (WorkerIdle), or by an
 * external release.
 *
 * Each access to shared data is one step, in the code's order (SPIN
 * explores every interleaving: sequential consistency; the fences and
 * seq_cst accesses that order `waiters_` against the counts hold there).
 * See docs/reliability.md, "Protocol models".
 *
 * The waiting pusher's timed re-check (every millisecond in the code) is
 * left out: the model checks the stronger claim that the notifications alone
 * never leave a pusher waiting while there is room, since a worker that runs
 * dry always wakes it.
 *
 * Scenario 1: one pusher pushes three functions with max_in_flight = 1.
 * Scenario 2 (-DSCENARIO=2): two pushers push two functions each with
 * max_in_flight = 2, racing on the admission CAS. Functions are numbered in
 * the order they were admitted. One worker runs all but function 2 and
 * gives their units back through its counter (notifying every second
 * release, as the code does every max/4); a callback thread finishes
 * function 2 and gives its unit back through Release().
 *
 * Checked in every interleaving:
 *   - never more than max_in_flight units taken and not given back;
 *   - no lost wake-up: a pusher waiting for room is woken (else the model
 *     cannot finish: an invalid end state).
 *
 * Mutations (check_models.sh builds each and expects SPIN to find an error):
 *   MUT_ADMIT_ONE_MORE    admission compares with <= max instead of < max
 *   MUT_IDLE_NO_NOTIFY    a worker that runs dry does not notify
 *   MUT_NOTIFY_NO_LOCK    Notify does not pass through the mutex
 *   MUT_WAITER_LATE       WaitForRoom counts itself in waiters_ after it
 *                         found no room, just before it waits
 */

#ifndef SCENARIO
#define SCENARIO 1
#endif
#if SCENARIO == 1
#define MAX 1
#define NFUNCS 3
#define NPUSHERS 1
#else
#define MAX 2
#define NFUNCS 4
#define NPUSHERS 2
#endif
#define NOTIFY_EVERY 2

byte reserved = 0;
byte released_seen = 0;
byte waiters = 0;
byte external_released = 0;
byte worker_released = 0;    /* the worker's WorkerCounter::released */
bool mu = 0;
bool in_wait[2];  /* pusher i is inside cv_.wait */
bool woken[2];
/* A condition variable may wake a waiter for no reason: once per pusher
   here, so that a wait that nothing ends still blocks (a lost wake-up stays
   visible). */
byte spurious_left[2];

/* The checker's records. */
byte pushed = 0;             /* functions admitted and handed to the engine */
byte really_released = 0;    /* units given back, counted as they are */
bool taken[5];
bool finished[5];

inline lock() { atomic { mu == 0 -> mu = 1 } }
inline unlock() { mu = 0 }

inline notify() {
#ifndef MUT_NOTIFY_NO_LOCK
  lock();
  unlock();
#endif
  /* notify_all */
  atomic {
    if :: in_wait[0] -> in_wait[0] = 0; woken[0] = 1 :: else -> skip fi;
    if :: in_wait[1] -> in_wait[1] = 0; woken[1] = 1 :: else -> skip fi
  }
}

/* ReleasedSumLocked: the retired total (none here), the external count,
   then each worker's counter. */
inline released_sum(sum) {
  atomic { sum = external_released };
  atomic { sum = sum + worker_released }
}

inline raise_seen(sum) {
  atomic { if :: released_seen < sum -> released_seen = sum :: else -> skip fi }
}

inline wait_for_room(r, sum) {
#ifndef MUT_WAITER_LATE
  waiters++;  /* then SeqCstFence */
#endif
  lock();
  do
  :: released_sum(sum);
     atomic { r = reserved };
     if
     :: r - sum < MAX -> raise_seen(sum); break
     :: else ->
#ifdef MUT_WAITER_LATE
        if :: !counted -> counted = 1; waiters++ :: else -> skip fi;
#endif
        atomic { in_wait[id] = 1; mu = 0 };  /* cv_.wait: unlock and block */
        if
        :: atomic { woken[id] -> woken[id] = 0 }
        :: atomic { spurious_left[id] > 0 && in_wait[id] -> in_wait[id] = 0; spurious_left[id]-- }
        fi;
        lock()
     fi
  od;
  unlock();
#ifdef MUT_WAITER_LATE
  if :: counted -> counted = 0; waiters-- :: else -> skip fi
#else
  waiters--
#endif
}

#ifdef MUT_ADMIT_ONE_MORE
#define ROOM(r, seen) ((r) - (seen) <= MAX)
#else
#define ROOM(r, seen) ((r) - (seen) < MAX)
#endif

proctype Pusher(byte id) {
  byte r, seen, sum;
  bool admitted, counted;
  byte mine = 0;
  do
  :: mine < NFUNCS / NPUSHERS ->
     /* Reserve(may_wait = true) */
     atomic { r = reserved };
     admitted = 0;
     do
     :: atomic { seen = released_seen };
        if
        :: ROOM(r, seen) ->
           /* compare_exchange_weak(r, r + 1) */
           atomic {
             if
             :: reserved == r ->
                reserved = r + 1;
                admitted = 1;
                /* the bound: units taken and not given back */
                assert(reserved - really_released <= MAX)
             :: else -> r = reserved
             fi
           };
           if :: admitted -> break :: else -> skip fi
        :: else ->
           lock(); released_sum(sum); unlock();
           raise_seen(sum);
           if
           :: ROOM(r, sum) -> skip
           :: else ->
              wait_for_room(r, sum);
              atomic { r = reserved }
           fi
        fi
     od;
     atomic { pushed++; mine++; r = 0; seen = 0; sum = 0; admitted = 0 }
  :: else -> break
  od
}

/* Function f was handed to the engine and not yet taken. */
#define AVAILABLE(f) (f <= NFUNCS && pushed >= f && !taken[f])

/* Runs every function but 2 (the callback thread finishes that one),
   giving back each unit through Release(WorkerCounter&). */
proctype Worker() {
  byte f, since_notify = 0, released_at_idle = 0, t;
top:
  if
  :: atomic { AVAILABLE(1) -> f = 1; taken[1] = 1 }
  :: atomic { AVAILABLE(3) -> f = 3; taken[3] = 1 }
  :: atomic { AVAILABLE(4) -> f = 4; taken[4] = 1 }
  :: atomic { !AVAILABLE(1) && !AVAILABLE(3) && !AVAILABLE(4) -> skip } ->
     /* The queue is empty: WorkerIdle. */
     t = worker_released;
     if
     :: t != released_at_idle ->
        released_at_idle = t;
#ifndef MUT_IDLE_NO_NOTIFY
        atomic { t = waiters };  /* IdleNotify: the fence, then waiters_ */
        if :: t > 0 -> notify() :: else -> skip fi
#else
        skip
#endif
     :: else -> skip
     fi;
     t = 0;
end_idle:
     if
     :: atomic { AVAILABLE(1) -> f = 1; taken[1] = 1 }
     :: atomic { AVAILABLE(3) -> f = 3; taken[3] = 1 }
     :: atomic { AVAILABLE(4) -> f = 4; taken[4] = 1 }
     fi
  fi;
  /* f runs and completes; its unit goes back (only this worker writes its
     counter: a load and a store, one step here). */
  atomic { worker_released++; really_released++; finished[f] = 1 };
  since_notify++;
  if
  :: since_notify >= NOTIFY_EVERY ->
     since_notify = 0;
     atomic { t = waiters };  /* relaxed: may miss a pusher starting to wait */
     if :: t > 0 -> notify() :: else -> skip fi
  :: else -> skip
  fi;
  t = 0;
  f = 0;
  goto top
}

/* A thread outside the pools calls function 2's callback: Release(). */
proctype Callback() {
  byte t;
  pushed >= 2;
  atomic { external_released++; really_released++; finished[2] = 1 };
  atomic { t = waiters };
  if :: t > 0 -> notify() :: else -> skip fi
}

init {
  atomic {
    spurious_left[0] = 1;
    spurious_left[1] = 1;
    run Pusher(0);
#if NPUSHERS == 2
    run Pusher(1);
#endif
    run Worker();
    run Callback()
  };
  pushed == NFUNCS && finished[1] && finished[2] && finished[3] && (NFUNCS < 4 || finished[4])
}
