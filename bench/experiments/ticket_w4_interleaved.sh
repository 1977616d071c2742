#!/bin/bash
# Interleaved rounds of the ticket prototype's W4 and depengine's per-device
# engine on W4 (docs/performance.md, "W4 with reads and several vars"). Each round
# runs, in this order: A = the prototype's W4 at T = 0, 1, 10 us with the
# routing chosen for W4 (affinity by written var, resumed functions handed to
# their home worker, idle workers steal: --resume=home --steal), B =
# depengine-bench --only=W4 (per-device, 2 workers), then the prototype's
# other routings: H = --resume=home without steal, S = --steal without home
# hand-off, P = plain affinity (the completer runs what it makes due, no
# steal), Q<N> = --resume=short:N (hand home only while the home worker's
# ready list holds fewer than N nodes; Q alone: the default N), R<N> = the
# same with --steal. Then it prints, per case, the median over rounds of each
# run's median of 5 (after 1 warm-up), efficiencies, the pusher's CPU per
# function, the per-round ratios depengine / prototype and variant / A, and
# the process's CPU time over wall time per round (about 2 when the machine
# gave the process both cores).
# Usage: [BUILD=build] [VARIANTS="H S P"] [DEPENGINE=0]
#   bench/experiments/ticket_w4_interleaved.sh [ROUNDS=3] [OUTDIR]
# (ANALYZE_ONLY=1: only print the summary of the runs already in OUTDIR;
# DEPENGINE=0: skip B, so only depengine-ticket-proto need be built.)
# (from the repository root, after ninja -C $BUILD depengine-bench
# depengine-ticket-proto).
set -euo pipefail
ROUNDS=${1:-3}
OUT=${2:-$(mktemp -d /tmp/ticket-w4.XXXXXX)}
BUILD=${BUILD:-build}
VARIANTS=${VARIANTS-H S P}
DEPENGINE=${DEPENGINE:-1}
P=$BUILD/bench/depengine-ticket-proto
D=$BUILD/bench/depengine-bench
mkdir -p "$OUT"
w4() { for t in 0 1 10; do $P --only=W4 --t=$t "$@" | grep '^| W4'; done; }
for r in $(seq 1 "$ROUNDS"); do
  [ -n "${ANALYZE_ONLY:-}" ] && break
  echo "round $r $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/log.txt"
  w4 --resume=home --steal > "$OUT/A$r.txt"
  if [ "$DEPENGINE" != 0 ]; then
    $D --only=W4 --engines=per-device --workers=2 --no-memory > "$OUT/B$r.txt" 2>/dev/null
  fi
  for v in $VARIANTS; do
    case $v in
      H) w4 --resume=home > "$OUT/H$r.txt" ;;
      S) w4 --steal > "$OUT/S$r.txt" ;;
      P) w4 > "$OUT/P$r.txt" ;;
      Q*) n=${v#Q}; w4 --resume=short${n:+:$n} > "$OUT/$v$r.txt" ;;
      R*) n=${v#R}; w4 --resume=short${n:+:$n} --steal > "$OUT/$v$r.txt" ;;
      *) echo "unknown variant $v" >&2; exit 2 ;;
    esac
  done
done
echo "outputs in $OUT"
python3 - "$OUT" "$ROUNDS" "$VARIANTS" "$DEPENGINE" <<'PY'
import re, statistics as st, sys
d, n, variants, with_b = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4] != '0'
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
V = {v: {r: proto(f'{d}/{v}{r}.txt') for r in rounds} for v in variants}
show('prototype ' + A[1][0][2], A)
if with_b:
    B = {r: bench(f'{d}/B{r}.txt') for r in rounds}
    show('depengine per-device', B)
for v in variants:
    show('prototype ' + V[v][1][0][2], V[v])
if with_b:
    for tag in ['A'] + variants:
        R = A if tag == 'A' else V[tag]
        for t in (0, 1, 10):
            rs = [B[r][t] / R[r][t][0] for r in rounds]
            print(f'ratio depengine / prototype {R[1][t][2]} wall, T={t}: median {st.median(rs):.2f}  rounds {[round(x, 2) for x in rs]}')
# Each variant against A in the same round: wall time variant / A (at T > 0
# the inverse of the efficiency ratio).
for v in variants:
    for t in (0, 1, 10):
        rs = [V[v][r][t][0] / A[r][t][0] for r in rounds]
        print(f'ratio wall {V[v][1][t][2]} / {A[1][t][2]}, T={t}: median {st.median(rs):.3f}  rounds {[round(x, 3) for x in rs]}')
# Cores the prototype's process had: its CPU time over wall time, per round.
for tag in ['A'] + variants:
    R = A if tag == 'A' else V[tag]
    for t in (0, 1, 10):
        c = [R[r][t][3] / R[r][t][0] for r in rounds]
        print(f'prototype {R[1][t][2]} CPU / wall, T={t}: median {st.median(c):.2f}  rounds {[round(x, 2) for x in c]}')
PY
