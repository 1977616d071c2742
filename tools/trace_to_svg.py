#!/usr/bin/env python3
"""Renders a depengine Chrome trace (DumpProfile) as a static SVG timeline:
one row per thread, one box per function, for documentation pictures.
Usage: trace_to_svg.py TRACE.json OUT.svg"""
import json
import re
import sys
from xml.sax.saxutils import escape


def text(s):
    """`s` as XML character data: markup escaped, and characters XML 1.0 does
    not allow (control characters a function name may hold) replaced."""
    return escape(re.sub("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]", "\ufffd", str(s)))


if len(sys.argv) != 3:
    sys.exit("usage: tools/trace_to_svg.py TRACE.json OUT.svg")
trace = json.load(open(sys.argv[1], encoding="utf-8"))["traceEvents"]
# A row is a (pid, tid): a trace written by several engines (DEPENGINE_PROFILE)
# holds one process per engine, each numbering its threads from 0.
rows = {(e.get("pid"), e["tid"]): e["args"]["name"]
        for e in trace if e.get("ph") == "M" and e.get("name") == "thread_name"}
processes = {e.get("pid"): e["args"]["name"]
             for e in trace if e.get("ph") == "M" and e.get("name") == "process_name"}
fns = [e for e in trace if e.get("ph") == "X"]
t0 = min((e["ts"] for e in fns), default=0)
t1 = max((e["ts"] + e["dur"] for e in fns), default=0)
used = sorted({(e.get("pid"), e["tid"]) for e in fns})
several = len({pid for pid, _ in used}) > 1
width, label_w, row_h = 1000, 130, 26
scale = (width - label_w - 10) / max(t1 - t0, 1e-9)
colors = {}
palette = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f"]
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{row_h * len(used) + 40}" '
       'font-family="Helvetica" font-size="11">',
       f'<text x="4" y="{row_h * len(used) + 30}">{t1 - t0:.1f} us, {len(fns)} functions</text>']
for i, row in enumerate(used):
    y = 10 + i * row_h
    label = rows.get(row, row[1])
    if several:
        label = f"{processes.get(row[0], row[0])}: {label}"
    out.append(f'<text x="4" y="{y + 16}">{text(label)}</text>')
    out.append(f'<line x1="{label_w}" y1="{y + row_h - 2}" x2="{width}" y2="{y + row_h - 2}" stroke="#ddd"/>')
for e in fns:
    y = 10 + used.index((e.get("pid"), e["tid"])) * row_h
    c = colors.setdefault(e["name"], palette[len(colors) % len(palette)])
    x = label_w + (e["ts"] - t0) * scale
    w = max(e["dur"] * scale, 0.8)
    out.append(f'<rect x="{x:.2f}" y="{y + 3}" width="{w:.2f}" height="{row_h - 8}" fill="{c}">'
               f'<title>{text(e["name"])} {e["dur"]:.2f} us</title></rect>')
legend_x = label_w
for name, c in colors.items():
    out.append(f'<rect x="{legend_x}" y="{row_h * len(used) + 20}" width="10" height="10" fill="{c}"/>'
               f'<text x="{legend_x + 14}" y="{row_h * len(used) + 29}">{text(name)}</text>')
    legend_x += 16 + 7 * len(name)
out.append("</svg>")
open(sys.argv[2], "w", encoding="utf-8").write("\n".join(out))
