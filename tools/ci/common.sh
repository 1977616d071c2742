#!/usr/bin/env bash
# Shared by the scripts in tools/ci: package checks, configure/build/test
# helpers and timing. Source it; do not run it.
#
# Environment:
#   DEPENGINE_CI_JOBS   parallel build and test jobs (default 2: the CI machine)
#   DEPENGINE_CI_FRESH  1 = delete the build directory first
#   DEPENGINE_CI_CLEAN  1 = delete each build directory once its stage is
#                       over (.ci/run sets it: see release_build_dir)

set -euo pipefail

DEPENGINE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
JOBS=${DEPENGINE_CI_JOBS:-2}

# ci_log MESSAGE: a timestamped line on stderr.
ci_log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# ensure_packages PKG...: installs the Debian packages that are missing, as
# root with apt-get; otherwise prints the command to run and fails.
ensure_packages() {
  if ! command -v dpkg-query >/dev/null 2>&1; then
    ci_log "not a Debian system: make sure these are installed: $*"
    return 0
  fi
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  local cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y ${missing[*]}"
  if [[ $(id -u) -eq 0 ]]; then
    ci_log "installing ${missing[*]}"
    bash -c "$cmd" >/dev/null
  else
    echo "missing packages; run as root:" >&2
    echo "  $cmd" >&2
    exit 1
  fi
}

# The packages every build here needs (clang for the sanitizer, analysis and
# fuzz builds; libclang-rt-14-dev holds the sanitizer and libFuzzer runtimes).
BASE_PACKAGES=(cmake ninja-build g++ clang libclang-rt-14-dev libgtest-dev libgmock-dev)

# What tools/setup.sh installs: every build of the whole tree with its tests
# (the operator layer's OpenBLAS, the profiler tests' JSON reader, the
# install test's pkg-config, the SPIN models, the plots, callgrind).
SETUP_PACKAGES=("${BASE_PACKAGES[@]}" pkg-config libbenchmark-dev libopenblas-dev liblapacke-dev
                graphviz gnuplot nlohmann-json3-dev python3 valgrind spin)

# configure DIR CMAKE_ARGS...: configures DIR with Ninja (fresh when
# DEPENGINE_CI_FRESH=1).
configure() {
  local dir=$1
  shift
  if [[ "${DEPENGINE_CI_FRESH:-0}" == 1 ]]; then rm -rf "$dir"; fi
  mkdir -p "$dir"
  rm -f "$dir/.released"
  cmake -S "$DEPENGINE_ROOT" -B "$dir" -G Ninja "$@" >"$dir/configure.log" 2>&1 || {
    cat "$dir/configure.log" >&2
    note_failure "configure ($dir)"
    return 1
  }
}

# release_build_dir DIR [KEEP...]: with DEPENGINE_CI_CLEAN=1, deletes DIR
# once its stage is over, except the entries KEEP names (relative to DIR),
# and logs how much disk that gave back. The CI machine's disk is not ours
# to size (one CI run died of "No space left on device" with every build
# kept), so .ci/run holds one build at a time. Without DEPENGINE_CI_CLEAN,
# builds stay for the next incremental run.
release_build_dir() {
  local dir=$1
  shift
  [[ "${DEPENGINE_CI_CLEAN:-0}" == 1 && -d "$dir" && ! -e "$dir/.released" ]] || return 0
  local mib keep=() entry
  mib=$(du -sm "$dir" | cut -f1) || mib="?"
  for entry in "$@"; do keep+=(! -name "$entry"); done
  find "$dir" -mindepth 1 -maxdepth 1 "${keep[@]}" -exec rm -rf {} + || true
  touch "$dir/.released"
  ci_log "removed $dir (${mib} MiB)${*:+, kept $*}; $(df -m --output=avail "$dir" | tail -1 | tr -d ' ') MiB free"
}

# release_build_dir_on_exit DIR [KEEP...]: the same when the script ends, on
# every path out of it (a failed build under set -e included).
release_build_dir_on_exit() {
  local args
  printf -v args '%q ' "$@"
  # shellcheck disable=SC2064  # expand now: the script's variables change
  trap "release_build_dir $args || true" EXIT
}

# build DIR [TARGET...]
build() {
  local dir=$1
  shift
  local targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  cmake --build "$dir" -j "$JOBS" "${targets[@]}" || {
    note_failure "build ($dir)${targets[*]:+: $*}"
    return 1
  }
}

# build_keep_going DIR: builds everything it can (ninja -k 0), so that one
# target that fails to build does not hide the results of all the others.
# Fails when any target failed.
build_keep_going() {
  local dir=$1
  local log="$dir/build.log"
  if cmake --build "$dir" -j "$JOBS" -- -k 0 2>&1 | tee "$log"; then return 0; fi
  local target
  while read -r target; do
    note_failure "build ($dir): $target"
  done < <(sed -n 's/^FAILED: //p' "$log")
  return 1
}

# run_ctest DIR CTEST_ARGS...: the whole suite, in parallel, printing the
# output of failed tests.
# Each failed test is also noted for the summary (see note_failure).
run_ctest() {
  local dir=$1
  shift
  if (cd "$dir" && ctest -j "$JOBS" --output-on-failure --timeout 600 "$@"); then return 0; fi
  local failed="$dir/Testing/Temporary/LastTestsFailed.log" line
  if [[ -f "$failed" ]]; then
    while read -r line; do note_failure "test ($dir): ${line#*:}"; done <"$failed"
  else
    note_failure "ctest ($dir) failed"
  fi
  return 1
}

# Phase timing: phase_start NAME ... phase_end; phase_report prints all.
PHASES=()
phase_start() { PHASE_NAME=$1; PHASE_T0=$SECONDS; ci_log "== $1"; }
phase_end() {
  local dt=$((SECONDS - PHASE_T0))
  PHASES+=("$(printf '%-44s %5d s' "$PHASE_NAME" "$dt")")
  ci_log "== $PHASE_NAME: ${dt} s"
}
# note_failure WHAT: one line for the summary phase_report ends with. CI
# shows the tail of its output, so what failed must be named there, not only
# in a test's output thousands of lines above.
# With DEPENGINE_CI_FAILURES_FILE set (.ci/run sets it), each line is also
# appended there, for the summary at the very end of a CI run.
FAILURES=()
note_failure() {
  FAILURES+=("$1")
  if [[ -n "${DEPENGINE_CI_FAILURES_FILE:-}" ]]; then echo "$1" >>"$DEPENGINE_CI_FAILURES_FILE"; fi
}
phase_report() {
  echo "---- timings ----"
  printf '%s\n' "${PHASES[@]}"
  if [[ ${#FAILURES[@]} -gt 0 ]]; then
    echo "---- failed ----"
    printf '%s\n' "${FAILURES[@]}"
  fi
}
