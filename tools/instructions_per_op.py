#!/usr/bin/env python3
"""Instructions per op of the engine's own path, counted by callgrind.

Runs depengine-bench under valgrind's callgrind on the naive engine and
counts the instructions executed inside the timed region (the harness's
TimePushes: the workload's push loop and WaitForAll). The naive engine
runs every function inline on the pushing thread with the same tracker,
block pool and completion code as the threaded engines, so the count per
op is the length of the whole path (push, dependency tracking, run,
completion, recycling), plus the workload's own loop and body, which do not
change between engine builds.

Why: on the shared 2-vCPU VM wall time moves up to 3x between runs of one
binary (docs/performance.md, "Measuring on this machine"), so a change of a few
percent in the path's length does not show in a timing. An instruction count
is exact and repeatable: two builds differ only where their code differs.
It is not a timing: a cache miss or a contended line costs no instructions,
so a change that adds misses can lower the count and still be slower.
Check the wall time with tools/ab_bench.py as well.

--side=worker counts a worker's share instead: the per-device engine with 2
workers, and the instructions inside ThreadedEngine::Execute (the function,
its completion, the grants and recycling it does), per function run. On a
chain (W1, W5 with one operator) that is the pace-setting thread's path,
which the naive engine's count mixes with the pusher's. Callgrind runs one
thread at a time, so whether the pusher ran ahead can differ from a real run,
and from one count to the next: three runs of one binary agreed within 1% on
W1, W4 and W5, within 6% on W2 (whether a var's next function is already
queued when its last one completes changes the path). A function run inline
inside another's Execute (kAsync) would turn the collection off while it
runs (callgrind toggles on each entry); W1-W5 push none.

Usage:
  tools/instructions_per_op.py [--side=path|worker] [--only=W1,W2,...]
                               [--n-scale=X] BIN [BIN ...]
BIN: depengine-bench binaries; with several, a column each, and the ratio of
each to the first. Needs valgrind (apt-get install valgrind). Exit status 1
when a run failed.

The budget (bench/instruction_budget.json): the counts of both sides for the
default cases, as the Release build of the toolchain it names gave them. The
ctest test `instruction_budget` runs
  tools/instructions_per_op.py --check=bench/instruction_budget.json \
                               --toolchain=DESC BIN
which fails (exit 1) when a case counts more than its budget plus the
side's margin: a longer hot path shows up in the test suite, where a timing
on this machine could not show it. A build whose toolchain description
differs from the budget's is not compared (exit 77, which ctest reports as
skipped): another compiler or other flags give other counts. A change that
lengthens or shortens the path on purpose records the new counts with
  tools/instructions_per_op.py --write-budget=bench/instruction_budget.json \
                               --toolchain=DESC BIN
in the same commit (the test prints DESC), so the history of that file is
the history of the path's length.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Small enough that callgrind (about 50x slower) takes seconds per case,
# large enough that the engine's setup is a small part of the count.
DEFAULT_ONLY = "W1,W2,W3,W4.T0,W5.x1,W5.x4096"
DEFAULT_N_SCALE = "0.02"


# What each --side counts: the function whose instructions (with its
# callees') are collected, and the engine it runs on.
SIDES = {
    "path": ("*internal::TimePushes*", ["--engines=naive"]),
    "worker": ("*ThreadedEngine::Execute*", ["--engines=per-device", "--workers=2"]),
}


def count(binary, case, n_scale, side, workdir):
    """Instructions per op of `case` on `side`, and the case's title."""
    out = os.path.join(workdir, "callgrind.out")
    json_path = os.path.join(workdir, "bench.json")
    for stale in glob.glob(out + "*"):
        os.remove(stale)
    collect, engine_flags = SIDES[side]
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
           f"--toggle-collect={collect}", "--dump-line=no",
           binary, *engine_flags, "--no-memory", "--reps=1", f"--only={case}",
           f"--n-scale={n_scale}", f"--json={json_path}"]
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"instructions_per_op: {' '.join(cmd)} exited with {done.returncode}:\n"
                 f"{done.stderr[-2000:]}")
    with open(json_path, encoding="utf-8") as f:
        # W4 with work adds a row that runs no engine (its bodies alone).
        rows = [r for r in json.load(f)["rows"] if r["engine"] != "bodies alone, no engine"]
    if len(rows) != 1 or not rows[0].get("ok", False):
        sys.exit(f"instructions_per_op: {binary}: {case} failed its check or did not run")
    # One warm-up and one timed repetition, both counted (each function of
    # either runs Execute once on the worker side).
    ops = 2 * rows[0]["ops"]
    total = None
    with open(out, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"(?:summary|totals):\s+(\d+)", line)
            if m:
                total = int(m.group(1))
    if not total:
        sys.exit(f"instructions_per_op: no instructions counted inside {collect} ({out}): "
                 "was it inlined into its caller?")
    return rows[0]["title"], total / ops


# How far above its budget a case may count before --check fails. The
# naive engine's path is one thread and counts the same in every run of one
# binary; the worker side depends on whether the pusher ran ahead, which
# callgrind's scheduling varies (see --side above).
BUDGET_MARGIN = {"path": 0.03, "worker": 0.10}
SKIPPED = 77  # ctest's SKIP_RETURN_CODE for the budget test


