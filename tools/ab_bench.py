#!/usr/bin/env python3
"""Interleaved A/B comparison of depengine-bench binaries.

Runs each binary once per round, in turn (A B A B ...), with the same
workload flags, and reports, for every case and binary, quantiles over the
rounds: the median of the run medians, their first quartile, the median of
the run minimums and the lowest minimum. It also reports the median of the
per-round ratios to the first binary.

Why quantiles over many rounds: on the shared 2-vCPU VM the host moves the
vCPUs between placements whose core-to-core transfer differs about 4x, and a
whole run usually stays in one of them (docs/performance.md, "Measuring on this
machine"). One median of 5 then says more about the placement than about
the engine. A gain that does not show in the lower quantiles as well is
noise.

Usage:
  tools/ab_bench.py [--rounds=N] [--only=W1,W2,...] [--n-scale=X]
                    [--engines=per-device] [--workers=2] BIN_A BIN_B [BIN_C ...]
Build the two binaries from two checkouts (e.g. `git worktree add`), each
`cmake --build <dir> --target depengine-bench`. Exit status 1 when a run
failed its check or did not finish.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def quantile(values, q):
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


def run_once(binary, args, json_path):
    cmd = [binary, f"--engines={args.engines}", f"--workers={args.workers}", "--no-memory",
           f"--only={args.only}", f"--n-scale={args.n_scale}", f"--json={json_path}"]
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        sys.exit(f"ab_bench: {' '.join(cmd)} exited with {done.returncode}:\n{done.stderr}")
    with open(json_path, encoding="utf-8") as f:
        report = json.load(f)
    figures = {}
    for row in report["rows"]:
        if not row.get("ok", False):
            sys.exit(f"ab_bench: {binary}: {row['case']} on {row['engine']} failed its check")
        key = (row["title"], row["engine"])
        figures[key] = (row["ns_per_op"]["median"], row["ns_per_op"]["min"])
    return figures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--only", default="W1,W2,W3,W5")
    parser.add_argument("--n-scale", default="1")
    parser.add_argument("--engines", default="per-device")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("binaries", nargs="+")
    args = parser.parse_args()
    if len(args.binaries) < 2:
        parser.error("give at least two depengine-bench binaries")
    for b in args.binaries:
        if not os.access(b, os.X_OK):
            parser.error(f"{b} is not an executable")

    # results[binary][case] = [(median, min) per round]
    # Paths, not names: subprocess would look a bare name up on PATH.
    args.binaries = [os.path.abspath(b) for b in args.binaries]
    results = {b: {} for b in args.binaries}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for i, b in enumerate(args.binaries):
                with open("/proc/loadavg", encoding="utf-8") as f:
                    load = f.read().split()[0]
                print(f"round {r + 1}/{args.rounds}: {b} (load {load})", file=sys.stderr)
                for key, fig in run_once(b, args, os.path.join(tmp, f"{i}.json")).items():
                    results[b].setdefault(key, []).append(fig)

    base = args.binaries[0]
    print(f"{args.rounds} interleaved rounds; ns/op (W4 at T > 0 included as ns/op); "
          "ratio: the median over rounds of this binary's run median / the first's")
    print()
    print("| case | engine | binary | median of medians | first quartile | median of minimums "
          "| lowest minimum | ratio to first |")
    print("|---|---|---|--:|--:|--:|--:|--:|")
    for key in results[base]:
        for b in args.binaries:
            runs = results[b].get(key)
            if not runs:
                continue
            medians = [m for m, _ in runs]
            minimums = [m for _, m in runs]
            ratio = ""
            if b != base:
                pairs = zip(medians, (m for m, _ in results[base][key]))
                ratio = f"{statistics.median(x / y for x, y in pairs):.3f}"
            print(f"| {key[0]} | {key[1]} | {b} | {statistics.median(medians):.1f} | "
                  f"{quantile(medians, 0.25):.1f} | {statistics.median(minimums):.1f} | "
                  f"{min(minimums):.1f} | {ratio} |")


if __name__ == "__main__":
    main()
