#!/bin/bash
# Interleaved rounds of the ticket prototype's W4 and depengine's per-device
# engine on W4 (docs/design.md, "W4 with reads and several vars"). Each round
# runs, in this order: A = the prototype's W4 at T = 0, 1, 10 us with the
# routing chosen for W4 (affinity by written var, resumed functions handed to
# their home worker, idle workers steal: --resume=home --steal), B =
# depengine-bench --only=W4 (per-device, 2 workers), then the prototype's
# other routings: H = --resume=home without steal, S = --steal without home
# hand-off, P = plain affinity (the completer runs what it makes due, no
# steal). Then it prints, per case, the median over rounds of each run's
# median of 5 (after 1 warm-up), efficiencies, the pusher's CPU per function,
# and the per-round ratios depengine / prototype.
# Usage: [BUILD=build] [VARIANTS="H S P"] bench/experiments/ticket_w4_interleaved.sh [ROUNDS=3] [OUTDIR]
# (ANALYZE_ONLY=1: only print the summary of the runs already in OUTDIR.)
# (from the repository root, after ninja -C $BUILD depengine-bench
# depengine-ticket-proto).
set -eu
ROUNDS=${1:-3}
OUT=${2:-$(mktemp -d /tmp/ticket-w4.XXXXXX)}
BUILD=${BUILD:-build}
VARIANTS=${VARIANTS-H S P}
P=$BUILD/bench/depengine-ticket-proto
D=$BUILD/bench/depengine-bench
mkdir -p "$OUT"
w4() { for t in 0 1 10; do $P --only=W4 --t=$t "$@" | grep '^| W4'; done; }
for r in $(seq 1 "$ROUNDS"); do
  [ -n "${ANALYZE_ONLY:-}" ] && break
  echo "round $r $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/log.txt"
  w4 --resume=home --steal > "$OUT/A$r.txt"
  $D --only=W4 --engines=per-device --workers=2 --no-memory > "$OUT/B$r.txt" 2>/dev/null
  for v in $VARIANTS; do
    case $v in
      H) w4 --resume=home > "$OUT/H$r.txt" ;;
      S) w4 --steal > "$OUT/S$r.txt" ;;
      P) w4 > "$OUT/P$r.txt" ;;
    esac
  done
done
echo "outputs in $OUT"
python3 - "$OUT" "$ROUNDS" "$VARIANTS" <<'PY'
import re, statistics as st, sys
d, n, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
rounds = range(1, n + 1)
def proto(f):
    out = {}
    for line in open(f):
        if 'FAILED' in line: sys.exit('a check failed: ' + f)
        m = re.match(r'\|\s*W4/T(\d+)\s*\|\s*(\S+)\s*\|\s*([\d.]+)\s*\|[^|]*\|\s*([\d.]+)\s*\|\s*checks passed\s*\|.*pusher CPU ([\d.]+) ns/op', line)
        if m: out[int(m.group(1))] = (float(m.group(3)), float(m.group(5)), m.group(2), float(m.group(4)))
    return out
def bench(f):
    out = {}
    for line in open(f):
        m = re.match(r'\| W4 random DAG, T=(\d+) us \| ThreadedEnginePerDevice \| [\d,]+ \| ([\d.,]+) \|', line)
        if m: out[int(m.group(1))] = float(m.group(2).replace(',', ''))
        if 'FAIL' in line: sys.exit('a check failed: ' + f)
    return out
def fig(t, ns):  # T=0: ns/op; T>0: efficiency = (N T / P) / wall = T / (P ns/op)
    return ns if t == 0 else 1e3 * t / 2 / ns
def show(label, runs):
    for t in (0, 1, 10):
        v = [runs[r][t][0] if isinstance(runs[r][t], tuple) else runs[r][t] for r in rounds]
        f = [fig(t, x) for x in v]
        extra = ''
        if isinstance(runs[1][t], tuple):
            pc = [runs[r][t][1] for r in rounds]
            cpu = [runs[r][t][3] for r in rounds]
            extra = f'  pusher CPU ns/op median {st.median(pc):.1f} {pc}  process CPU ns/op median {st.median(cpu):.0f}'
        unit = 'ns/op' if t == 0 else 'efficiency'
        print(f'{label:34s} T={t:<2d} median {st.median(v):8.1f} ns/op ({unit} {st.median(f):.3f})  rounds {[round(x, 3) for x in f]}{extra}')
A = {r: proto(f'{d}/A{r}.txt') for r in rounds}
B = {r: bench(f'{d}/B{r}.txt') for r in rounds}
show('prototype ' + A[1][0][2], A)
show('depengine per-device', B)
for v in variants:
    R = {r: proto(f'{d}/{v}{r}.txt') for r in rounds}
    show('prototype ' + R[1][0][2], R)
for tag in ['A'] + variants:
    R = A if tag == 'A' else {r: proto(f'{d}/{tag}{r}.txt') for r in rounds}
    for t in (0, 1, 10):
        rs = [B[r][t] / R[r][t][0] for r in rounds]
        print(f'ratio depengine / prototype {R[1][t][2]} wall, T={t}: median {st.median(rs):.2f}  rounds {[round(x, 2) for x in rs]}')
# Cores the prototype's process had: its CPU time over wall time, per round.
for t in (0, 1, 10):
    c = [A[r][t][3] / A[r][t][0] for r in rounds]
    print(f'prototype {A[1][t][2]} CPU / wall, T={t}: {[round(x, 2) for x in c]}')
PY
