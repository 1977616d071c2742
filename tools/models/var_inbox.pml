/*
 * One var's two sides (src/tracker/var.{h,cc}, and the pushes of
 * src/engine/threaded_engine.cc: EnqueueGeneral and PushSingle) as a SPIN
 * model: the push side (push_lock, the inbox), the grant side (lock, the
 * FIFO, running reads and write), and the handshake between them through
 * `state` and `inbox_pending` that lets a pusher leave its slot in the inbox
 * for a later completion to pull.
 *
 * Each access to data that another thread reads or writes without holding
 * the same lock is one step, in the code's order; a section under a lock
 * whose data nobody touches without it is one step. SPIN explores every
 * interleaving, which is sequential consistency (the handshake's accesses
 * are seq_cst in the code; docs/reliability.md, "Protocol models", says what
 * that leaves out). Abstractions: a run of reads is a run of slots, not a
 * ReaderGroup (both are granted in one section under `lock`); chain_mode is
 * a hint, so PushSingle may decline or try whatever it holds; kLongBacklog
 * is 2 instead of 4, so that kBacklog is reached with few slots.
 *
 * Checked in every interleaving:
 *   - a write runs alone, reads only beside reads;
 *   - uses are granted in the order they entered the var (the inbox or the
 *     FIFO), which for each pusher is its push order;
 *   - no slot is stranded: init waits until every use has run; a slot left
 *     in the inbox or the FIFO with nobody to grant it leaves init blocked,
 *     an invalid end state.
 *
 * Scenarios (-DSCENARIO=n): 1: pusher A pushes W, R; pusher B pushes R, W.
 * 2: A pushes W, W, W; B pushes R. 3: one pusher pushes W, R, W (one thread's
 * run-ahead: its later pushes find the earlier ones waiting).
 *
 * Mutations (check_models.sh builds each and expects SPIN to find an error):
 *   MUT_SETTLE_NO_RECHECK  a settle that stores kIdle does not then look at
 *                          inbox_pending
 *   MUT_STATE_BEFORE_FLAG  a pusher that starts the inbox loads `state`
 *                          before it stores inbox_pending
 *   MUT_SINGLE_NO_PULL     PushSingle queues without pulling the inbox first
 */

#ifndef SCENARIO
#define SCENARIO 1
#endif
#if SCENARIO == 1
#define NUSES 4
#define NPUSHERS 2
#elif SCENARIO == 2
#define NUSES 4
#define NPUSHERS 2
#else
#define NUSES 3
#define NPUSHERS 1
#endif
#define NONE 0
#define KLONG 2  /* kLongBacklog */
#define IDLE 0
#define BUSY 1
#define BACKLOG 2

/* Slots 1..NUSES; next[] links a slot into the inbox or the FIFO. */
byte next[NUSES + 1];
bool is_write[NUSES + 1];

/* Push side, under push_lock. */
bool push_lock = 0;
byte inbox_head = NONE;
byte inbox_tail = NONE;
byte inbox_len = 0;

/* Grant side, under lock; `state` and `inbox_pending` are read without it. */
bool lock = 0;
byte state = IDLE;
bool inbox_pending = 0;
bool write_running = 0;
byte running_reads = 0;
byte queue_head = NONE;
byte queue_tail = NONE;
byte queue_len = 0;

/* The checker's records. */
byte entered[NUSES + 1];  /* the order in which uses entered the grant side, from 1 */
byte returned = 0;        /* bit u: the push of use u has returned */
byte returned_before[NUSES + 1];  /* `returned` when the push of u started */
byte entered_count = 0;
bool granted[NUSES + 1];
bool claimed[NUSES + 1];
bool done[NUSES + 1];
byte done_count = 0;
byte active_reads = 0;
bool active_write = 0;
byte pushers_done = 0;

inline acquire(m) { atomic { m == 0 -> m = 1 } }
inline release(m) { m = 0 }

/* Records that slot es entered the grant side now (queued in the FIFO, or
   granted at once): the order of the var's uses. A push that returned
   before es's push started has entered already. */
inline enter(es) {
  k = 1;
  do
  :: k <= NUSES ->
     assert(!(returned_before[es] & (1 << k)) || entered[k] != 0);
     k++
  :: else -> break
  od;
  k = 0;
  entered_count++;
  entered[es] = entered_count
}

