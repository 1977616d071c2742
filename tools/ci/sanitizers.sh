#!/usr/bin/env bash
# Builds depengine under each sanitizer and runs the whole ctest suite in
# each build:
#   build-tsan   -DDEPENGINE_SANITIZE=thread
#   build-asan   -DDEPENGINE_SANITIZE=address,undefined (LeakSanitizer on)
# Usage: tools/ci/sanitizers.sh [thread|address,undefined]...   (default: both)
# Assertions stay on (-O1 -g -gz, no NDEBUG; -gz compresses the debug info:
# build-tsan 941 -> 522 MiB, build-asan 1,720 -> 1,184 MiB). Every finding
# fails the test that hit it (halt_on_error). See docs/reliability.md.
#
# The compiler is GCC by default: its sanitizer runtimes are shared
# libraries, so a test may replace the global operator new (the allocation
# counting tests do), which Clang's static runtimes reject as a duplicate
# definition. DEPENGINE_CI_SANITIZER_COMPILER=clang uses Clang instead.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$DEPENGINE_ROOT"

ensure_packages "${SETUP_PACKAGES[@]}"

sanitizers=("$@")
[[ ${#sanitizers[@]} -eq 0 ]] && sanitizers=(thread address,undefined)

supp="$DEPENGINE_ROOT/tools/ci/tsan.supp"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp${TSAN_OPTIONS:+:$TSAN_OPTIONS}"
export ASAN_OPTIONS="detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

case "${DEPENGINE_CI_SANITIZER_COMPILER:-gcc}" in
  gcc) cc=gcc cxx=g++ ;;
  clang) cc=clang cxx=clang++ ;;
  *) echo "DEPENGINE_CI_SANITIZER_COMPILER must be gcc or clang" >&2; exit 2 ;;
esac

status=0
for san in "${sanitizers[@]}"; do
  case "$san" in
    thread) dir=build-tsan; scale=${DEPENGINE_TEST_SCALE:-0.25} ;;
    address,undefined) dir=build-asan; scale=${DEPENGINE_TEST_SCALE:-0.5} ;;
    *) echo "unknown sanitizer set '$san' (expected thread or address,undefined)" >&2; exit 2 ;;
  esac
  release_build_dir_on_exit "$dir"
  phase_start "$san: configure + build ($dir)"
  configure "$dir" -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g -gz" \
    -DDEPENGINE_SANITIZE="$san" -DDEPENGINE_BUILD_BENCH=OFF
  if ! build_keep_going "$dir"; then
    ci_log "$san: some targets failed to build; running the tests that did build"
    status=1
  fi
  phase_end
  phase_start "$san: ctest"
  if ! DEPENGINE_TEST_SCALE=$scale run_ctest "$dir"; then
    status=1
  fi
  phase_end
  release_build_dir "$dir"
done
phase_report
exit $status
