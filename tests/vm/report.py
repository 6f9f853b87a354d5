#!/usr/bin/env python3
"""Turn the soft-RoCE guest's console log into the VM test's tables and result.

tests/vm/run calls this after qemu exits. The log holds the kernel's boot messages, the
output of every guest step, and marker lines (see tests/vm/guest-init):

    vm-init <release>  vm-step-begin <step>  vm-step-end <step> <rc>  vm-step-skip <step> <why>
    vm-guest-done <failed>

and, inside the guest-test step, the guest test's protocol:

    vm-plan <runs>                                         runs that will follow, one line each:
    vm-row <workload> <backend> <completions> <mismatches> [note...]   a run that compared completions
    vm-check <workload> <backend> <mismatches> <what it checked...>    a run that polls none (it makes CQs)
    vm-skip <workload> <backend> <why...>                  a run the device cannot do
    vm-figure <name> <value> <unit...>                     a benchmark figure

A marker may follow other text on its line (libtest prints "test name ... " before the test's
own output), so it is found anywhere after whitespace. The last line printed is always

    vm: <N> workloads, <M> mismatches

where N counts the distinct workloads that compared something (a skip compares nothing). The
exit status is 0 only when qemu exited cleanly, every expected step ran and exited 0, the guest
test planned runs and every planned run arrived, every row compared at least one completion,
every check says what it checked, at least one run compared something, no row or check has a
mismatch (on any backend), `dvcq devices` and `--json` list rxe0, and the C examples
(steps c-poll and c-attach) print the lines that say their completions arrived. A skipped run
is listed with its reason, apart from the rows.

The guest is booted twice, each boot with a console log of its own (--log, with qemu's exit
status for it in the same order, --qemu-rc): Debian 12's kernel runs the test plan, a newer
kernel runs the two-host step (two soft-RoCE devices in two network namespaces). The logs are
read as one: a step name may appear in one of them only, and each must show a guest that
booted and finished.

With --exec FILE (tests/vm/run --exec) the guest ran FILE as its one step `exec` after the
setup steps: the report prints FILE's output, its last line is

    vm: exec FILE exited <N>

and the exit status is N; when the guest could not run FILE to its end it is 125.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

MARKER = re.compile(
    r"(?:^|\s)(vm-(?:init|step-begin|step-end|step-skip|guest-done|plan|row|check|skip|figure))"
    r"(?=\s|$)(.*)$"
)
PROTOCOL = {"vm-plan", "vm-row", "vm-check", "vm-skip", "vm-figure"}
GUEST_TEST = "guest-test"
EXEC_STEP = "exec"
# tests/vm/run --exec: the VM failed to run the file (1 could be the file's own status).
EXEC_FAILED = 125
# The C examples' steps, the device they ran on, and the line each prints only when its
# completions arrived and the data landed (examples/c/poll.c, examples/c/attach.c).
C_DEVICE = "rxe0"
C_EXAMPLES = {
    "c-poll": f"ok: 3 completions on {C_DEVICE}",
    "c-attach": 'wc wr_id=7 status=success opcode=1 data="dvcq!!!!"',
}
# tests/vm/preload-apps' closing line: programs compared, how many differ from their
# baseline, and the completions dvcq polled in own mode; the step passes only with F 0, N > 0.
PRELOAD_STEP = "preload-apps"
PRELOAD_LINE = re.compile(r"^preload: (\d+) programs, (\d+) differ from their baseline, dvcq polled (\d+) completions$")
TAIL_LINES = 25
STEP_TAIL_LINES = 30
# The two-host run (two network namespaces, a dvcq server in one, the client in the other):
# the figures that show both sides measured, which its step must print when it exits 0.
TWO_HOST_STEP = "dvcq-two-host"
TWO_HOST_FIGURES = (
    "two_host_client_direct_ns_per_completion",
    "two_host_client_direct_t_typical",
    "two_host_server_direct_ns_per_completion",
)
# Each side's table header names its side and, below it, the device it ran on; the two sides
# must have run on different devices (one soft-RoCE device per namespace).
TWO_HOST_SIDE = re.compile(r"two hosts \(dvcq bench traffic, (client|server) side\)")
TWO_HOST_DEVICE = re.compile(r"^\s*Device\s*:\s*(\S+)")
# `bench drain`'s figures whose ratio is the rxe poll's cost against ibv_poll_cq's, and the
# target of that ratio (issue 43); a baseline binary's figures carry the prefix `drain_baseline_`.
DRAIN_DIRECT = "direct_rxe"
DRAIN_BASE = "ibv_poll_cq_generic"
DRAIN_RATIO_TARGET = 0.9
DRAIN_STEP = "dvcq-bench-drain"
# `bench drain`'s floor row on rxe: the records copied out of the ring and nothing else.
DRAIN_FLOOR = "floor_rxe"


@dataclass
class Step:
    """One guest step: where it began, its exit status, and what it printed."""

    name: str
    begin: int
    rc: int | None = None
    skipped: str | None = None
    output: list[str] = field(default_factory=list)


@dataclass
class Row:
    """One `vm-row` (a workload run on one backend that polled completions) or `vm-check`
    (one that polls none: `completions` is None, `note` says what it checked)."""

    workload: str
    backend: str
    completions: int | None
    mismatches: int
    note: str
    line: int


@dataclass
class Skip:
    """One `vm-skip`: a workload the device cannot run on one backend, and why."""

    workload: str
    backend: str
    why: str
    line: int


@dataclass
class Figure:
    """One `vm-figure`."""

    name: str
    value: str
    unit: str


@dataclass
class Console:
    """Everything the log says, and what in it is malformed."""

    lines: list[str]
    booted: bool = False
    done: bool = False
    # Each boot's log name, whether it booted and whether it finished (merge fills it).
    boots: list[tuple[str, bool, bool]] = field(default_factory=list)
    steps: dict[str, Step] = field(default_factory=dict)
    plan: int | None = None
    rows: list[Row] = field(default_factory=list)
    skips: list[Skip] = field(default_factory=list)
    figures: list[Figure] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def non_negative(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def parse(text: str, log_name: str) -> Console:
    """Read a console log; malformed markers become problems naming their line."""
    lines = text.replace("\r", "").split("\n")
    con = Console(lines=lines)
    current: Step | None = None

    def problem(lineno: int, message: str) -> None:
        con.problems.append(f"{log_name}:{lineno}: {message}")

    for lineno, line in enumerate(lines, start=1):
        match = MARKER.search(line)
        if not match:
            if current is not None:
                current.output.append(line)
            continue
        kind, args = match.group(1), match.group(2).split()

        if kind in PROTOCOL:
            # Rows and their plan come from the guest test alone; a figure may come from any
            # step (the benchmarks run as steps of their own), but never from outside one.
            if kind == "vm-figure" and current is None:
                problem(lineno, f"{kind} outside a step")
                continue
            if kind != "vm-figure" and (current is None or current.name != GUEST_TEST):
                problem(lineno, f"{kind} outside the {GUEST_TEST} step")
                continue
            current.output.append(line)
            parse_protocol(con, kind, args, lineno, problem)
        elif kind == "vm-init":
            con.booted = True
        elif kind == "vm-guest-done":
            con.done = True
        elif kind == "vm-step-begin":
            if len(args) != 1:
                problem(lineno, "vm-step-begin needs exactly one step name")
                continue
            if current is not None:
                problem(lineno, f"step {current.name} has no end before step {args[0]} began")
            if args[0] in con.steps:
                problem(lineno, f"step {args[0]} began twice")
            current = con.steps[args[0]] = Step(args[0], lineno)
        elif kind == "vm-step-end":
            rc = non_negative(args[1]) if len(args) == 2 else None
            if rc is None:
                problem(lineno, "vm-step-end needs a step name and a numeric exit status")
            elif current is None or current.name != args[0]:
                problem(lineno, f"step {args[0]} ended but was not running")
            else:
                current.rc = rc
            current = None
        elif kind == "vm-step-skip":
            if not args:
                problem(lineno, "vm-step-skip needs a step name")
                continue
            con.steps[args[0]] = Step(args[0], lineno, skipped=" ".join(args[1:]))
    con.boots = [(log_name, con.booted, con.done)]
    return con


def merge(cons: list[Console]) -> Console:
    """Several boots' logs read as one: their steps, rows and figures together."""
    if len(cons) == 1:
        return cons[0]
    merged = Console(lines=[line for con in cons for line in con.lines])
    for con in cons:
        merged.boots += con.boots
        merged.problems += con.problems
        for name, step in con.steps.items():
            if name in merged.steps:
                merged.problems.append(f"{con.boots[0][0]}: step {name} ran in another boot too")
            else:
                merged.steps[name] = step
        if con.plan is not None:
            if merged.plan is not None:
                merged.problems.append(f"{con.boots[0][0]}: a second vm-plan")
            else:
                merged.plan = con.plan
        merged.rows += con.rows
        merged.skips += con.skips
        merged.figures += con.figures
    merged.booted = any(con.booted for con in cons)
    return merged


