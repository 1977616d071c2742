#!/usr/bin/env bash
# Checks the SPIN models of the engine's concurrent protocols: every
# configuration below must verify with no error, and every mutation (a
# deliberate bug, switched on by a -D) must make SPIN report one, so that a
# model that cannot fail is caught too. See docs/reliability.md, "Protocol
# models".
#
# Usage: tools/models/check_models.sh [MODEL]...   (default: every model;
#   MODEL is task_queue, var_inbox, block_grants, wait_for_all, drain,
#   in_flight, one_shot_event, opr_delete or callback_ticket). Needs spin and
#   a C compiler (tools/setup.sh installs them). Exit status 1 when any check
#   failed, 2 on bad usage.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
if ! command -v spin >/dev/null 2>&1; then
  echo "check_models.sh: spin is not installed; as root: tools/setup.sh (or apt-get update && apt-get install -y spin)" >&2
  exit 2
fi
cc=${CC:-cc}
# Memory for one search, MiB (the largest stores 13.7 million states in
# about 700 MiB, compressed by -DCOLLAPSE).
# The verifiers are compiled with -O0: 0.7 s each instead of 3.3 at -O2, for
# searches about 1.4x slower, which the small ones never notice.
memlim=${DEPENGINE_MODEL_MEMLIM:-2048}

# model | -D flags | expect (pass: no error; fail: SPIN must find one)
configs=(
  "task_queue|-DSCENARIO=1|pass"
  "task_queue|-DSCENARIO=1 -DSTOP_EARLY|pass"
  "task_queue|-DSCENARIO=1 -DNWORKERS=1|pass"
  "task_queue|-DSCENARIO=2 -DNWORKERS=1|pass"
  "task_queue|-DSCENARIO=2 -DNWORKERS=1 -DSTOP_EARLY|pass"
  "task_queue|-DSCENARIO=3 -DNWORKERS=1|pass"
  "task_queue|-DSCENARIO=2 -DNWORKERS=1 -DMUT_EMPTY_TAIL_ONLY|fail"
  "task_queue|-DSCENARIO=1 -DNWORKERS=1 -DMUT_REGISTER_LATE|fail"
  "task_queue|-DSCENARIO=1 -DNWORKERS=1 -DMUT_NO_NOTIFY_LOCK|fail"
  "task_queue|-DSCENARIO=1 -DMUT_SLEEP_AS_SPINNER|fail"
  "task_queue|-DSCENARIO=2 -DNWORKERS=1 -DMUT_NO_TAIL_CHECK|fail"
  "var_inbox|-DSCENARIO=1|pass"
  "var_inbox|-DSCENARIO=2|pass"
  "var_inbox|-DSCENARIO=3|pass"
  "var_inbox|-DSCENARIO=3 -DMUT_STATE_BEFORE_FLAG|fail"
  "var_inbox|-DSCENARIO=2 -DMUT_SINGLE_NO_PULL|fail"
  "block_grants||pass"
  "block_grants|-DMUT_UNORDERED_LOCKS|fail"
  "block_grants|-DMUT_TOUCH_AFTER_PUBLISH|fail"
  "block_grants|-DMUT_SPLIT_UPDATE|fail"
  "block_grants|-DMUT_ONE_HOLDER|fail"
  "block_grants|-DREUSE|pass"
  "block_grants|-DREUSE -DMUT_SETTLE_GRANTS_AS_OWN|fail"
  "in_flight|-DSCENARIO=1|pass"
  "in_flight|-DSCENARIO=2|pass"
  "in_flight|-DSCENARIO=2 -DMUT_ADMIT_ONE_MORE|fail"
  "in_flight|-DSCENARIO=1 -DMUT_IDLE_NO_NOTIFY|fail"
  "in_flight|-DSCENARIO=2 -DMUT_NOTIFY_NO_LOCK|fail"
  "in_flight|-DSCENARIO=2 -DMUT_WAITER_LATE|fail"
  "one_shot_event||pass"
  "one_shot_event|-DMUT_NOTIFY_AFTER_UNLOCK|fail"
  "one_shot_event|-DMUT_SET_WITHOUT_LOCK|fail"
  "opr_delete||pass"
  "opr_delete|-DMUT_DELETE_LOAD_THEN_OR|fail"
  "opr_delete|-DMUT_PUSH_CHECK_FIRST|fail"
  "drain||pass"
  "drain|-DMUT_NO_EXTERNAL_WAIT|fail"
  "drain|-DMUT_EXTERNAL_LATE|fail"
  "drain|-DMUT_ONE_ROUND|fail"
  "wait_for_all||pass"
  "wait_for_all|-DMUT_NO_GEN_RECHECK|fail"
  "wait_for_all|-DMUT_NO_CROSS_FLUSH|fail"
  "wait_for_all|-DMUT_WAITER_COUNT_LATE|fail"
  "callback_ticket||pass"
  "callback_ticket|-DNFOREIGN=2|pass"
  "callback_ticket|-DMUT_NARROW_TICKET|fail"
  "callback_ticket|-DMUT_CLAIM_KEEPS_TICKET|fail"
  "callback_ticket|-DMUT_SPLIT_CAS|fail"
  "callback_ticket|-DMUT_THROW_WITHOUT_CAS|fail"
  "callback_ticket|-DMUT_IGNORE_INLINE_CLAIM|fail"
  "callback_ticket|-DMUT_CLAIMED_KEEPS_TWO_REFS|fail"
)

