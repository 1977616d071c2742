/*
 * OneShotEvent (src/common/one_shot_event.h), the wait behind WaitForVar, as
 * a SPIN model: the waiter spins, then moves the state from kPending to
 * kSleeping under the mutex and waits on the condition variable; Set() moves
 * kPending to kSet with one CAS when the waiter still spins, and otherwise
 * stores kSet and notifies under the mutex. The waiter destroys the event
 * as soon as Wait() returns (it lives on the waiter's stack).
 *
 * Each access to shared data is one step, in the code's order (SPIN
 * explores every interleaving: sequential consistency). The mutex's unlock
 * is one step: the model does not look inside the mutex. The waiter may
 * wake once without a notify, as a condition variable allows. See
 * docs/reliability.md, "Protocol models".
 *
 * Checked in every interleaving:
 *   - Wait() returns only after Set() was called;
 *   - Set() touches nothing of the event after the waiter may have
 *     destroyed it;
 *   - no lost wake-up (else the waiter never returns: an invalid end
 *     state).
 *
 * Mutations (check_models.sh builds each and expects SPIN to find an error):
 *   MUT_NOTIFY_AFTER_UNLOCK  Set() notifies after it lets go of the mutex
 *   MUT_SET_WITHOUT_LOCK     Set()'s slow path stores kSet and notifies
 *                            without the mutex
 */

#define PENDING 0
#define SLEEPING 1
#define SET 2

byte state = PENDING;
bool mu = 0;
bool in_wait = 0;
bool woken = 0;
bool destroyed = 0;  /* the waiter returned and its event is gone */
bool set_called = 0;
/* A condition variable may wake a waiter for no reason: once here, so that
   a wait that nothing ends still blocks (a lost wake-up stays visible). */
byte spurious_left = 1;

inline lock() { atomic { assert(!destroyed); mu == 0 -> mu = 1 } }
inline unlock() { atomic { assert(!destroyed); mu = 0 } }
inline notify_one() {
  atomic { assert(!destroyed); if :: in_wait -> in_wait = 0; woken = 1 :: else -> skip fi }
}

proctype Setter() {
  set_called = 1;
  atomic {
    assert(!destroyed);
    if
    :: state == PENDING -> state = SET; goto done  /* the CAS succeeded */
    :: else -> skip
    fi
  };
#ifdef MUT_SET_WITHOUT_LOCK
  atomic { assert(!destroyed); state = SET };
  notify_one();
#else
  lock();
  atomic { assert(!destroyed); state = SET };
#ifdef MUT_NOTIFY_AFTER_UNLOCK
  unlock();
  notify_one();
#else
  notify_one();
  unlock();
#endif
#endif
done:
  skip
}

proctype Waiter() {
  bool ok;
  /* SpinUntil: it may see kSet, or give up. */
  if
  :: atomic { state == SET -> skip } -> goto returned
  :: true -> skip
  fi;
  lock();
  atomic {
    if
    :: state == PENDING -> state = SLEEPING; ok = 1
    :: else -> ok = 0  /* kSet: the CAS fails */
    fi
  };
  if
  :: ok ->
     /* cv_.wait(lock, predicate) */
     do
     :: atomic { ok = (state == SET) };
        if
        :: ok -> break
        :: else ->
           atomic { in_wait = 1; mu = 0 };
           if
           :: atomic { woken -> woken = 0 }
           :: atomic { spurious_left > 0 && in_wait -> in_wait = 0; spurious_left-- }
           fi;
           lock()
        fi
     od
  :: else -> skip
  fi;
  unlock();
returned:
  atomic {
    assert(set_called && state == SET);
    destroyed = 1
  }
}

init {
  atomic {
    run Waiter();
    run Setter()
  }
}
