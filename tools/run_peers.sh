#!/bin/sh
# Builds depengine with its peers (bench/peers) and runs depengine-peers:
# W1-W6 of ../shared/WORKLOADS.md on depengine, OpenMP (libgomp and libomp),
# StarPU and oneTBB in one run, engines interleaved. Writes
# docs/benchmarks/peers.json, peers.md and the figures of docs/benchmarks.md
# (the peers' own output goes to <build>/peers.log). About 6-7 minutes on 2
# idle cores.
#
# usage: tools/run_peers.sh [depengine-peers options]
#   tools/run_peers.sh --quick                 # smoke test, sizes x 0.01, seconds
#   tools/run_peers.sh --only=W1,W6            # some workloads
#   tools/run_peers.sh --out=/tmp/peers        # somewhere else than docs/benchmarks
# environment: BUILD_DIR (default build-peers), JOBS (default 2)
# exit status: depengine-peers' (1 when a run failed its check or errored,
# 2 on a bad flag), or the build's
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-peers}
out=$root/docs/benchmarks
for arg in "$@"; do
  case "$arg" in
    --out=*) out=${arg#--out=} ;;
    --quick) [ "$out" = "$root/docs/benchmarks" ] && out=$build/peers-quick ;;
  esac
done

# The peers come from Debian: as root, install them (and the build's own
# packages); otherwise say what is missing. The build skips any peer that is.
if [ "$(id -u)" -eq 0 ]; then
  "$root/tools/setup.sh" --peers
fi
missing=""
pkg-config --exists starpu-1.3 2>/dev/null || pkg-config --exists starpu-1.4 2>/dev/null ||
  missing="$missing libstarpu-dev"
[ -e /usr/include/oneapi/tbb.h ] || [ -e /usr/local/include/oneapi/tbb.h ] || missing="$missing libtbb-dev"
[ -e /usr/include/lapacke.h ] || missing="$missing liblapacke-dev"
ls /usr/lib/*/libopenblas.so >/dev/null 2>&1 || missing="$missing libopenblas-dev"
command -v clang++ >/dev/null 2>&1 || missing="$missing clang"
ls /usr/lib/llvm-*/lib/libomp.so >/dev/null 2>&1 || ls /usr/lib/*/libomp.so >/dev/null 2>&1 ||
  missing="$missing libomp-dev"
command -v gnuplot >/dev/null 2>&1 || missing="$missing gnuplot"
if [ -n "$missing" ]; then
  echo "run_peers.sh: not installed:$missing; the peers that need them are skipped." >&2
  echo "  to install, as root: tools/setup.sh --peers" >&2
  echo "  (apt-get update && apt-get install -y$missing pkg-config)" >&2
fi

generator=""
command -v ninja >/dev/null 2>&1 && generator="-G Ninja"
# shellcheck disable=SC2086
cmake -S "$root" -B "$build" $generator -DCMAKE_BUILD_TYPE=Release \
  -DDEPENGINE_BUILD_TESTS=OFF -DDEPENGINE_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" --target depengine-peers -j "${JOBS:-2}" >&2

driver=$(find "$build" -name depengine-peers -type f -perm -u+x | head -1)
[ -n "$driver" ] || { echo "run_peers.sh: depengine-peers was not built" >&2; exit 1; }
# Status 1: a run failed its check or errored (no figure for it); the tables
# are written all the same, so the figures are drawn before passing it on.
# Status 2: a bad flag, nothing ran.
status=0
"$driver" --out="$out" --log="$build/peers.log" "$@" || status=$?
[ "$status" -eq 2 ] && exit 2

if command -v gnuplot >/dev/null 2>&1 && [ -r "$out/peers.json" ]; then
  sh "$root/tools/plot/plot_peers.sh" "$out/peers.json" "$out" || {
    echo "run_peers.sh: the plots failed" >&2
    [ "$status" -eq 0 ] && status=1
  }
fi
exit "$status"
