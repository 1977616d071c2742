#!/usr/bin/env bash
# Clang's thread-safety analysis over the engine's lock annotations
# (GUARDED_BY, REQUIRES, ACQUIRE... in src/common/thread_annotations.h), as
# errors: -DDEPENGINE_THREAD_SAFETY=ON -DDEPENGINE_WERROR=ON adds
# -Wthread-safety -Werror (with -Wall -Wextra) to every depengine target.
# Then the whole ctest suite runs in that build (Clang, assertions on).
#
# First it proves the check is live: a probe that reads a GUARDED_BY field
# without its lock must fail to compile.
# Usage: tools/ci/thread-safety.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$DEPENGINE_ROOT"

ensure_packages "${BASE_PACKAGES[@]}"

phase_start "thread-safety: probe"
probe_log=$(mktemp)
if clang++ -std=c++20 -fsyntax-only -Wthread-safety -Werror -I src -I include \
     tools/ci/thread_safety_probe.cc >"$probe_log" 2>&1; then
  echo "thread-safety probe compiled: -Wthread-safety is not checking the annotations" >&2
  note_failure "thread-safety: the probe compiled (the analysis is not live)"
  exit 1
fi
grep -q "Wthread-safety" "$probe_log" || { cat "$probe_log" >&2; exit 1; }
rm -f "$probe_log"
phase_end

dir=build-tsa
release_build_dir_on_exit "$dir"
phase_start "thread-safety: configure + build ($dir)"
configure "$dir" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g -gz" \
  -DDEPENGINE_THREAD_SAFETY=ON -DDEPENGINE_WERROR=ON -DDEPENGINE_BUILD_BENCH=OFF
build "$dir"
phase_end

phase_start "thread-safety: ctest"
status=0
run_ctest "$dir" || status=1
phase_end
phase_report
exit $status
