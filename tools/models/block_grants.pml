/*
 * How a pushed function becomes ready and is finished (src/engine/
 * threaded_engine.cc: EnqueueGeneral, HandOutGrantsTo, Complete,
 * ReleaseExecution, Execute's async path; src/tracker/opr_block.h:
 * OprBlock::Grant) as a SPIN model. A push of several vars locks their push
 * sides in address order, counts one grant per slot in `wait`, and applies
 * the grants it took itself at the end, in one update, or in none when it
 * took none: then whoever applies the last grant dispatches the block, and
 * from the last slot's publication the pusher must not touch the block
 * again. An async function's block has two holders (the callback's
 * completion and the function's own return); the last one recycles it.
 *
 * Each access to shared data is one step, in the code's order (SPIN
 * explores every interleaving: sequential consistency). The var is
 * abstract here: an append or a grant is one step, and a push that finds a
 * var idle may be granted at once or, as when Append's try_lock fails, be
 * left to settle it itself after its unlocks. var_inbox.pml checks the var's
 * own handshake. See docs/reliability.md, "Protocol models".
 *
 * Two vars, A (the lower address) and B, and two scenarios. Two workers run
 * what is dispatched.
 *   default  Pusher 1 pushes f1: writes A and B, async (a callback thread
 *            finishes it). Pusher 2 pushes f2: reads A, writes B; then f3:
 *            writes A.
 *   REUSE    A block is pushed again once recycled, as the engine's block
 *            pool does. Pusher 1 pushes f1: reads A; then f3: writes B.
 *            Pusher 2 pushes f2: reads A. Pusher 3 waits until f2's block is
 *            recycled and pushes it again as f2': writes A and B. Pusher 2's
 *            read may be left to settle, be granted by f1's completion
 *            instead, run and be recycled before pusher 2 settles A; that
 *            settle then grants f2', a push that is not pusher 2's.
 *
 * Checked in every interleaving:
 *   - a block is dispatched exactly once, and only after all its slots were
 *     granted;
 *   - nobody updates a block's `wait` once it was dispatched (a thread that
 *     still holds a grant keeps the block from being ready);
 *   - a block is recycled exactly once, after its completion, and nobody
 *     touches its holder count after that;
 *   - no deadlock, no lost grant: every function runs (else init waits
 *     forever, an invalid end state).
 *
 * Mutations (check_models.sh builds each and expects SPIN to find an error):
 *   MUT_UNORDERED_LOCKS      pusher 2 locks the push sides in the reverse
 *                            order
 *   MUT_TOUCH_AFTER_PUBLISH  a push that took no grant reads its block's
 *                            `wait` after its unlocks
 *   MUT_SPLIT_UPDATE         the pusher applies its grants with a load and a
 *                            store instead of one fetch_sub
 *   MUT_ONE_HOLDER           an async function's block gets one holder, not
 *                            two
 *   MUT_SETTLE_GRANTS_AS_OWN a push that took no grant counts the grants of
 *                            its settle that name its block as its own and
 *                            applies them in its final update (caught in
 *                            REUSE only: without reuse such a grant is its
 *                            own)
 */

#define NB 3       /* blocks 1..3 */
#define NONE 0
#define READ 1
#define WRITE 2

/* What each block uses: use_a[b], use_b[b] (NONE, READ or WRITE). */
byte use_a[NB + 1];
byte use_b[NB + 1];
byte nslots[NB + 1];
bool is_async[NB + 1];

/* The abstract vars, 0 = A, 1 = B: a FIFO of waiting blocks and what runs. */
bool push_lock[2];
byte fifo[8];         /* fifo[v * 4 + i] */
byte fifo_len[2];
byte running_reads[2];
bool write_running[2];

/* The blocks. */
byte wait[NB + 1];
byte finish_refs[NB + 1];

/* The checker's records. */
byte granted_slots[NB + 1];
bool dispatched[NB + 1];
bool started[NB + 1];
bool completed[NB + 1];
bool recycled[NB + 1];
bool callback_armed[NB + 1];
byte recycled_count = 0;

inline use_of(v, x, u) {
  if :: v == 0 -> u = use_a[x] :: else -> u = use_b[x] fi
}

/* Whether a use u of var v may start now, given what runs. */
inline compatible(v, u, ok) {
  ok = (!write_running[v] && (u == READ || running_reads[v] == 0))
}

inline start_use(v, u) {
  if :: u == WRITE -> write_running[v] = 1 :: else -> running_reads[v]++ fi
}

/* The grants a step collects, to hand out after it: one count per block. */
inline add_grant(x) {
  if
  :: x == 1 -> gl1++
  :: x == 2 -> gl2++
  :: x == 3 -> gl3++
  fi
}

/* Grants from the head of v's FIFO what may start; one step (the var's
   lock). */
