#!/usr/bin/env bash
# Builds the libFuzzer target (Clang, ASan + UBSan, coverage on the engine
# too) in build-fuzz and fuzzes for DEPENGINE_FUZZ_SECONDS (default 60),
# starting from the committed seed corpus tools/fuzz/corpus. New inputs go
# to build-fuzz/corpus (never into the repo); a failing input is saved in
# build-fuzz/artifacts and its program printed.
#
# Usage: tools/ci/fuzz.sh                 fuzz for DEPENGINE_FUZZ_SECONDS
#        tools/ci/fuzz.sh --merge         fold build-fuzz/corpus into the
#                                         committed corpus (minimized)
# Extra libFuzzer flags: DEPENGINE_FUZZ_FLAGS="-jobs=2 -workers=2".
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$DEPENGINE_ROOT"

ensure_packages "${BASE_PACKAGES[@]}"

dir=build-fuzz
release_build_dir_on_exit "$dir" artifacts fuzz.log
phase_start "fuzz: configure + build ($dir)"
configure "$dir" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g -gz" \
  -DDEPENGINE_SANITIZE=address,undefined,fuzzer-no-link -DDEPENGINE_BUILD_FUZZER=ON \
  -DDEPENGINE_BUILD_TESTS=OFF -DDEPENGINE_BUILD_BENCH=OFF -DDEPENGINE_BUILD_EXAMPLES=OFF \
  -DDEPENGINE_OPS=OFF
build "$dir" depengine_fuzzer depengine_fuzz_replay
phase_end

fuzzer=$dir/tools/fuzz/depengine_fuzzer
seeds=tools/fuzz/corpus
work=$dir/corpus
mkdir -p "$work" "$dir/artifacts"
export ASAN_OPTIONS="detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

if [[ "${1:-}" == "--merge" ]]; then
  phase_start "fuzz: merge $work into $seeds"
  "$fuzzer" -merge=1 -max_len=4096 "$seeds" "$work"
  phase_end
  phase_report
  exit 0
fi

seconds=${DEPENGINE_FUZZ_SECONDS:-60}
phase_start "fuzz: ${seconds} s"
log=$dir/fuzz.log
status=0
# shellcheck disable=SC2086
"$fuzzer" "$work" "$seeds" -max_total_time="$seconds" -timeout=60 -max_len=4096 \
  -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$dir/artifacts/" \
  ${DEPENGINE_FUZZ_FLAGS:-} >"$log" 2>&1 || status=$?
grep -E "^#[0-9]+.*(DONE|pulse)|^stat::|depengine-fuzz totals" "$log" | tail -12 || true
if [[ $status -ne 0 ]]; then
  tail -80 "$log"
  echo "fuzz: FAILED (libFuzzer exit $status); inputs in $dir/artifacts:" >&2
  note_failure "fuzz: libFuzzer exit $status (inputs in $dir/artifacts)"
  ls "$dir/artifacts" >&2
  echo "replay one with: $dir/tools/fuzz/depengine_fuzz_replay $dir/artifacts/<file>" >&2
  echo "then copy it to tools/fuzz/regressions/ (ctest replays that folder)" >&2
fi
phase_end
phase_report
[[ $status -eq 0 ]] && echo "fuzz: 1 passed, 0 failed" || echo "fuzz: 0 passed, 1 failed"
exit $status
