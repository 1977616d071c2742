#!/usr/bin/env bash
# Tests tools/ci/common.sh's release_build_dir and release_build_dir_on_exit:
# what .ci/run relies on to hold one build at a time on the CI machine's
# disk. Usage: release_build_dir_test.sh SOURCE_DIR SCRATCH_DIR
set -euo pipefail
source_dir=$1
scratch=$2
common="$source_dir/tools/ci/common.sh"
rm -rf "$scratch"
mkdir -p "$scratch"
cd "$scratch"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# make_build DIR: a build directory with a big file, a subfolder, the fuzz
# stage's keepers and a dot file.
make_build() {
  mkdir -p "$1/sub/deeper" "$1/artifacts"
  head -c 100000 /dev/zero >"$1/big.o"
  echo x >"$1/sub/deeper/f"
  echo log >"$1/fuzz.log"
  echo crash >"$1/artifacts/crash-1"
  echo y >"$1/.ninja_log"
}

listing() { (cd "$1" && find . -mindepth 1 | LC_ALL=C sort | tr '\n' ' '); }

# 1. Without DEPENGINE_CI_CLEAN nothing is deleted.
make_build b1
before=$(listing b1)
(unset DEPENGINE_CI_CLEAN; source "$common"; release_build_dir b1) 2>/dev/null
[[ "$(listing b1)" == "$before" ]] || fail "deleted without DEPENGINE_CI_CLEAN: $(listing b1)"

# 2. With it, everything goes but the entries named, and a second call is a
#    no-op that logs nothing.
make_build b2
(export DEPENGINE_CI_CLEAN=1; source "$common"; release_build_dir b2 artifacts fuzz.log) 2>log2
got=$(listing b2)
[[ "$got" == "./.released ./artifacts ./artifacts/crash-1 ./fuzz.log " ]] || fail "kept: $got"
grep -q "removed b2" log2 || fail "no log line: $(cat log2)"
(export DEPENGINE_CI_CLEAN=1; source "$common"; release_build_dir b2 artifacts fuzz.log) 2>log2b
[[ ! -s log2b ]] || fail "second release logged: $(cat log2b)"

# 3. Without KEEP the directory is emptied but for the marker.
make_build b3
(export DEPENGINE_CI_CLEAN=1; source "$common"; release_build_dir b3) 2>/dev/null
[[ "$(listing b3)" == "./.released " ]] || fail "left: $(listing b3)"

# 4. On exit: a stage that fails under set -e still releases its build and
#    keeps its exit status; one that succeeds keeps 0.
make_build b4
cat >stage.sh <<STAGE
source "$common"
release_build_dir_on_exit b4 "name with space"
mkdir -p "b4/name with space"
[[ "\$1" == ok ]] || false
echo "not reached when failing" >reached
STAGE
set +e
DEPENGINE_CI_CLEAN=1 bash stage.sh fail 2>/dev/null
rc=$?
set -e
[[ $rc -eq 1 ]] || fail "a failing stage exited $rc, not 1"
[[ ! -e reached ]] || fail "set -e did not stop the stage"
[[ "$(listing b4)" == "./.released ./name with space " ]] || fail "after a failing stage: $(listing b4)"
make_build b4
rm -f b4/.released
DEPENGINE_CI_CLEAN=1 bash stage.sh ok 2>/dev/null || fail "a passing stage exited $?"
[[ "$(listing b4)" == "./.released ./name with space " ]] || fail "after a passing stage: $(listing b4)"

echo "release_build_dir: 4 checks passed"