def parse_protocol(con: Console, kind: str, args: list[str], lineno: int, problem) -> None:
    """One line of the guest test's protocol."""
    if kind == "vm-plan":
        count = non_negative(args[0]) if len(args) == 1 else None
        if count is None:
            problem(lineno, "vm-plan needs one non-negative row count")
        elif con.plan is not None:
            problem(lineno, "a second vm-plan")
        else:
            con.plan = count
    elif kind == "vm-row":
        if len(args) < 4:
            problem(lineno, "vm-row needs <workload> <backend> <completions> <mismatches>")
            return
        completions, mismatches = non_negative(args[2]), non_negative(args[3])
        if completions is None or mismatches is None:
            problem(lineno, f"vm-row counts must be non-negative integers, not {args[2]!r} {args[3]!r}")
            return
        if not second_run(con, kind, args, lineno, problem):
            con.rows.append(Row(args[0], args[1], completions, mismatches, " ".join(args[4:]), lineno))
    elif kind == "vm-check":
        if len(args) < 4:
            problem(lineno, "vm-check needs <workload> <backend> <mismatches> <what it checked>")
            return
        mismatches = non_negative(args[2])
        if mismatches is None:
            problem(lineno, f"vm-check mismatches must be a non-negative integer, not {args[2]!r}")
            return
        if not second_run(con, kind, args, lineno, problem):
            con.rows.append(Row(args[0], args[1], None, mismatches, " ".join(args[3:]), lineno))
    elif kind == "vm-skip":
        if len(args) < 3:
            problem(lineno, "vm-skip needs <workload> <backend> <why>")
            return
        if not second_run(con, kind, args, lineno, problem):
            con.skips.append(Skip(args[0], args[1], " ".join(args[2:]), lineno))
    elif kind == "vm-figure":
        if len(args) < 3:
            problem(lineno, "vm-figure needs <name> <value> <unit>")
            return
        try:
            float(args[1])
        except ValueError:
            problem(lineno, f"vm-figure {args[0]}: value {args[1]!r} is not a number")
            return
        con.figures.append(Figure(args[0], args[1], " ".join(args[2:])))


