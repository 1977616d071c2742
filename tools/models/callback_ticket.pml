/*
 * An async function's finish, and the ticket that makes a callback's
 * second call fail even after the engine reused the function's block
 * (ThreadedEngine::Execute's async path, CompleteCallback and
 * FinishCallback in src/engine/threaded_engine.cc; ReleaseExecution and
 * RecycleBlock; OprBlock::ticket and finish_refs in src/tracker/opr_block.h),
 * as a SPIN model.
 *
 * Execute stores ticket + 1 in the block (a load and a store: between runs
 * only stale callbacks touch it, and their compare-exchange fails), makes
 * the callback with that value, and holds the block with finish_refs = 2:
 * one reference for itself, one for the completion. A call claims the
 * finish with compare_exchange(ticket, ticket + 1), so exactly one claim
 * per run succeeds and every other call raises std::logic_error. A claim
 * made inside the body, on the thread running it (the thread-local
 * InlineCompletion names the block and the ticket), only records the finish;
 * Execute completes the function once the body returns, holding the block
 * alone (finish_refs = 1). A body that throws claims with the same
 * compare-exchange: if it wins, the throw finishes the function; if the
 * callback won elsewhere, the throw is only recorded. Complete and Execute
 * each drop a reference (ReleaseExecution: a load that sees 1 is final,
 * else a fetch_sub); the one that drops the last recycles the block, and
 * the pool may hand it to the next run.
 *
 * Each access to shared data is one step, in the code's order (SPIN
 * explores every interleaving: sequential consistency). The ticket counts
 * modulo TMOD, as the code's modulo 2^32. See docs/reliability.md,
 * "Protocol models".
 *
 * One block runs RUNS functions in turn on one executor (a worker). In each
 * run the body does one of: call its callback inside; call it twice inside
 * (the second call raises, and the exception escapes the body); call it
 * inside, then throw; hand it to a foreign thread; hand it over, then
 * throw; throw without calling it; call the previous run's callback (which
 * raises; the body catches that), then its own. NFOREIGN foreign threads
 * (1 or 2) call each callback handed over at any later time, once or twice
 * in all, racing with each other, with the body's throw and with the later
 * runs. Checked in every interleaving:
 *   - a call claims only the run it was made for, never a later run of the
 *     reused block (stale callbacks fail);
 *   - each run is finished exactly once, and a call fails only when its run
 *     was already finished (by an earlier call or by the body's throw);
 *   - the block is recycled only after its run was finished and its body
 *     returned, exactly once per run, and nobody touches the run's block
 *     after that;
 *   - every run finishes and the block comes back (no lost finish: else the
 *     executor waits for the block forever, an invalid end state).
 *
 * Not modelled: the memory orders (SPIN is sequentially consistent; the
 * code's acq_rel compare-exchange and release store are what carry the
 * body's writes to the completion), and the error's path into the vars,
 * which tests/errors_test.cc covers.
 *
 * What the model shows beyond the checks: Execute's bump of the ticket at
 * the start of a run is not needed for them (with `t = ticket` instead,
 * both configurations verify): the claim's increment alone moves the
 * ticket on once per run. The bump keeps the ticket odd while a claim is
 * open and halves the number of runs before it wraps (2^31 instead of
 * 2^32); it costs a store to a line the worker owns already.
 *
 * Mutations (check_models.sh builds each and expects SPIN to find an error):
 *   MUT_NARROW_TICKET         the ticket counts modulo 4: a callback kept
 *                             from the first run claims the third (the
 *                             code's wrap after 2^31 runs of one block, made
 *                             small)
 *   MUT_CLAIM_KEEPS_TICKET    a claim leaves the ticket as it is: a second
 *                             call finishes the function again
 *   MUT_SPLIT_CAS             a claim reads the ticket, then stores
 *                             ticket + 1 in a second step: two racing calls
 *                             both claim
 *   MUT_THROW_WITHOUT_CAS     a throwing body finishes the function unless
 *                             its callback was called inside, without the
 *                             compare-exchange: a foreign call finishes it
 *                             too
 *   MUT_IGNORE_INLINE_CLAIM   Execute does not complete a finish the body
 *                             recorded inside: the function never finishes
 *   MUT_CLAIMED_KEEPS_TWO_REFS  the inline finish completes with
 *                             finish_refs still 2: the block never comes
 *                             back
 */

#define RUNS 3
#ifndef NFOREIGN
#define NFOREIGN 1
#endif
#ifdef MUT_NARROW_TICKET
#define TMOD 4
#else
#define TMOD 256
#endif

/* The block. */
byte ticket = 0;
byte finish_refs = 0;
bool block_free = 1;  /* in the pool */
byte cur_run = 0;     /* the rn holding the block, 1..RUNS, while not free */

/* The executor's InlineCompletion (thread-local: only the executor touches
   it; the foreign threads have none). */
byte inl_run = 0;     /* 0: no body running */
byte inl_ticket = 0;
bool inl_claimed = 0;

/* Callbacks handed to the foreign threads: their ticket, and the calls made
   of them so far (at most 2 in all). */
bool handed[RUNS + 1];
byte hand_ticket[RUNS + 1];
byte hand_calls[RUNS + 1];

/* The checker's records. */
bool finished[RUNS + 1];       /* the rn's finish was claimed */
byte completions[RUNS + 1];    /* Complete ran for the rn */
bool body_returned[RUNS + 1];
byte recycles = 0;

/* A call of the callback of rn `rn`, made with ticket `t`: the
   compare-exchange. `ok` tells whether it claimed the finish. */