inline grant_from_fifo(v) {
  do
  :: fifo_len[v] > 0 ->
     x = fifo[v * 4];
     use_of(v, x, u);
     compatible(v, u, ok);
     if
     :: ok ->
        start_use(v, u);
        granted_slots[x]++;
        add_grant(x);
        fifo[v * 4] = fifo[v * 4 + 1];
        fifo[v * 4 + 1] = fifo[v * 4 + 2];
        fifo[v * 4 + 2] = fifo[v * 4 + 3];
        fifo[v * 4 + 3] = 0;
        fifo_len[v]--
     :: else -> break
     fi
  :: else -> break
  od;
  x = 0; u = 0; ok = 0
}

/* OprBlock::Grant: a count of 1 is this grant's own; else the decrement. */
inline grant(x, ready) {
  atomic { assert(!dispatched[x]); w = wait[x] };
  if
  :: w == 1 -> ready = 1
  :: else ->
     atomic { assert(!dispatched[x]); ready = (wait[x] == 1); wait[x]-- }
  fi;
  w = 0
}

inline dispatch(x) {
  atomic {
    assert(!dispatched[x]);
    assert(granted_slots[x] == nslots[x]);
    dispatched[x] = 1
  }
}

/* HandOutGrantsTo(granted, self): grants of `self` are counted, the others
   applied; a block made ready is dispatched. */
inline hand_out(self, self_count) {
  self_count = 0;
  do
  :: gl1 > 0 -> gl1--; if :: self == 1 -> self_count++ :: else -> grant(1, ready); if :: ready -> ready = 0; dispatch(1) :: else -> skip fi fi
  :: gl2 > 0 -> gl2--; if :: self == 2 -> self_count++ :: else -> grant(2, ready); if :: ready -> ready = 0; dispatch(2) :: else -> skip fi fi
  :: gl3 > 0 -> gl3--; if :: self == 3 -> self_count++ :: else -> grant(3, ready); if :: ready -> ready = 0; dispatch(3) :: else -> skip fi fi
  :: else -> break
  od
}

/* EnqueueGeneral for block b, whose vars are locked in the order first,
   second (A then B, unless a mutation reverses it). */
inline push(b, first, second) {
  /* What b uses, copied out of it before any slot is published: from then
     on b may run, be recycled and be pushed again with other vars. */
  ua = use_a[b];
  ub = use_b[b];
  n = nslots[b];
  /* The push sides of the vars b uses, `first` then `second`. */
  if
  :: (first == 0 && ua != NONE) || (first == 1 && ub != NONE) ->
     atomic { push_lock[first] == 0 -> push_lock[first] = 1 }
  :: else -> skip
  fi;
  if
  :: (second == 0 && ua != NONE) || (second == 1 && ub != NONE) ->
     atomic { push_lock[second] == 0 -> push_lock[second] = 1 }
  :: else -> skip
  fi;
  wait[b] = n;  /* published by the locks below */
  taken = 0;
  settle_a = 0;
  settle_b = 0;
  v = 0;
  do
  :: v < 2 ->
     if :: v == 0 -> u = ua :: else -> u = ub fi;
     if
     :: u != NONE ->
        /* Append: one step on the var. */
        atomic {
          compatible(v, u, ok);
          if
          :: fifo_len[v] == 0 && ok ->
             if
             :: start_use(v, u); granted_slots[b]++; taken++  /* granted at once */
             :: fifo[v * 4] = b; fifo_len[v] = 1;             /* left to settle */
                if :: v == 0 -> settle_a = 1 :: else -> settle_b = 1 fi
             fi
          :: else ->
             /* behind earlier uses: a completion, or the settle of the push
                that queued them, grants it */
             fifo[v * 4 + fifo_len[v]] = b;
             fifo_len[v]++
          fi;
          ok = 0
        }
     :: else -> skip
     fi;
     u = 0;
     v++
  :: else -> break
  od;
  v = 0;
  if :: ua != NONE -> push_lock[0] = 0 :: else -> skip fi;
  if :: ub != NONE -> push_lock[1] = 0 :: else -> skip fi;
  if
  :: settle_a || settle_b ->
     if :: settle_a -> atomic { grant_from_fifo(0) } :: else -> skip fi;
     if :: settle_b -> atomic { grant_from_fifo(1) } :: else -> skip fi;
     settle_a = 0;
     settle_b = 0;
     if
     :: taken > 0 -> hand_out(b, self_count); taken = taken + self_count
     :: else ->
#ifdef MUT_SETTLE_GRANTS_AS_OWN
        hand_out(b, self_count); taken = self_count
#else
        hand_out(0, self_count)
#endif
     fi
  :: else -> skip
  fi;
  self_count = 0;
  if
  :: taken == n -> dispatch(b)
  :: taken == 0 ->
#ifdef MUT_TOUCH_AFTER_PUBLISH
     atomic { assert(!dispatched[b]); w = wait[b] }; w = 0;
#endif
     skip  /* b is no longer this pusher's to touch */
  :: else ->
#ifdef MUT_SPLIT_UPDATE
     atomic { assert(!dispatched[b]); w = wait[b] };
     atomic { ready = (w == taken); wait[b] = w - taken; w = 0 };
#else
     atomic {
       assert(!dispatched[b]);
       ready = (wait[b] == taken);
       wait[b] = wait[b] - taken
     };
#endif
     if :: ready -> ready = 0; dispatch(b) :: else -> skip fi
  fi;
  taken = 0; ua = 0; ub = 0; n = 0
}