def second_run(con: Console, kind: str, args: list[str], lineno: int, problem) -> bool:
    """Whether the workload and backend of this line already had a line (a problem if so)."""
    seen = [(r.workload, r.backend) for r in con.rows] + [(s.workload, s.backend) for s in con.skips]
    if (args[0], args[1]) in seen:
        problem(lineno, f"a second {kind} for {args[0]} on {args[1]} (one line per run)")
        return True
    return False


def judge(con: Console, args: argparse.Namespace) -> list[str]:
    """Every reason the run failed, parse problems included; empty when it passed."""
    failures = list(con.problems)
    several = len(con.boots) > 1
    for (log, booted, done), qemu_rc in zip(con.boots, args.qemu_rc):
        where = f"{log}: " if several else ""
        if qemu_rc == 124:
            failures.append(f"{where}qemu ran past its {args.timeout}s limit and was stopped")
        elif qemu_rc != 0:
            failures.append(f"{where}qemu exited with status {qemu_rc}")
        if not booted:
            failures.append(f"{where}the guest never reached /init")
        elif not done:
            failures.append(f"{where}the guest stopped before its last step (no vm-guest-done)")
    if not con.booted:
        # Nothing after this can have happened; listing every step that never ran adds nothing.
        return failures

    for name in args.expect_step:
        step = con.steps.get(name)
        if step is None:
            failures.append(f"step {name} never ran")
        elif step.skipped is not None:
            failures.append(f"step {name} was skipped: {step.skipped}")
        elif step.rc is None:
            failures.append(f"step {name} never finished")
        elif step.rc != 0:
            failures.append(f"step {name} {exit_text(step.rc)}")

    check_devices(con, failures)
    check_c_examples(con, failures)
    check_two_host(con, failures)
    check_drain(con, failures)
    check_preload(con, failures)

    if GUEST_TEST in args.expect_step:
        arrived = len(con.rows) + len(con.skips)
        if con.plan is None:
            failures.append("the guest test printed no vm-plan")
        elif con.plan == 0:
            failures.append("the guest test planned no runs: it compared nothing")
        elif arrived != con.plan:
            failures.append(f"the guest test planned {runs(con.plan)} and {arrived} arrived")
        if con.plan and not con.rows:
            failures.append("no run compared anything: every planned run was skipped")
    # A row that polled no completion compared nothing, whatever it counts as mismatches.
    for r in con.rows:
        if r.completions == 0:
            failures.append(f"{r.workload} on {r.backend} compared nothing: 0 completions (line {r.line})")
    mismatches = sum(r.mismatches for r in con.rows)
    if mismatches:
        failures.append(f"{mismatches} mismatches")
    return failures


