#!/bin/bash
# Interleaved rounds of the ticket prototype and depengine's per-device engine
# (docs/performance.md, "A ticket tracker: measured prototype"). Each round runs, in
# this order: A = the prototype (floor-W2, W1, W2, W5, W5x4096; affinity
# routing), B = depengine-bench W1, W2, W5 (per-device, 2 workers), R = the
# prototype with round-robin routing and W2 with K = 4,095, L = the prototype
# with locked ticket and slot claims, U = the prototype with rings large
# enough that a push never waits. Then it prints, per case, the median over
# rounds of each run's median, and the per-round ratios depengine / prototype.
# Usage: [BUILD=build] bench/experiments/ticket_interleaved.sh [ROUNDS=8] [OUTDIR]
# (from the repository root, after ninja -C $BUILD depengine-bench
# depengine-ticket-proto).
set -euo pipefail
ROUNDS=${1:-8}
OUT=${2:-$(mktemp -d /tmp/ticket-interleaved.XXXXXX)}
BUILD=${BUILD:-build}
P=$BUILD/bench/depengine-ticket-proto
D=$BUILD/bench/depengine-bench
mkdir -p "$OUT"
for r in $(seq 1 "$ROUNDS"); do
  echo "round $r $(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/log.txt"
  $P --only=floor-W2,W1,W2,W5,W5x4096 > "$OUT/A$r.txt"
  $D --only=W1,W2,W5 --engines=per-device --workers=2 --no-memory > "$OUT/B$r.txt" 2>/dev/null
  { $P --policy=rr --only=W1,W2,W5; $P --only=W2 --k=4095 --n2=1048320
    $P --only=W2 --k=4095 --n2=1048320 --policy=rr; } > "$OUT/R$r.txt"
  $P --locked --only=W1,W2,W5 > "$OUT/L$r.txt"
  $P --ring=1048576 --only=W1,W2,W5 > "$OUT/U$r.txt"
done
echo "outputs in $OUT"
python3 - "$OUT" "$ROUNDS" <<'PY'
import re, statistics as st, sys
d, n = sys.argv[1], int(sys.argv[2])
rounds = range(1, n + 1)
def proto(f):
    out = {}
    for line in open(f):
        m = re.match(r'\|\s*(\S+)\s*\|\s*(\S+)\s*\|\s*([\d.]+)\s*\|[^|]*\|\s*([\d.]+)\s*\|\s*(checks passed)?', line)
        if m and m.group(5):
            key = m.group(1) + '/' + m.group(2)
            while key in out: key += "'"
            out[key] = float(m.group(3))
        elif 'FAILED' in line: sys.exit('a check failed: ' + f)
    return out
def bench(f):
    out = {}
    for line in open(f):
        m = re.match(r'\| (W\S+)[^|]*?(, (\d+) operators?)? \| ThreadedEnginePerDevice \| [\d,]+ \| ([\d.,]+) \|', line)
        if m: out[m.group(1) + ('x' + m.group(3) if m.group(3) else '')] = float(m.group(4).replace(',', ''))
    return out
res = {}
for tag, label in [('A', 'prototype'), ('R', 'prototype'), ('L', 'prototype --locked'), ('U', 'prototype --ring=1048576')]:
    runs = {r: proto(f'{d}/{tag}{r}.txt') for r in rounds}
    for k in runs[1]:
        v = [runs[r][k] for r in rounds]
        res[(tag, k)] = v
        print(f'{label:26s} {k:22s} median {st.median(v):6.1f}  rounds {v}')
B = {r: bench(f'{d}/B{r}.txt') for r in rounds}
for k in B[1]:
    v = [B[r][k] for r in rounds]
    print(f'{"depengine per-device":26s} {k:22s} median {st.median(v):6.1f}  rounds {v}')
for b, a in [('W1', 'W1/affinity'), ('W2', 'W2/affinity'), ('W5x1', 'W5/affinity'),
             ('W5x4096', 'W5x4096/affinity'), ('W2', 'floor-W2/rr')]:
    rs = [B[r][b] / res[('A', a)][r - 1] for r in rounds]
    print(f'ratio depengine {b} / prototype {a}: median {st.median(rs):.2f}  rounds {[round(x, 2) for x in rs]}')
PY
