#!/usr/bin/env python3
"""The poll's instruction counts of one perftest process under callgrind, and the table of
tests/perf/preload-perftest-callgrind.

    callgrind_poll.py side ANNOTATE STDERR    one JSON line: what the process's polls cost
    callgrind_poll.py table RESULTS           the table, from lines "DEVICE TEST MODE JSON"

ANNOTATE is `callgrind_annotate --inclusive=yes --tree=calling` of the process's callgrind
file, STDERR the process's standard error, where the measuring shim (poll-count.c) and, in
own mode, the preload (DVCQ_STATS=1) report at exit. The shim calls the context's poll op
(libmlx5's or libirdma's, or the preload's dispatch) from two places: count_poll, every
poll of the program, and probe_empty, PROBES polls of an empty CQ of its own; callgrind
charges each call arc the op's inclusive cost, so the op's instructions are read off those
two arcs whatever the op is named (the providers' libraries have no symbols).
"""

import json
import re
import sys

# "  74,165,990 (99.43%)  *  FILE:FUNCTION [OBJECT]" (a function of the tree) and
# "  72,327,528 (96.96%)  >   FILE:FUNCTION (229,790x) [OBJECT]" (one it calls).
LINE = re.compile(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+([*>])\s+(.*?)(?:\s+\(([\d,]+)x\))?(?:\s+\[(.*)\])?\s*$")
SHIM = re.compile(r"^poll-count: calls (\d+) empty (\d+) completions (\d+) probes (\d+) foreign-contexts (\d+)$")
PRELOAD = re.compile(r"^dvcq-preload: mode \S+ cqs \d+ dvcq polled (\d+)$")


def function(name):
    """`FILE:FUNCTION` -> FUNCTION (callgrind_annotate's `???` file included)."""
    return name.split(":", 1)[1] if ":" in name else name


def calls_of(text, caller):
    """The arcs out of `caller` (a function name, or its prefix before a compiler's suffix
    such as `.constprop.0`): {callee function: (inclusive Ir, calls)}."""
    arcs, inside = {}, False
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            inside = False
            continue
        ir, kind, name, count = int(m[1].replace(",", "")), m[2], function(m[3]), m[4]
        if kind == "*":
            inside = name == caller or name.startswith(caller + ".")
        elif inside:
            ir0, n0 = arcs.get(name, (0, 0))
            arcs[name] = (ir0 + ir, n0 + int((count or "0").replace(",", "")))
    return arcs


def side(annotate, stderr):
    """One process's figures: the shim's counts and the op's instructions."""
    shim = [SHIM.match(line) for line in stderr.splitlines()]
    shim = [m for m in shim if m]
    if len(shim) != 1:
        raise ValueError(f"{len(shim)} lines of the shim (poll-count:) in the process's stderr, not 1")
    calls, empty, completions, probes, foreign = (int(x) for x in shim[0].groups())
    if foreign:
        raise ValueError(f"{foreign} contexts with another poll op than the first: not counted")
    polled = [int(m[1]) for m in (PRELOAD.match(line) for line in stderr.splitlines()) if m]
    ops = calls_of(annotate, "count_poll")
    if len(ops) > 1:
        raise ValueError(f"count_poll calls {sorted(ops)}: expected the poll op alone")
    op, (poll_ir, poll_calls) = next(iter(ops.items()), (None, (0, 0)))
    if poll_calls != calls:
        raise ValueError(f"callgrind counted {poll_calls} calls of the poll op, the shim {calls}")
    probe = calls_of(annotate, "probe_empty")
    if op is None:
        # A process that never polled (ib_write_bw's server): the probe's op is the one.
        rest = {k: v for k, v in probe.items() if "create_cq" not in k and "destroy_cq" not in k and "dl_runtime" not in k}
        op = next(iter(rest), None)
    probe_ir, probe_calls = probe.get(op, (0, 0))
    if probe_calls != probes:
        raise ValueError(f"callgrind counted {probe_calls} probe polls of {op}, the shim {probes} empty ones")
    return {
        "op": op,
        "calls": calls,
        "empty": empty,
        "completions": completions,
        "poll_ir": poll_ir,
        "probes": probes,
        "probe_ir": probe_ir,
        "dvcq_polled": polled[-1] if polled else None,
    }


def summary(sides):
    """Both processes of a pair together: per empty poll (the probe's) and per call (all the
    program's, empty ones included). No figure per completion: the program's empty polls
    are the most of its calls, and their cost depends on the ring's state (libmlx5's empty
    poll of a ring that has wrapped runs more instructions than the probe's fresh ring), so
    the remainder after subtracting them at the probe's price is not a measurement."""
    t = {k: sum(s[k] for s in sides) for k in ("calls", "empty", "completions", "poll_ir", "probes", "probe_ir")}
    polled = [s["dvcq_polled"] for s in sides]
    t["dvcq_polled"] = None if None in polled else sum(polled)
    t["op"] = "/".join(sorted({s["op"] for s in sides if s["op"]}))
    t["per_empty"] = t["probe_ir"] / t["probes"] if t["probes"] else float("nan")
    t["per_call"] = t["poll_ir"] / t["calls"] if t["calls"] else float("nan")
    return t


def table(lines):
    """The table: per device and test, the baseline (`none`) and dvcq (`own`) side by side."""
    rows = {}
    for line in lines:
        if not line.strip():
            continue
        device, test, mode, data = line.split(" ", 3)
        rows.setdefault((device, test), {}).setdefault(mode, []).append(json.loads(data))
    out = [
        f"{'device':7} {'test':12} {'mode':5} {'calls':>8} {'empty':>8} {'compl':>6} "
        f"{'Ir/empty':>9} {'Ir/call':>8} {'dvcq':>6}  op"
    ]
    ratios = []
    for (device, test), modes in rows.items():
        sums = {}
        for mode in ("none", "own"):
            if mode not in modes:
                out.append(f"{device:7} {test:12} {mode:5} no figure")
                continue
            t = sums[mode] = summary(modes[mode])
            dv = "-" if t["dvcq_polled"] is None else str(t["dvcq_polled"])
            out.append(
                f"{device:7} {test:12} {mode:5} {t['calls']:8d} {t['empty']:8d} {t['completions']:6d} "
                f"{t['per_empty']:9.1f} {t['per_call']:8.1f} {dv:>6}  {t['op']}"
            )
        if len(sums) == 2:
            b, o = sums["none"], sums["own"]
            ratios.append(
                f"{device:7} {test:12} own/none: empty poll {o['per_empty'] / b['per_empty']:.2f}, "
                f"per call {o['per_call'] / b['per_call']:.2f}"
            )
    return "\n".join(out + [""] + ratios)


def main(argv):
    if len(argv) == 4 and argv[1] == "side":
        with open(argv[2]) as a, open(argv[3]) as e:
            print(json.dumps(side(a.read(), e.read())))
    elif len(argv) == 3 and argv[1] == "table":
        with open(argv[2]) as f:
            print(table(f.readlines()))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