def exit_text(rc: int) -> str:
    """An exit status in words; busybox's timeout ends a step that ran too long with 143."""
    if rc == 143:
        return "exited 143 (SIGTERM: it ran past its time limit)"
    return f"exited {rc}"


def runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


def check_devices(con: Console, failures: list[str]) -> None:
    """`dvcq devices` must list rxe0, and `--json` must be JSON that does."""
    listing = con.steps.get("dvcq-devices")
    if listing is not None and listing.rc == 0 and "rxe0" not in "\n".join(listing.output):
        failures.append(f"dvcq devices (line {listing.begin}) does not list rxe0")
    as_json = con.steps.get("dvcq-devices-json")
    if as_json is not None and as_json.rc == 0:
        text = "\n".join(as_json.output)
        try:
            doc = json.loads(text)
        except ValueError as err:
            failures.append(f"dvcq devices --json (line {as_json.begin}) is not JSON: {err}")
            return
        devices = doc.get("devices") if isinstance(doc, dict) else None
        names = [d.get("name") for d in devices if isinstance(d, dict)] if isinstance(devices, list) else []
        if "rxe0" not in names:
            failures.append(f"dvcq devices --json (line {as_json.begin}) does not list rxe0 in its devices: {names}")


def check_c_examples(con: Console, failures: list[str]) -> None:
    """A C example that exited 0 must also have printed the line that says its completions
    arrived: an exit status alone does not show that dvcq polled anything."""
    for name, line in C_EXAMPLES.items():
        step = con.steps.get(name)
        if step is not None and step.rc == 0 and not any(line in out for out in step.output):
            failures.append(f"step {name} (line {step.begin}) exited 0 without printing {line!r}")


def check_two_host(con: Console, failures: list[str]) -> None:
    """A two-host step that exited 0 must have printed both sides' figures: an exit status
    alone does not show that data moved between the namespaces."""
    step = con.steps.get(TWO_HOST_STEP)
    if step is None or step.rc != 0:
        return
    text = "\n".join(step.output)
    for name in TWO_HOST_FIGURES:
        if not re.search(rf"(?:^|\s)vm-figure {name} ", text, re.M):
            failures.append(f"step {TWO_HOST_STEP} (line {step.begin}) exited 0 without the figure {name}")
    devices = two_host_devices(step.output)
    for side in ("client", "server"):
        if not devices[side]:
            failures.append(f"step {TWO_HOST_STEP} (line {step.begin}): no {side} side's table names its device")
    shared = devices["client"] & devices["server"]
    if shared:
        failures.append(f"step {TWO_HOST_STEP} (line {step.begin}): client and server both ran on "
                        f"{', '.join(sorted(shared))}; each namespace must have its own device")


def two_host_devices(output: list[str]) -> dict[str, set[str]]:
    """The devices each side's tables name: the Device line under a side's title."""
    devices: dict[str, set[str]] = {"client": set(), "server": set()}
    side = None
    for line in output:
        title = TWO_HOST_SIDE.search(line)
        if title:
            side = title.group(1)
            continue
        device = TWO_HOST_DEVICE.match(line)
        if device and side is not None:
            devices[side].add(device.group(1))
            side = None
    return devices