/* Grants slot gs: every use that entered before it and conflicts with it
   (one of the two writes) has finished. */
inline grant(gs) {
  k = 1;
  do
  :: k <= NUSES ->
     assert(entered[k] == 0 || entered[k] >= entered[gs] || done[k] ||
            (!is_write[k] && !is_write[gs]));
     k++
  :: else -> break
  od;
  k = 0;
  granted[gs] = 1
}

inline add_to_queue(qs) {
  next[qs] = NONE;
  if
  :: queue_tail == NONE -> queue_head = qs
  :: else -> next[queue_tail] = qs
  fi;
  queue_tail = qs;
  queue_len++
}

/* TryGrantNowLocked; then, if not granted, QueueLocked. `ok`: granted. */
inline try_grant_now_or_queue(ts) {
  if
  :: queue_head == NONE && !write_running && !(is_write[ts] && running_reads > 0) ->
     if :: is_write[ts] -> write_running = 1 :: else -> running_reads++ fi;
     grant(ts);
     ok = 1
  :: else ->
     add_to_queue(ts);
     ok = 0
  fi
}

/* GrantFromQueueLocked: one section under lock. */
inline grant_from_queue() {
  g = queue_head;
  do
  :: g != NONE && !write_running && is_write[g] && running_reads == 0 ->
     write_running = 1;
     grant(g);
     queue_len--;
     g = next[g];
     break
  :: g != NONE && !write_running && !is_write[g] ->
     running_reads++;
     grant(g);
     queue_len--;
     g = next[g]
  :: else -> break
  od;
  queue_head = g;
  if :: queue_head == NONE -> queue_tail = NONE :: else -> skip fi;
  g = 0
}

/* PublishStateLocked: stores `state` when it changes (one step: pushers read
   it without the lock). `idle`: it stored kIdle. */
inline publish_state() {
  if
  :: queue_len >= KLONG -> now = BACKLOG
  :: queue_len < KLONG && queue_head != NONE -> now = BUSY
  :: else -> now = IDLE
  fi;
  atomic {
    if
    :: state == now -> idle = 0
    :: else -> state = now; idle = (now == IDLE)
    fi
  };
  now = 0
}

/* PullInboxLocked, with lock held: takes push_lock, moves the inbox behind
   the FIFO, clears inbox_pending. */
inline pull_inbox() {
  atomic {
    push_lock == 0 -> push_lock = 1;
    if
    :: inbox_head != NONE ->
       k = inbox_head;
       do
       :: k != NONE -> g = k; enter(g); k = next[g]
       :: else -> break
       od;
       g = 0;
       if
       :: queue_tail == NONE -> queue_head = inbox_head
       :: else -> next[queue_tail] = inbox_head
       fi;
       queue_tail = inbox_tail;
       queue_len = queue_len + inbox_len;
       inbox_head = NONE;
       inbox_tail = NONE;
       inbox_len = 0
    :: else -> skip
    fi;
    inbox_pending = 0;
    push_lock = 0
  }
}

/* SettleLocked, with lock held. */
inline settle_locked() {
  do
  :: true ->
     grant_from_queue();
     if
     :: queue_head != NONE -> publish_state(); break
     :: else -> skip
     fi;
     publish_state();
#ifdef MUT_SETTLE_NO_RECHECK
     if :: idle -> idle = 0; break :: else -> skip fi;
#endif
     idle = 0;
     atomic { flag = inbox_pending };
     if
     :: !flag -> break
     :: else -> flag = 0
     fi;
     pull_inbox();
     if
     :: queue_head == NONE -> break
     :: else -> skip
     fi
  od
}

/* Append's slow path: the slot starts the inbox. `settle`: kNeedsSettle. */
inline append_to_empty_inbox(as) {
  next[as] = NONE;
  inbox_head = as;
  inbox_tail = as;
  inbox_len = 1;
#ifdef MUT_STATE_BEFORE_FLAG
  atomic { seen = state };
  inbox_pending = 1;
#else
  inbox_pending = 1;
  atomic { seen = state };
#endif
  settle = (seen == IDLE);
  seen = 0
}

/* EnqueueGeneral for a function of one var: push_lock, Append, unlock,
   Settle if Append says so. */
