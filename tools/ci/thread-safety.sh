#!/usr/bin/env bash
# Clang's thread-safety analysis over the engine's lock annotations
# (GUARDED_BY, REQUIRES, ACQUIRE... in src/common/thread_annotations.h), as
# errors: -DDEPENGINE_THREAD_SAFETY=ON -DDEPENGINE_WERROR=ON adds
# -Wthread-safety -Werror (with -Wall -Wextra) to every depengine target.
# Then clang-tidy over the library's sources (src/, with the headers of src/
# and include/depengine/), with the checks of .clang-tidy as errors, and the
# whole ctest suite in that build (Clang, assertions on).
#
# First it proves both checks are live: a probe that reads a GUARDED_BY
# field without its lock must fail to compile, and one that calls strerror
# must fail clang-tidy.
# Usage: tools/ci/thread-safety.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$DEPENGINE_ROOT"

ensure_packages "${SETUP_PACKAGES[@]}" clang-tidy

phase_start "thread-safety: probe"
probe_log=$(mktemp)
if clang++ -std=c++20 -fsyntax-only -Wthread-safety -Werror -I src -I include \
     tools/ci/thread_safety_probe.cc >"$probe_log" 2>&1; then
  echo "thread-safety probe compiled: -Wthread-safety is not checking the annotations" >&2
  note_failure "thread-safety: the probe compiled (the analysis is not live)"
  exit 1
fi
grep -q "Wthread-safety" "$probe_log" || { cat "$probe_log" >&2; exit 1; }
if clang-tidy --quiet --config-file=.clang-tidy tools/ci/clang_tidy_probe.cc -- -std=c++20 \
     >"$probe_log" 2>&1; then
  echo "clang-tidy passed its probe: .clang-tidy's checks are not running as errors" >&2
  note_failure "thread-safety: the clang-tidy probe passed (the checks are not live)"
  exit 1
fi
grep -q "concurrency-mt-unsafe" "$probe_log" || { cat "$probe_log" >&2; exit 1; }
rm -f "$probe_log"
phase_end

dir=build-tsa
release_build_dir_on_exit "$dir"
phase_start "thread-safety: configure + build ($dir)"
configure "$dir" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g -gz" \
  -DDEPENGINE_THREAD_SAFETY=ON -DDEPENGINE_WERROR=ON -DDEPENGINE_BUILD_BENCH=OFF \
  -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
build "$dir"
phase_end

phase_start "thread-safety: clang-tidy (src/)"
status=0
tidy_log="$dir/clang-tidy.log"
# The library's sources as this build compiles them: src/*.cc, and the
# unity file that compiles the hot path's sources together (src/gpu/ only
# with CUDA). One clang-tidy process per file, JOBS at a time; any finding
# fails the stage.
# Anchored to this tree (src/ of the repository, or of the build directory
# for the unity file): a checkout under some other ".../src/..." path must
# not pull in tests, bench or tools.
sed -n 's#^ *"file": "\(.*/src/[^"]*\.\(cc\|cxx\)\)".*#\1#p' "$dir/compile_commands.json" |
  grep -F -e "$DEPENGINE_ROOT/src/" -e "$(cd "$dir" && pwd)/src/" | sort -u >"$dir/tidy-files" || true
if [[ ! -s "$dir/tidy-files" ]]; then
  note_failure "thread-safety: no source of src/ in $dir/compile_commands.json"
  status=1
elif ! xargs -n 1 -P "$JOBS" clang-tidy --quiet --config-file=.clang-tidy -p "$dir" \
       <"$dir/tidy-files" >"$tidy_log" 2>&1; then
  { grep -E "(error|warning):" "$tidy_log" || tail -50 "$tidy_log"; } | sort -u >&2
  note_failure "thread-safety: clang-tidy found problems in src/ (see above)"
  status=1
fi
phase_end

phase_start "thread-safety: ctest"
run_ctest "$dir" || status=1
phase_end
phase_report
exit $status