def check_drain(con: Console, failures: list[str]) -> None:
    """A drain step that exited 0 must have printed the figures of the rxe ratio and floor."""
    step = con.steps.get(DRAIN_STEP)
    if step is None or step.rc != 0:
        return
    names = {f.name for f in con.figures}
    for name in (DRAIN_DIRECT, DRAIN_BASE, DRAIN_FLOOR):
        if "drain_" + name not in names:
            failures.append(f"step {DRAIN_STEP} (line {step.begin}) exited 0 without the figure drain_{name}")


def drain_ratios(con: Console) -> list[str]:
    """The rxe poll's cost over ibv_poll_cq's in `bench drain`, for this build and for a
    baseline build run in the same guest, each against the target."""
    figures = {f.name: f.value for f in con.figures}
    out = []
    for prefix, what in (("drain_baseline_", "baseline build"), ("drain_", "this build")):
        direct, base = figures.get(prefix + DRAIN_DIRECT), figures.get(prefix + DRAIN_BASE)
        if direct is None or base is None or float(base) <= 0:
            continue
        ratio = float(direct) / float(base)
        verdict = "met" if ratio <= DRAIN_RATIO_TARGET else "missed"
        out.append(
            f"vm: rxe drain ratio ({what}): {ratio:.2f}x ibv_poll_cq ({direct} against {base} ns/completion; "
            f"target at most {DRAIN_RATIO_TARGET}x: {verdict})"
        )
        floor = figures.get(prefix + DRAIN_FLOOR)
        if floor is not None and float(floor) > 0:
            out.append(
                f"vm: rxe drain floor ({what}): {float(floor) / float(base):.2f}x ibv_poll_cq ({floor} ns/completion: "
                f"the records copied out of the ring, nothing else); dvcq's rxe poll {float(direct) / float(floor):.2f}x "
                f"the floor"
            )
    return out


def check_preload(con: Console, failures: list[str]) -> None:
    """tests/vm/preload-apps must end with its line, saying that no program differed from
    its baseline and that dvcq polled completions; an exit status alone shows neither."""
    step = con.steps.get(PRELOAD_STEP)
    if step is None or step.skipped is not None:
        return
    found = [m for m in (PRELOAD_LINE.match(out.strip()) for out in step.output) if m]
    if not found:
        failures.append(f"step {PRELOAD_STEP} (line {step.begin}) printed no 'preload: ...' line")
        return
    programs, differ, polled = (int(g) for g in found[-1].groups())
    if programs == 0:
        failures.append(f"step {PRELOAD_STEP}: no program was compared")
    if differ:
        failures.append(f"step {PRELOAD_STEP}: {differ} of {programs} programs differ from their baseline")
    if polled == 0:
        failures.append(f"step {PRELOAD_STEP}: dvcq polled no completion in own mode")


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """Left-aligned columns, numbers right-aligned; two-space indent."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def fmt(cells: list[str]) -> str:
        out = []
        for cell, width in zip(cells, widths):
            out.append(cell.rjust(width) if cell.replace(".", "", 1).isdigit() else cell.ljust(width))
        return "  " + "  ".join(out).rstrip()

    return [fmt(header), *map(fmt, rows)]


def report(con: Console, args: argparse.Namespace, failures: list[str]) -> list[str]:
    out = [f"vm: guest ran under {args.accel}; console log {args.log}"]
    if args.dev_mode:
        out.append("vm: DEVELOPMENT MODE (DVCQ_VM_ALLOW_MISSING=1): not a valid test result")

    steps = []
    for step in con.steps.values():
        if step.skipped is not None:
            result = f"skipped: {step.skipped}"
        elif step.rc is None:
            result = "did not finish"
        else:
            result = "ok" if step.rc == 0 else exit_text(step.rc)
        steps.append([step.name, result])
    out.append("vm: guest steps")
    out += table(["step", "result"], steps) if steps else ["  (none)"]

    plan = "none" if con.plan is None else str(con.plan)
    out.append(f"vm: workloads × backends (planned runs: {plan})")
    if con.rows:
        rows = [[r.workload, r.backend, "-" if r.completions is None else str(r.completions),
                 str(r.mismatches), r.note] for r in con.rows]
        out += table(["workload", "backend", "completions", "mismatches", "note"], rows)
    else:
        out.append("  (no rows)")
    if con.skips:
        out.append(f"vm: skipped, compared nothing ({runs(len(con.skips))})")
        out += table(["workload", "backend", "why"], [[s.workload, s.backend, s.why] for s in con.skips])

    if con.figures:
        out.append("vm: figures")
        out += table(["figure", "value", "unit"], [[f.name, f.value, f.unit] for f in con.figures])
    out += drain_ratios(con)

    if args.phase:
        phases = [p.split("=", 1) for p in args.phase]
        total = sum(float(s) for _, s in phases)
        out.append("vm: phases")
        out += table(["phase", "seconds"], [*phases, ["total", f"{total:.3f}"]])

    if failures:
        out.append("vm: FAILED")
        out += [f"  - {f}" for f in failures]
        out += failure_context(con)

    workloads = len({r.workload for r in con.rows})
    mismatches = sum(r.mismatches for r in con.rows)
    out.append(f"vm: {workloads} workloads, {mismatches} mismatches")
    return out


def failure_context(con: Console) -> list[str]:
    """What a reader needs first: the end of each failed step's output, then of the console."""
    out = []
    for step in con.steps.values():
        if step.skipped is None and step.rc != 0:
            tail = step.output[-STEP_TAIL_LINES:]
            out.append(f"vm: step {step.name} (console line {step.begin}), its last {len(tail)} lines")
            out += [f"  | {line}" for line in tail]
    tail = [line for line in con.lines if line][-TAIL_LINES:]
    if tail:
        out.append(f"vm: the console's last {len(tail)} lines")
        out += [f"  | {line}" for line in tail]
    else:
        out.append("vm: the console is empty")
    return out