proctype Pusher(byte id) {
  byte v, u, x, taken, self_count, w, gl1, gl2, gl3, ua, ub, n;
  bool ok, ready, settle_a, settle_b;
#ifdef REUSE
  if
  :: id == 1 -> push(1, 0, 1); push(3, 0, 1)
  :: id == 2 -> push(2, 0, 1)
  :: else ->
     /* Block 2 once recycled, pushed again with other uses (the engine's
        block pool hands a recycled block to the next push). */
     atomic {
       recycled[2] ->
       use_a[2] = WRITE; use_b[2] = WRITE; nslots[2] = 2;
       granted_slots[2] = 0; dispatched[2] = 0; started[2] = 0;
       completed[2] = 0; recycled[2] = 0; finish_refs[2] = 0
     };
     push(2, 0, 1)
  fi
#else
  if
  :: id == 1 -> push(1, 0, 1)
  :: else ->
#ifdef MUT_UNORDERED_LOCKS
     push(2, 1, 0);
#else
     push(2, 0, 1);
#endif
     push(3, 0, 1)
  fi
#endif
}

/* ReleaseExecution: a holder count of 1 is final; the last holder
   recycles. */
inline release_execution(b) {
  atomic { assert(!recycled[b]); r = finish_refs[b] };
  if
  :: r != 1 ->
     atomic { assert(!recycled[b]); r = finish_refs[b]; finish_refs[b]-- }
  :: else -> skip
  fi;
  if
  :: r == 1 ->
     atomic {
       assert(completed[b] && !recycled[b]);
       recycled[b] = 1;
       recycled_count++
     }
  :: else -> skip
  fi;
  r = 0
}

/* Complete: releases each var (collecting what that grants), hands the
   grants out, then lets go of the block. */
inline complete(b) {
  v = 0;
  do
  :: v < 2 ->
     use_of(v, b, u);
     if
     :: u != NONE ->
        atomic {
          if :: u == WRITE -> write_running[v] = 0 :: else -> running_reads[v]-- fi;
          grant_from_fifo(v)
        }
     :: else -> skip
     fi;
     u = 0;
     v++
  :: else -> break
  od;
  v = 0;
  completed[b] = 1;
  hand_out(0, self_count);
  self_count = 0;
  release_execution(b)
}

proctype Worker() {
  byte b, v, u, x, self_count, w, gl1, gl2, gl3, r;
  bool ok, ready;
end_idle:
  if
  :: atomic { dispatched[1] && !started[1] -> b = 1; started[b] = 1 }
  :: atomic { dispatched[2] && !started[2] -> b = 2; started[b] = 1 }
  :: atomic { dispatched[3] && !started[3] -> b = 3; started[b] = 1 }
  fi;
  /* Execute. */
  if
  :: is_async[b] ->
#ifdef MUT_ONE_HOLDER
     finish_refs[b] = 1;
#else
     finish_refs[b] = 2;
#endif
     callback_armed[b] = 1;  /* the function hands its callback out ... */
     release_execution(b)    /* ... and returns */
  :: else ->
     finish_refs[b] = 1;
     complete(b)
  fi;
  b = 0;
  goto end_idle
}

/* The thread that calls f1's callback, some time after f1 started. */
proctype Callback() {
  byte v, u, x, self_count, w, gl1, gl2, gl3, r;
  bool ok, ready;
  callback_armed[1];
  complete(1)
}

init {
#ifdef REUSE
  atomic {
    use_a[1] = READ;  use_b[1] = NONE;  nslots[1] = 1;
    use_a[2] = READ;  use_b[2] = NONE;  nslots[2] = 1;
    use_a[3] = NONE;  use_b[3] = WRITE; nslots[3] = 1;
    run Pusher(1);
    run Pusher(2);
    run Pusher(3);
    run Worker();
    run Worker()
  };
  recycled_count == NB + 1
#else
  atomic {
    use_a[1] = WRITE; use_b[1] = WRITE; nslots[1] = 2; is_async[1] = 1;
    use_a[2] = READ;  use_b[2] = WRITE; nslots[2] = 2;
    use_a[3] = WRITE; use_b[3] = NONE;  nslots[3] = 1;
    run Pusher(1);
    run Pusher(2);
    run Worker();
    run Worker();
    run Callback()
  };
  recycled_count == NB
#endif
}