inline push_general(ps) {
  acquire(push_lock);
  settle = 0;
  if
  :: inbox_head != NONE ->
     /* Behind earlier slots in the inbox: whoever pulls them pulls this. */
     atomic {
       next[ps] = NONE;
       next[inbox_tail] = ps;
       inbox_tail = ps;
       inbox_len++
     }
  :: else ->
     atomic { seen = state };
     if
     :: seen != IDLE -> append_to_empty_inbox(ps)
     :: else ->
        if
        :: atomic { lock == 0 -> lock = 1 } ->  /* try_lock */
           atomic { enter(ps); try_grant_now_or_queue(ps) };
           if :: !ok -> publish_state(); idle = 0 :: else -> skip fi;
           ok = 0;
           release(lock)
        :: else -> append_to_empty_inbox(ps)  /* lock busy */
        fi
     fi
  fi;
  release(push_lock);
  if
  :: settle ->
     settle = 0;
     acquire(lock);
     settle_locked();
     release(lock)
  :: else -> skip
  fi
}

/* PushSingle: the grant side's lock only, when try_lock takes it (and the
   chain_mode hint allows); else the general path. */
inline push(ps) {
  if
  :: atomic { lock == 0 -> lock = 1 } ->
#ifndef MUT_SINGLE_NO_PULL
     atomic { flag = inbox_pending };  /* PrepareSingleLocked */
     if :: flag -> flag = 0; pull_inbox() :: else -> skip fi;
#endif
     if
     :: queue_head == NONE ->  /* QueueSingleLocked */
        atomic { enter(ps); try_grant_now_or_queue(ps) };
        if :: !ok -> publish_state(); idle = 0 :: else -> skip fi;
        ok = 0
     :: else ->
        atomic { enter(ps); add_to_queue(ps) };
        grant_from_queue();
        ok = 0;
        publish_state();
        idle = 0
     fi;
     release(lock)
  :: true ->  /* declined: chain_mode, or the lock is busy */
     push_general(ps)
  fi
}

proctype Pusher(byte first; byte count) {
  byte g, ok, settle, seen, k, now, idle, flag;
  byte i = 0;
  do
  :: i < count ->
     returned_before[first + i] = returned;
     push(first + i);
     atomic { returned = returned | (1 << (first + i)); i++ }
  :: else -> break
  od;
  atomic { pushers_done++; i = 0 }
}

/* A worker: runs a granted use, then completes it (CompleteRead or
   CompleteWrite: the lock, the count, SettleLocked). */
proctype Completer() {
  byte u, g, k, now, idle, flag;
end_idle:
  do
  :: atomic {
       /* take any granted use not yet taken */
       if
       :: granted[1] && !claimed[1] -> u = 1
       :: granted[2] && !claimed[2] -> u = 2
       :: granted[3] && !claimed[3] -> u = 3
#if NUSES >= 4
       :: granted[4] && !claimed[4] -> u = 4
#endif
       fi;
       claimed[u] = 1;
       /* The use runs: a write alone, a read beside reads only. */
       if
       :: is_write[u] -> assert(active_reads == 0 && !active_write); active_write = 1
       :: else -> assert(!active_write); active_reads++
       fi
     };
     atomic {
       if :: is_write[u] -> active_write = 0 :: else -> active_reads-- fi;
       lock == 0 -> lock = 1;
       if :: is_write[u] -> write_running = 0 :: else -> running_reads-- fi;
       done[u] = 1;
       done_count++
     };
     settle_locked();
     atomic { release(lock); u = 0 }
  od
}

init {
  atomic {
#if SCENARIO == 1
    is_write[1] = 1; is_write[2] = 0;  /* A: W, R */
    is_write[3] = 0; is_write[4] = 1;  /* B: R, W */
    run Pusher(1, 2);
    run Pusher(3, 2);
#elif SCENARIO == 2
    is_write[1] = 1; is_write[2] = 1; is_write[3] = 1;  /* A: W, W, W */
    is_write[4] = 0;                                    /* B: R */
    run Pusher(1, 3);
    run Pusher(4, 1);
#else
    is_write[1] = 1; is_write[2] = 0; is_write[3] = 1;  /* W, R, W */
    run Pusher(1, 3);
#endif
    run Completer();
    run Completer()
  };
  /* Every use runs: a stranded slot leaves init blocked here. */
  done_count == NUSES && pushers_done == NPUSHERS;
  assert(inbox_head == NONE && queue_head == NONE && !write_running && running_reads == 0)
}