all_models=(task_queue var_inbox block_grants wait_for_all drain in_flight one_shot_event
            opr_delete callback_ticket)
models=("$@")
[[ ${#models[@]} -eq 0 ]] && models=("${all_models[@]}")
for m in "${models[@]}"; do
  if [[ ! -f "$here/$m.pml" ]]; then
    echo "check_models.sh: no model '$m' (expected one of: ${all_models[*]})" >&2
    exit 2
  fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
for entry in "${configs[@]}"; do
  IFS='|' read -r model flags expect <<<"$entry"
  selected=0
  for m in "${models[@]}"; do [[ "$m" == "$model" ]] && selected=1; done
  [[ $selected == 1 ]] || continue
  dir="$work/$model${flags//[ =-]/_}"
  mkdir -p "$dir"
  cp "$here/$model.pml" "$dir/"
  # shellcheck disable=SC2086  # the flags are words
  if ! (cd "$dir" && spin -a $flags "$model.pml" >spin.log 2>&1 &&
        "$cc" -O0 -w -DSAFETY -DCOLLAPSE -DMEMLIM="$memlim" -o pan pan.c >cc.log 2>&1); then
    echo "FAIL  $model $flags: the model does not build"
    cat "$dir/spin.log" "$dir/cc.log" 2>/dev/null | head -20
    failures=$((failures + 1))
    continue
  fi
  start=$EPOCHREALTIME
  (cd "$dir" && ./pan -m1000000 >pan.log 2>&1)
  seconds=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$dir/pan.log" | tail -1)
  states=$(sed -n 's/^ *\([0-9e.+]*\) states, stored.*/\1/p' "$dir/pan.log" | tail -1)
  incomplete=""
  grep -q "reached -DMEMLIM bound\|max search depth too small" "$dir/pan.log" && incomplete=yes
  what=$(grep -m1 -E "assertion violated|invalid end state|acceptance cycle" "$dir/pan.log" |
         sed 's/^pan:[0-9]*: //; s/ (at depth.*//')
  line=$(printf '%-12s %-52s %9s states %6.1f s' "$model" "${flags:-(default)}" "${states:-?}" "$seconds")
  if [[ -z "$errors" ]]; then
    echo "FAIL  $line: no result from pan"
    tail -5 "$dir/pan.log"
    failures=$((failures + 1))
  elif [[ "$expect" == pass && "$errors" == 0 && -z "$incomplete" ]]; then
    echo "ok    $line: no error"
  elif [[ "$expect" == pass && "$errors" == 0 ]]; then
    echo "FAIL  $line: search incomplete (memory or depth bound); raise DEPENGINE_MODEL_MEMLIM"
    failures=$((failures + 1))
  elif [[ "$expect" == pass ]]; then
    echo "FAIL  $line: $what"
    # The counterexample, step by step, for whoever reads the log.
    (cd "$dir" && spin -t -p -g $flags "$model.pml" 2>&1 | tail -60)
    failures=$((failures + 1))
  elif [[ "$errors" != 0 ]]; then
    echo "ok    $line: mutation caught ($what)"
  else
    echo "FAIL  $line: mutation not caught: the model no longer sees this bug"
    failures=$((failures + 1))
  fi
done
if [[ $failures -gt 0 ]]; then
  echo "check_models.sh: $failures check(s) failed"
  exit 1
fi
echo "check_models.sh: every model verified, every mutation caught"