inline try_claim(t, rn, ok) {
#ifdef MUT_SPLIT_CAS
  atomic { ok = (ticket == t) };
  if
  :: ok ->
     atomic {
       ticket = (t + 1) % TMOD;
       assert(!block_free && cur_run == rn && !finished[rn]);
       finished[rn] = 1
     }
  :: else -> skip
  fi
#else
  atomic {
    if
    :: ticket == t ->
#ifndef MUT_CLAIM_KEEPS_TICKET
       ticket = (t + 1) % TMOD;
#endif
       /* A claim is for the rn the block now holds, and for one that was
          not finished yet. */
       assert(!block_free && cur_run == rn && !finished[rn]);
       finished[rn] = 1;
       ok = 1
    :: else ->
       /* A call that fails was for a rn finished before. */
       assert(finished[rn]);
       ok = 0
    fi
  }
#endif
}

/* Drops a reference to the block; the last one recycles it. */
inline release_execution(rn, seen) {
  atomic { assert(!block_free && cur_run == rn); seen = finish_refs };
  if
  :: seen == 1 -> skip  /* final: the other holder let go */
  :: else ->
     atomic { seen = finish_refs; finish_refs-- }
  fi;
  if
  :: seen == 1 ->
     atomic {
       assert(body_returned[rn] && completions[rn] == 1);
       recycles++;
       block_free = 1
     }
  :: else -> skip
  fi;
  seen = 0
}

/* Complete: releases the function's vars (not modelled), then drops the
   completion's reference. */
inline complete(rn, seen) {
  atomic {
    assert(!block_free && cur_run == rn && finished[rn]);
    completions[rn]++;
    assert(completions[rn] == 1)
  };
  release_execution(rn, seen)
}

/* A call of the callback of rn `rn` (ticket `t`) on the executor, inside
   a body: FinishCallback records an inline finish when the running body is
   the callback's own. `ok` tells whether it claimed. */
inline call_inside(t, rn, ok, seen) {
  try_claim(t, rn, ok);
  if
  :: ok && inl_run == cur_run && inl_ticket == t -> inl_claimed = 1
  :: ok && !(inl_run == cur_run && inl_ticket == t) -> complete(rn, seen)
  :: else -> skip  /* std::logic_error */
  fi
}

proctype Executor() {
  byte r = 1, t, prev_t, seen;
  bool ok, threw;
  do
  :: r <= RUNS ->
     /* The pool hands the block out again. */
     atomic { block_free -> block_free = 0; cur_run = r };
     finish_refs = 2;
     t = (ticket + 1) % TMOD;
     ticket = t;
     inl_run = r; inl_ticket = t; inl_claimed = 0;
     threw = 0;
     /* The body. */
     if
     :: true -> call_inside(t, r, ok, seen)
     :: true ->
        call_inside(t, r, ok, seen);
        call_inside(t, r, ok, seen);
        threw = !ok  /* the second call's logic_error escapes the body */
     :: true -> call_inside(t, r, ok, seen); threw = 1
     :: true -> atomic { hand_ticket[r] = t; handed[r] = 1 }
     :: true -> atomic { hand_ticket[r] = t; handed[r] = 1 }; threw = 1
     :: true -> threw = 1
     :: r > 1 ->
        call_inside(prev_t, r - 1, ok, seen);  /* raises; the body catches it */
        call_inside(t, r, ok, seen)
     fi;
     body_returned[r] = 1;
     inl_run = 0;
     if
     :: threw ->
#ifdef MUT_THROW_WITHOUT_CAS
        atomic {
          ok = !inl_claimed;
          if :: ok -> finished[r] = 1 :: else -> skip fi
        };
#else
        try_claim(t, r, ok);
#endif
        if
        :: ok -> complete(r, seen)  /* the throw finishes the function */
        :: else -> skip             /* finished already: only recorded */
        fi
     :: else -> skip
     fi;
#ifdef MUT_IGNORE_INLINE_CLAIM
     release_execution(r, seen);
#else
     if
     :: inl_claimed ->
#ifndef MUT_CLAIMED_KEEPS_TWO_REFS
        finish_refs = 1;
#endif
        complete(r, seen)
     :: else -> release_execution(r, seen)
     fi;
#endif
     inl_claimed = 0;
     prev_t = t;
     r++
  :: else -> break
  od
}

/* Calls a callback handed over (ticket `t`, rn `rn`) from a foreign
   thread, which runs no body of this block: a claim completes at once. */
inline call_foreign(k, ok, seen) {
  try_claim(hand_ticket[k], k, ok);
  if
  :: ok -> complete(k, seen)
  :: else -> skip  /* std::logic_error (try_claim checked that the run was finished) */
  fi
}

proctype Foreign() {
  byte k, seen;
  bool ok;
end_idle:
  do
  :: atomic { handed[1] && hand_calls[1] < 2 -> hand_calls[1]++; k = 1 };
     call_foreign(k, ok, seen)
  :: atomic { handed[2] && hand_calls[2] < 2 -> hand_calls[2]++; k = 2 };
     call_foreign(k, ok, seen)
  :: atomic { handed[3] && hand_calls[3] < 2 -> hand_calls[3]++; k = 3 };
     call_foreign(k, ok, seen)
  od
}

init {
  byte i;
  atomic {
    run Executor();
    i = 0;
    do
    :: i < NFOREIGN -> run Foreign(); i++
    :: else -> break
    od
  };
  /* Every rn finished and gave the block back. */
  recycles == RUNS && block_free;
  i = 1;
  do
  :: i <= RUNS -> assert(finished[i] && completions[i] == 1 && body_returned[i]); i++
  :: else -> break
  od
}