def measure_budget(binary, workdir):
    """Both sides' counts for the default cases, rounded as the budget keeps them."""
    counts = {}
    for side in sorted(SIDES):
        counts[side] = {}
        for case in DEFAULT_ONLY.split(","):
            _, per_op = count(binary, case, DEFAULT_N_SCALE, side, workdir)
            counts[side][case] = round(per_op, 1)
            print(f"{side} {case}: {per_op:.1f} instructions/op", file=sys.stderr)
    return counts


def write_budget(path, toolchain, binary):
    with tempfile.TemporaryDirectory() as workdir:
        counts = measure_budget(binary, workdir)
    budget = {"toolchain": toolchain, "n_scale": DEFAULT_N_SCALE, **counts}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(budget, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"instructions_per_op: wrote {path} for {toolchain}")


def check_budget(path, toolchain, binary):
    with open(path, encoding="utf-8") as f:
        budget = json.load(f)
    if budget.get("toolchain") != toolchain:
        print(f"instructions_per_op: {path} was recorded with\n  {budget.get('toolchain')}\n"
              f"and this build is\n  {toolchain}\nso their counts are not comparable: not "
              f"checked (--write-budget records a budget for this toolchain)")
        return SKIPPED
    with tempfile.TemporaryDirectory() as workdir:
        counts = measure_budget(binary, workdir)
    over = []
    print("| side | case | budget | counted | ratio | limit |")
    print("|---|---|--:|--:|--:|--:|")
    for side in sorted(SIDES):
        limit_ratio = 1 + BUDGET_MARGIN[side]
        for case, counted in counts[side].items():
            allowed = budget.get(side, {}).get(case)
            if allowed is None:
                over.append(f"{side} {case}: no budget recorded")
                continue
            ratio = counted / allowed
            print(f"| {side} | {case} | {allowed:.1f} | {counted:.1f} | {ratio:.3f} | "
                  f"{limit_ratio:.2f} |")
            if ratio > limit_ratio:
                over.append(f"{side} {case}: {counted:.1f} instructions/op, budget {allowed:.1f} "
                            f"(+{100 * (ratio - 1):.1f}%, margin {100 * BUDGET_MARGIN[side]:.0f}%)")
    if over:
        print("instructions_per_op: over budget:\n  " + "\n  ".join(over) +
              f"\nThe engine's path got longer. If that is meant, record the new counts in the "
              f"same commit:\n  tools/instructions_per_op.py --write-budget={path} "
              f"--toolchain='{toolchain}' {binary}")
        return 1
    print("instructions_per_op: every case within its budget")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--side", choices=sorted(SIDES), default="path")
    parser.add_argument("--only", default=DEFAULT_ONLY)
    parser.add_argument("--n-scale", default=DEFAULT_N_SCALE)
    parser.add_argument("--check", metavar="BUDGET", help="compare with a budget file")
    parser.add_argument("--write-budget", metavar="BUDGET", help="record a budget file")
    parser.add_argument("--toolchain", help="with --check / --write-budget: the build's "
                        "compiler and flags, as the budget names them")
    parser.add_argument("binaries", nargs="+")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("instructions_per_op: valgrind is not installed; as root: tools/setup.sh "
                 "(or apt-get update && apt-get install -y valgrind)")
    if args.check or args.write_budget:
        if args.check and args.write_budget:
            sys.exit("instructions_per_op: --check and --write-budget exclude each other")
        if not args.toolchain or len(args.binaries) != 1:
            sys.exit("instructions_per_op: --check and --write-budget need --toolchain and "
                     "exactly one binary")
        if args.write_budget:
            write_budget(args.write_budget, args.toolchain, args.binaries[0])
            return 0
        return check_budget(args.check, args.toolchain, args.binaries[0])
    cases = args.only.split(",")
    table = {}
    titles = {}
    with tempfile.TemporaryDirectory() as workdir:
        for case in cases:
            for binary in args.binaries:
                title, per_op = count(binary, case, args.n_scale, args.side, workdir)
                titles[case] = title
                table[(case, binary)] = per_op
                print(f"{case}: {binary}: {per_op:.1f} instructions/op", file=sys.stderr)
    where = ("on NaiveEngine (callgrind, inside the timed region" if args.side == "path" else
             "on a worker of ThreadedEnginePerDevice (callgrind, inside Execute")
    print(f"Instructions per op {where}, n-scale {args.n_scale}); ratio: to the first binary\n")
    header = "| case | " + " | ".join(args.binaries) + " |"
    if len(args.binaries) > 1:
        header += " ratio |" * (len(args.binaries) - 1)
    print(header)
    print("|---|" + "--:|" * (2 * len(args.binaries) - 1))
    for case in cases:
        first = table[(case, args.binaries[0])]
        cells = [f"{table[(case, b)]:.1f}" for b in args.binaries]
        cells += [f"{table[(case, b)] / first:.3f}" for b in args.binaries[1:]]
        print(f"| {titles[case]} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