def exec_report(con: Console, args: argparse.Namespace) -> tuple[list[str], int]:
    """tests/vm/run --exec: the file's output, then its exit status, or why it has none."""
    failures = judge(con, args)
    step = con.steps.get(EXEC_STEP)
    out = [f"vm: guest ran under {args.accel}; console log {args.log}"]
    if step is not None and step.skipped is None:
        out.append(f"vm: {args.exec} printed {len(step.output)} lines")
        out += [f"  | {line}" for line in step.output]
    if step is None:
        failures.append(f"{args.exec} never ran")
    elif step.skipped is not None:
        failures.append(f"{args.exec} was not run: {step.skipped}")
    elif step.rc is None:
        failures.append(f"{args.exec} never finished")
    if args.phase:
        phases = [p.split("=", 1) for p in args.phase]
        out.append("vm: phases")
        out += table(["phase", "seconds"], [*phases, ["total", f"{sum(float(s) for _, s in phases):.3f}"]])
    if step is None or step.rc is None or failures:
        out.append("vm: FAILED")
        out += [f"  - {f}" for f in failures]
        out += failure_context(con)
    if step is None or step.rc is None:
        out.append(f"vm: exec {args.exec} did not run to its end")
        return out, EXEC_FAILED
    if step.rc == 143:
        out.append(f"vm: {args.exec} {exit_text(step.rc)}")
    out.append(f"vm: exec {args.exec} exited {step.rc}")
    return out, step.rc if not failures else EXEC_FAILED


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--log", required=True, action="append", help="a boot's console log (one per boot)")
    parser.add_argument("--accel", default="unknown", help="kvm or tcg, for the report")
    parser.add_argument("--qemu-rc", type=int, action="append", default=[],
                        help="qemu's exit status for each --log, in order (124: timed out; default 0)")
    parser.add_argument("--timeout", default="?", help="qemu's time limit in seconds, for the report")
    parser.add_argument("--expect-step", action="append", default=[], help="a step that must pass")
    parser.add_argument("--phase", action="append", default=[], help="NAME=SECONDS, for the report")
    parser.add_argument("--dev-mode", action="store_true", help="say the result is not valid")
    parser.add_argument("--exec", metavar="FILE", help="the guest ran FILE, not the test plan")
    args = parser.parse_args(argv)

    if len(args.qemu_rc) > len(args.log):
        parser.error("more --qemu-rc than --log")
    args.qemu_rc += [0] * (len(args.log) - len(args.qemu_rc))
    cons = []
    for name in args.log:
        log = Path(name)
        text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        cons.append(parse(text, log.name))
    con = merge(cons)
    args.log = ", ".join(args.log)
    if args.exec:
        lines, status = exec_report(con, args)
        print("\n".join(lines))
        return status
    failures = judge(con, args)
    print("\n".join(report(con, args, failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
