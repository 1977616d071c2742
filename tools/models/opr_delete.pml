/*
 * A prebuilt operator's deletion (Push, DeleteOperator and FinishPushes in
 * src/engine/threaded_engine.cc and threaded_engine_lifetime.cc; the counts
 * on Opr in src/tracker/opr_block.h) as a SPIN model. Each push adds one to
 * `pushed`; DeleteOperator sets its bit (kDeleteRequested) in `pushed` with
 * one fetch_or, which decides which pushes it counted; a push that finds
 * the bit set is refused. Finished pushes add to `finished`, and
 * DeleteOperator adds kDeleteRequested minus the pushes it counted: the one
 * update that brings `finished` to exactly kDeleteRequested frees the
 * operator.
 *
 * Each access to shared data is one step, in the code's order (SPIN
 * explores every interleaving: sequential consistency). kDeleteRequested
 * is 64 here (bit 62 in the code), and counts wrap modulo 256 as the code's
 * wrap modulo 2^64. See docs/reliability.md, "Protocol models".
 *
 * A push that races with the deletion may read `pushed` after the operator
 * was freed: freed operators are quarantined, not reused at once (the
 * engine's dead_oprs_), so that such a push is refused, not corrupted.
 *
 * Two threads push the operator twice each; a third deletes it; one worker
 * runs the accepted pushes and reports them finished one at a time or two
 * at once (its batch). Checked in every interleaving:
 *   - the operator is freed exactly once, after DeleteOperator, and only
 *     once every push it counted has finished;
 *   - a push refused (after the deletion) is never run;
 *   - every push DeleteOperator counted runs (no push is lost: else the
 *     model cannot finish, an invalid end state).
 *
 * Mutations (check_models.sh builds each and expects SPIN to find an error):
 *   MUT_DELETE_LOAD_THEN_OR  DeleteOperator reads `pushed`, then sets the bit
 *                            with a second step (a push between them is
 *                            counted by neither)
 *   MUT_PUSH_CHECK_FIRST     a push checks the bit with a load before its
 *                            increment instead of with the increment itself
 */

#define DEL 64
#define NPUSHES 4

byte pushed = 0;
byte finished = 0;
bool freed = 0;
byte freed_count = 0;

/* The checker's records. */
byte accepted = 0;        /* pushes that passed the check */
byte run_count = 0;       /* accepted pushes the worker has run */
byte finished_pushes = 0; /* pushes reported finished */
bool deleted = 0;         /* DeleteOperator returned */
byte counted_by_delete = 255;
byte pushers_done = 0;

inline finish_pushes(n, old) {
  atomic {
    assert(!freed);
    old = finished;
    finished = finished + n;
    if
    :: (old + n) % 256 == DEL -> freed = 1; freed_count++
    :: else -> skip
    fi
  };
  old = 0
}

proctype Pusher() {
  byte i = 0, old;
  do
  :: i < 2 ->
#ifdef MUT_PUSH_CHECK_FIRST
     atomic { old = pushed };
     if
     :: old & DEL -> skip  /* refused */
     :: else ->
        pushed++;
        accepted++
     fi;
#else
     atomic { old = pushed; pushed++ };
     if
     :: old & DEL -> skip  /* refused: not counted by DeleteOperator */
     :: else -> accepted++  /* queued: the worker will run it */
     fi;
#endif
     old = 0;
     i++
  :: else -> break
  od;
  pushers_done++
}

proctype Deleter() {
  byte counted, n, old;
#ifdef MUT_DELETE_LOAD_THEN_OR
  atomic { counted = pushed };
  atomic { pushed = pushed | DEL };
#else
  atomic { counted = pushed; pushed = pushed | DEL };
#endif
  counted_by_delete = counted;
  n = DEL - counted;
  deleted = 1;
  finish_pushes(n, old)
}

/* Runs the accepted pushes; reports them finished one by one, or two at a
   time (ReleaseExecution batches a worker's finished pushes of one
   operator). */
proctype Worker() {
  byte batch = 0, old;
end_idle:
  do
  :: atomic { run_count < accepted -> assert(!freed); run_count++; batch++ }
  :: batch > 0 ->
     if
     :: batch == 2 -> finished_pushes = finished_pushes + 2; finish_pushes(2, old); batch = 0
     :: true -> finished_pushes = finished_pushes + batch; finish_pushes(batch, old); batch = 0
     fi
  od
}

init {
  atomic {
    run Pusher();
    run Pusher();
    run Deleter();
    run Worker()
  };
  /* Every push is accepted or refused, the deletion is done, and every push
     it counted has run: then the operator is freed. */
  pushers_done == 2 && deleted && run_count == accepted && freed;
  assert(freed_count == 1);
  assert(accepted == counted_by_delete)
}
