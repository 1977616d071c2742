#!/usr/bin/env bash
# Builds the stress programs (Release, build-rel-stress) and runs each in its
# own process: the short versions by default (CI), the full ones with --full
# (10M functions over 100k vars; 1M live vars; 1M pending functions behind
# one blocked var; 50 cycles of 1M functions). See docs/reliability.md.
# Usage: tools/ci/stress.sh [--full] [extra depengine_stress flags]
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$DEPENGINE_ROOT"

ensure_packages cmake ninja-build g++

size=--short
if [[ "${1:-}" == "--full" ]]; then
  size=""
  shift
fi

dir=build-rel-stress
release_build_dir_on_exit "$dir"
phase_start "stress: configure + build ($dir)"
configure "$dir" -DCMAKE_BUILD_TYPE=Release -DDEPENGINE_BUILD_TESTS=OFF \
  -DDEPENGINE_BUILD_BENCH=OFF -DDEPENGINE_BUILD_EXAMPLES=OFF -DDEPENGINE_OPS=OFF
build "$dir" depengine_stress
phase_end

status=0
passed=0
failed=0
for program in throughput live-vars pending cycles serializable; do
  phase_start "stress: $program ${size:-full}"
  # shellcheck disable=SC2086
  if "$dir/tools/stress/depengine_stress" "$program" $size "$@"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    status=1
    note_failure "stress: $program"
  fi
  phase_end
done
phase_report
echo "stress: $passed passed, $failed failed"
exit $status
