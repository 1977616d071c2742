#!/bin/bash
# Interleaved rounds of the ticket prototype's publication modes
# (docs/performance.md, "Publishing every push"): batch 32 (the tail stored
# every 32 pushes), batch 1 (the tail stored every push, with a fence),
# flag-fence (a word in each slot, with a fence), flag (a word in each slot,
# membarrier on the worker's sleep), flag and batch 32 with --locked (the
# locked adds of multi-threaded pushes), and flag with --biased (the fast
# path of a var owned by its pushing thread). Prints, per case and mode,
# the median over rounds of each run's median, and the rounds.
# Usage: [BUILD=build] bench/experiments/ticket_publish_modes.sh [ROUNDS=3]
# (from the repository root, after ninja -C $BUILD depengine-ticket-proto).
set -euo pipefail
ROUNDS=${1:-3}
BUILD=${BUILD:-build}
P=$BUILD/bench/depengine-ticket-proto
MODES=("batch32:--publish=batch --batch=32" "batch1:--publish=batch --batch=1"
       "flag-fence:--publish=flag-fence" "flag:--publish=flag"
       "flag-locked:--publish=flag --locked" "flag-biased:--publish=flag --biased"
       "batch32-locked:--publish=batch --batch=32 --locked")
OUT=$(mktemp)
for _ in $(seq 1 "$ROUNDS"); do
  for m in "${MODES[@]}"; do
    name=${m%%:*}
    # shellcheck disable=SC2086  # the mode's flags are separate words
    $P --only=floor-W2,W1,W2,W5,W5x4096,W4 ${m#*:} |
      awk -v n="$name" -F'|' '/checks passed/ {gsub(/ /, "", $2); print n, $2, $4}' >> "$OUT"
  done
done
python3 - "$OUT" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    mode, case, ns = line.split()
    runs[(case, mode)].append(float(ns))
modes = list(dict.fromkeys(m for _, m in runs))
cases = list(dict.fromkeys(c for c, _ in runs))
print("| case | " + " | ".join(modes) + " |")
print("|---|" + "--:|" * len(modes))
for c in cases:
    cells = []
    for m in modes:
        v = runs[(c, m)]
        cells.append("%.1f (%s)" % (statistics.median(v), ", ".join("%.0f" % x for x in v)))
    print("| " + c + " | " + " | ".join(cells) + " |")
PY
rm -f "$OUT"
