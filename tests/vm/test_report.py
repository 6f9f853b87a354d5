#!/usr/bin/env python3
"""Tests of report.py, the part of the VM test that decides pass or fail.

Run: python3 -B tests/vm/test_report.py
"""

import contextlib
import io
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import report  # noqa: E402

STEPS = ["setup-modules", "setup-rxe", "ibv-devinfo", "smoke-rc-pingpong", "c-poll", "c-attach", "preload-apps",
         "dvcq-devices", "dvcq-devices-json", "guest-test"]

# What examples/c/poll.c and attach.c print on rxe0 when their completions arrived.
C_POLL = """dvcq abi 1, dvcq 0.1.0
device rxe0: backend rxe (direct)
wc wr_id=7 status=0 opcode=1 (RDMA_WRITE) byte_len=8 qp_num=0x11
ok: 3 completions on rxe0"""
C_ATTACH = ('device rxe0: backend rxe (direct)\n'
            'wc wr_id=7 status=success opcode=1 data="dvcq!!!!"')
PRELOAD = """preload-app rc_pingpong same (baseline exit 0/0; own polled 400, verify checked 400)
preload: 24 programs, 0 differ from their baseline, dvcq polled 81234 completions"""
DEVICES = "hca_id:\trxe0\n\tbackend: generic"
DEVICES_JSON = '{\n  "devices": [ { "name": "rxe0" } ]\n}'
GUEST_TEST = """running 1 test
test vm_workloads ... vm-plan 3
vm-row send-recv rxe 1000 0
vm-row send-recv generic 1000 0 via ibv_poll_cq
vm-row rdma-write rxe 200 0
vm-figure poll_ns 41.5 ns/poll
ok"""
# A run of each kind: rows, a check that polls no completion, and skips.
MIXED = """test vm_workloads ... vm-plan 5
vm-row rc_send rxe 12 0 rxe reader
vm-row rc_send generic 12 0 ibv_poll_cq
vm-skip xrc_traffic rxe rxe0 has no XRC (IBV_DEVICE_XRC)
vm-skip xrc_traffic generic rxe0 has no XRC (IBV_DEVICE_XRC)
vm-check cq_create_bad rxe 0 CQs of 0 and max+1 entries refused
ok"""


def console(outputs=None, rcs=None, done=True, booted=True, extra=""):
    """A console log of a guest whose steps printed `outputs` and exited with `rcs`."""
    outputs = {"c-poll": C_POLL, "c-attach": C_ATTACH, "preload-apps": PRELOAD, "dvcq-devices": DEVICES, "dvcq-devices-json": DEVICES_JSON,
               "guest-test": GUEST_TEST, **(outputs or {})}
    rcs = rcs or {}
    lines = ["[    0.000000] Linux version 6.1.0", "Probing EDD... ok"]
    if booted:
        lines.append("vm-init 6.1.0-57-amd64")
        for name in STEPS:
            lines.append(f"vm-step-begin {name}")
            lines.append(outputs.get(name, f"{name} output"))
            if name in rcs and rcs[name] is None:
                break  # the step never ended
            lines.append(f"vm-step-end {name} {rcs.get(name, 0)}")
        lines.append(extra)
        if done:
            lines.append("vm-guest-done 0")
    return "\r\n".join(lines) + "\r\n"


def two_host_tables(client, server):
    """The heads of both sides' tables of a two-host run, the client on `client`, the server on
    `server`, as the two-host step prints them."""
    head = (" Send BW and latency, two hosts (dvcq bench traffic, {} side)\n"
            " Device          : {}                             Peer            : {}\n"
            " Number of qps   : 1                                Transport type  : RC")
    return "\n".join([head.format("client", client, "10.11.0.1:18515"), "--- send: the server's side",
                      " Waiting for a client on port 18515 ...", head.format("server", server, "10.11.0.2:49266"),
                      "--- send: server rc=0 client rc=0"])


def run(text, *flags, qemu_rc=0, steps=STEPS, second=None, second_rc=0):
    """report.main on `text` (and on `second`, a second boot's log, if given): (exit status,
    printed lines)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp, "console.log")
        log.write_text(text)
        argv = ["--log", str(log), "--qemu-rc", str(qemu_rc), *flags]
        if second is not None:
            Path(tmp, "console-two-host.log").write_text(second)
            argv += ["--log", str(Path(tmp, "console-two-host.log")), "--qemu-rc", str(second_rc)]
        for step in steps:
            argv += ["--expect-step", step]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = report.main(argv)
    return rc, out.getvalue().splitlines()


class Verdict(unittest.TestCase):
    def assertFailsWith(self, text, reason, **kw):
        rc, out = run(text, **kw)
        self.assertEqual(rc, 1, "\n".join(out))
        self.assertTrue(any(reason in line for line in out), f"no {reason!r} in:\n" + "\n".join(out))
        return out

    def test_clean_run_passes_and_counts_distinct_workloads(self):
        rc, out = run(console(), "--phase", "boot+guest=12.5")
        self.assertEqual(rc, 0, "\n".join(out))
        self.assertEqual(out[-1], "vm: 2 workloads, 0 mismatches")
        self.assertIn("vm: figures", out)
        self.assertTrue(any("poll_ns" in line and "41.5" in line for line in out))
        self.assertTrue(any(line.split()[:2] == ["total", "12.500"] for line in out))

    def test_preload_apps_must_say_none_differed_and_dvcq_polled(self):
        self.assertFailsWith(console({"preload-apps": "preload-app x same"}), "printed no 'preload: ...' line")
        differ = "preload: 24 programs, 2 differ from their baseline, dvcq polled 100 completions"
        self.assertFailsWith(console({"preload-apps": differ}), "2 of 24 programs differ from their baseline")
        idle = "preload: 24 programs, 0 differ from their baseline, dvcq polled 0 completions"
        self.assertFailsWith(console({"preload-apps": idle}), "dvcq polled no completion in own mode")
        nothing = "preload: 0 programs, 0 differ from their baseline, dvcq polled 5 completions"
        self.assertFailsWith(console({"preload-apps": nothing}), "no program was compared")

    def test_a_mismatch_fails_and_is_counted(self):
        text = console({"guest-test": GUEST_TEST.replace("rdma-write rxe 200 0", "rdma-write rxe 200 3")})
        out = self.assertFailsWith(text, "3 mismatches")
        self.assertEqual(out[-1], "vm: 2 workloads, 3 mismatches")

    def test_a_missing_row_fails(self):
        text = console({"guest-test": GUEST_TEST.replace("vm-row rdma-write rxe 200 0\n", "")})
        self.assertFailsWith(text, "planned 3 runs and 2 arrived")

    def test_an_extra_row_fails(self):
        text = console({"guest-test": GUEST_TEST + "\nvm-row atomics rxe 10 0"})
        self.assertFailsWith(text, "planned 3 runs and 4 arrived")

    def test_no_plan_fails(self):
        self.assertFailsWith(console({"guest-test": "vm-row a rxe 1 0"}), "no vm-plan")

    def test_a_failed_step_fails_and_shows_its_output(self):
        out = self.assertFailsWith(console({"ibv-devinfo": "Failed to get IB devices list"},
                                           rcs={"ibv-devinfo": 255}), "step ibv-devinfo exited 255")
        self.assertIn("  | Failed to get IB devices list", out)

    def test_a_timed_out_step_says_so(self):
        self.assertFailsWith(console(rcs={"guest-test": 143}), "ran past its time limit")

    def test_an_unfinished_step_and_guest_fail(self):
        out = self.assertFailsWith(console(rcs={"guest-test": None}, done=False), "never finished")
        self.assertTrue(any("no vm-guest-done" in line for line in out))

    def test_a_guest_that_never_booted_fails_once(self):
        out = self.assertFailsWith(console(booted=False), "never reached /init", qemu_rc=124)
        self.assertTrue(any("ran past its" in line for line in out))
        self.assertFalse(any("never ran" in line for line in out))

    def test_qemu_failure_fails_a_clean_log(self):
        self.assertFailsWith(console(), "qemu exited with status 1", qemu_rc=1)

    def test_a_malformed_row_names_its_line(self):
        text = console({"guest-test": GUEST_TEST.replace("rxe 200 0", "rxe many 0")})
        lineno = text.splitlines().index("vm-row rdma-write rxe many 0") + 1
        self.assertFailsWith(text, f"console.log:{lineno}: vm-row counts must be non-negative integers")

    def test_a_duplicate_row_fails(self):
        text = console({"guest-test": GUEST_TEST + "\nvm-row send-recv rxe 1000 0"})
        self.assertFailsWith(text, "a second vm-row for send-recv on rxe")

    def test_a_row_that_completed_nothing_fails(self):
        text = console({"guest-test": GUEST_TEST.replace("rdma-write rxe 200 0", "rdma-write rxe 0 0")})
        self.assertFailsWith(text, "rdma-write on rxe compared nothing: 0 completions")

    def test_a_mismatch_on_a_generic_row_fails(self):
        text = console({"guest-test": GUEST_TEST.replace("send-recv generic 1000 0", "send-recv generic 1000 2")})
        out = self.assertFailsWith(text, "2 mismatches")
        self.assertEqual(out[-1], "vm: 2 workloads, 2 mismatches")

    def test_a_plan_of_nothing_fails(self):
        self.assertFailsWith(console({"guest-test": "test vm_workloads ... vm-plan 0\nok"}), "planned no runs")

    def test_runs_that_were_all_skipped_fail(self):
        text = console({"guest-test": "vm-plan 2\nvm-skip a rxe no XRC\nvm-skip a generic no XRC"})
        out = self.assertFailsWith(text, "no run compared anything")
        self.assertEqual(out[-1], "vm: 0 workloads, 0 mismatches")

    def test_skips_are_listed_apart_and_checks_say_what_they_checked(self):
        rc, out = run(console({"guest-test": MIXED}))
        self.assertEqual(rc, 0, "\n".join(out))
        table = out[out.index("vm: workloads × backends (planned runs: 5)"):]
        skipped = table.index("vm: skipped, compared nothing (2 runs)")
        rows = [line.split()[:3] for line in table[1:skipped]]
        self.assertEqual(rows, [["workload", "backend", "completions"], ["rc_send", "rxe", "12"],
                                ["rc_send", "generic", "12"], ["cq_create_bad", "rxe", "-"]])
        self.assertEqual([line.split()[:2] for line in table[skipped + 2:skipped + 4]],
                         [["xrc_traffic", "rxe"], ["xrc_traffic", "generic"]])
        self.assertIn("IBV_DEVICE_XRC", table[skipped + 2])
        # The skipped workload compared nothing and is not counted.
        self.assertEqual(out[-1], "vm: 2 workloads, 0 mismatches")

    def test_a_skip_printed_as_an_empty_row_fails(self):
        text = console({"guest-test": MIXED.replace("vm-skip xrc_traffic rxe", "vm-row xrc_traffic rxe 0 0 skipped:")})
        self.assertFailsWith(text, "xrc_traffic on rxe compared nothing")

    def test_a_check_counts_its_mismatches_and_must_say_what_it_checked(self):
        text = console({"guest-test": MIXED.replace("cq_create_bad rxe 0", "cq_create_bad rxe 1")})
        self.assertFailsWith(text, "1 mismatches")
        text = console({"guest-test": MIXED.replace("0 CQs of 0 and max+1 entries refused", "0")})
        self.assertFailsWith(text, "vm-check needs <workload> <backend> <mismatches> <what it checked>")

    def test_a_skip_and_a_row_for_one_run_fail(self):
        text = console({"guest-test": MIXED + "\nvm-row xrc_traffic rxe 3 0"})
        self.assertFailsWith(text, "a second vm-row for xrc_traffic on rxe")

    def test_protocol_outside_the_guest_test_fails(self):
        self.assertFailsWith(console({"dvcq-devices": DEVICES + "\nvm-row x rxe 1 0"}),
                             "vm-row outside the guest-test step")

    def test_devices_must_list_rxe0(self):
        self.assertFailsWith(console({"dvcq-devices": "no devices"}), "does not list rxe0")

    def test_devices_json_must_list_rxe0(self):
        self.assertFailsWith(console({"dvcq-devices-json": '{"devices": [{"name": "model-mlx5"}]}'}),
                             "--json (line")
        # Named anywhere but in the device list is not listed.
        out = self.assertFailsWith(console({"dvcq-devices-json": '{"devices": [], "note": "rxe0"}'}),
                                   "does not list rxe0")
        self.assertTrue(any("--json" in line and "does not list rxe0" in line for line in out))

    def test_devices_json_must_parse(self):
        self.assertFailsWith(console({"dvcq-devices-json": '{"devices": [rxe0]}'}), "is not JSON")

    def test_a_skipped_step_that_was_expected_fails(self):
        text = console().replace("vm-step-begin guest-test", "vm-step-skip guest-test no binary\nx")
        self.assertFailsWith(text, "step guest-test was skipped")

    def test_a_c_example_that_exits_0_without_its_completions_fails(self):
        text = console({"c-poll": C_POLL.replace("ok: 3 completions on rxe0", "")})
        self.assertFailsWith(text, "step c-poll (line")
        # Completions on another device do not count for rxe0.
        self.assertFailsWith(console({"c-poll": C_POLL.replace("on rxe0", "on model-mlx5")}),
                             "without printing 'ok: 3 completions on rxe0'")
        text = console({"c-attach": C_ATTACH.replace("status=success", "status=local protection error")})
        self.assertFailsWith(text, "step c-attach (line")

    def test_a_failed_c_example_fails_and_shows_its_output(self):
        out = self.assertFailsWith(console({"c-attach": "attach: no RDMA device rxe0 here"},
                                           rcs={"c-attach": 77}), "step c-attach exited 77")
        self.assertIn("  | attach: no RDMA device rxe0 here", out)

    def test_a_two_host_step_that_exits_0_without_both_sides_figures_fails(self):
        figures = ("vm-figure two_host_client_direct_ns_per_completion 900.1 ns/completion\n"
                   "vm-figure two_host_client_direct_t_typical 41.20 us\n"
                   "vm-figure two_host_server_direct_ns_per_completion 1200.5 ns/completion")
        step = "vm-step-begin dvcq-two-host\n{}\n{}\nvm-step-end dvcq-two-host 0"
        rc, out = run(console(extra=step.format(two_host_tables("rxe-b", "rxe-a"), figures)))
        self.assertEqual(rc, 0, "\n".join(out))
        without_server = figures.rsplit("\n", 1)[0]
        self.assertFailsWith(console(extra=step.format(two_host_tables("rxe-b", "rxe-a"), without_server)),
                             "exited 0 without the figure two_host_server_direct_ns_per_completion")

    def test_a_two_host_run_whose_sides_shared_a_device_fails(self):
        figures = ("vm-figure two_host_client_direct_ns_per_completion 900.1 ns/completion\n"
                   "vm-figure two_host_client_direct_t_typical 41.20 us\n"
                   "vm-figure two_host_server_direct_ns_per_completion 1200.5 ns/completion")
        step = "vm-step-begin dvcq-two-host\n{}\n" + figures + "\nvm-step-end dvcq-two-host 0"
        self.assertFailsWith(console(extra=step.format(two_host_tables("rxe0", "rxe0"))),
                             "client and server both ran on rxe0; each namespace must have its own device")
        # A side whose table is missing cannot show which device it ran on.
        client_only = two_host_tables("rxe-b", "rxe-a").split("--- send: the server's side")[0]
        self.assertFailsWith(console(extra=step.format(client_only)), "no server side's table names its device")

    def test_two_boots_are_read_as_one_and_each_must_finish(self):
        two_host = ("vm-init 7.3.4+deb13-amd64\nvm-step-begin dvcq-two-host\n"
                    + two_host_tables("rxe-b", "rxe-a")
                    + "\nvm-figure two_host_client_direct_ns_per_completion 900.1 ns/completion"
                    "\nvm-figure two_host_client_direct_t_typical 41.20 us"
                    "\nvm-figure two_host_server_direct_ns_per_completion 1200.5 ns/completion"
                    "\nvm-step-end dvcq-two-host 0\n")
        steps = [*STEPS, "dvcq-two-host"]
        rc, out = run(console(), second=two_host + "vm-guest-done 0\n", steps=steps)
        self.assertEqual(rc, 0, "\n".join(out))
        self.assertTrue(any("two_host_server_direct_ns_per_completion" in line for line in out))
        self.assertEqual(out[-1], "vm: 2 workloads, 0 mismatches")
        out = self.assertFailsWith(console(), "console-two-host.log: the guest stopped before its last step",
                                   second=two_host, steps=steps)
        out = self.assertFailsWith(console(), "console-two-host.log: qemu exited with status 1",
                                   second=two_host + "vm-guest-done 0\n", second_rc=1, steps=steps)
        # The second boot's step missing altogether is a step that never ran.
        self.assertFailsWith(console(), "step dvcq-two-host never ran",
                             second="vm-init 7.3.4\nvm-guest-done 0\n", steps=steps)
        # A step in both logs is one too many.
        self.assertFailsWith(console(), "console-two-host.log: step c-poll ran in another boot too",
                             second="vm-init 7.3.4\nvm-step-begin c-poll\nvm-step-end c-poll 0\nvm-guest-done 0\n")

    def test_the_rxe_drain_ratio_is_reported_for_both_builds_against_the_target(self):
        extra = ("vm-step-begin dvcq-bench-drain\n"
                 "vm-figure drain_direct_rxe 90.0 ns/completion\n"
                 "vm-figure drain_ibv_poll_cq_generic 120.0 ns/completion\n"
                 "vm-figure drain_baseline_direct_rxe 150.0 ns/completion\n"
                 "vm-figure drain_baseline_ibv_poll_cq_generic 110.0 ns/completion\n"
                 "vm-figure drain_floor_rxe 50.0 ns/completion\n"
                 "vm-step-end dvcq-bench-drain 0")
        rc, out = run(console(extra=extra))
        self.assertEqual(rc, 0, "\n".join(out))
        self.assertIn("vm: rxe drain ratio (this build): 0.75x ibv_poll_cq (90.0 against 120.0 ns/completion; "
                      "target at most 0.9x: met)", out)
        self.assertIn("vm: rxe drain ratio (baseline build): 1.36x ibv_poll_cq (150.0 against 110.0 "
                      "ns/completion; target at most 0.9x: missed)", out)
        rc, out = run(console())
        self.assertFalse(any("drain ratio" in line for line in out))

    def test_the_rxe_floor_is_reported_against_both_pollers(self):
        extra = ("vm-step-begin dvcq-bench-drain\n"
                 "vm-figure drain_direct_rxe 150.0 ns/completion\n"
                 "vm-figure drain_ibv_poll_cq_generic 100.0 ns/completion\n"
                 "vm-figure drain_floor_rxe 60.0 ns/completion\n"
                 "vm-step-end dvcq-bench-drain 0")
        rc, out = run(console(extra=extra))
        self.assertEqual(rc, 0, "\n".join(out))
        self.assertIn("vm: rxe drain floor (this build): 0.60x ibv_poll_cq (60.0 ns/completion: the records copied "
                      "out of the ring, nothing else); dvcq's rxe poll 2.50x the floor", out)
        self.assertFailsWith(console(extra=extra.replace("vm-figure drain_floor_rxe 60.0 ns/completion\n", "")),
                             "exited 0 without the figure drain_floor_rxe")

    def test_development_mode_may_leave_the_guest_test_out(self):
        text = console({"guest-test": "ok"})
        rc, out = run(text, "--dev-mode", steps=STEPS[:-1])
        self.assertEqual(rc, 0, "\n".join(out))
        self.assertTrue(any("DEVELOPMENT MODE" in line for line in out))
        self.assertEqual(out[-1], "vm: 0 workloads, 0 mismatches")


def exec_console(output="hello from the guest", rc=0, setup_rc=0, done=True):
    """A console log of tests/vm/run --exec: the setup steps, then the file as step exec."""
    lines = ["vm-init 6.1.0-57-amd64", "vm-step-begin setup-modules", "vm-step-end setup-modules 0",
             "vm-step-begin setup-rxe", "gid index 1", f"vm-step-end setup-rxe {setup_rc}"]
    if setup_rc != 0:
        lines.append("vm-step-skip exec the setup of rxe0 failed")
    else:
        lines += ["vm-step-begin exec", output]
        if rc is not None:
            lines.append(f"vm-step-end exec {rc}")
    if done:
        lines.append("vm-guest-done 0")
    return "\n".join(lines) + "\n"


class Exec(unittest.TestCase):
    def exec_run(self, text, **kw):
        return run(text, "--exec", "/home/u/try.sh", steps=["setup-modules", "setup-rxe"], **kw)

    def test_the_files_status_is_the_exit_status_and_its_output_is_printed(self):
        for status in (0, 3, 77):
            rc, out = self.exec_run(exec_console(rc=status))
            self.assertEqual(rc, status, "\n".join(out))
            self.assertIn("  | hello from the guest", out)
            self.assertEqual(out[-1], f"vm: exec /home/u/try.sh exited {status}")

    def test_a_file_that_ran_past_its_time_says_so(self):
        rc, out = self.exec_run(exec_console(rc=143))
        self.assertEqual(rc, 143)
        self.assertTrue(any("ran past its time limit" in line for line in out), "\n".join(out))

    def test_a_guest_that_could_not_run_the_file_is_125(self):
        for text, why in [(exec_console(setup_rc=1), "was not run: the setup of rxe0 failed"),
                          (exec_console(rc=None, done=False), "never finished"),
                          ("", "never reached /init")]:
            rc, out = self.exec_run(text)
            self.assertEqual(rc, report.EXEC_FAILED, "\n".join(out))
            self.assertTrue(any(why in line for line in out), f"no {why!r} in:\n" + "\n".join(out))
            self.assertEqual(out[-1], "vm: exec /home/u/try.sh did not run to its end")

    def test_qemu_failing_after_the_file_ran_is_125(self):
        rc, out = self.exec_run(exec_console(rc=0), qemu_rc=1)
        self.assertEqual(rc, report.EXEC_FAILED, "\n".join(out))
        self.assertIn("vm: FAILED", out)


class Markers(unittest.TestCase):
    def test_markers_follow_other_text_but_not_inside_words(self):
        con = report.parse("vm-step-begin guest-test\ntest t ... vm-plan 1\nkvm-plan 7\n"
                           "vm-row w b 1 0\nvm-step-end guest-test 0\n", "log")
        self.assertEqual(con.plan, 1)
        self.assertEqual([(r.workload, r.completions) for r in con.rows], [("w", 1)])
        self.assertEqual(con.problems, [])

    def test_a_note_keeps_its_words(self):
        con = report.parse("vm-step-begin guest-test\nvm-row w b 5 0 polled in  batches of 16\n", "log")
        self.assertEqual(con.rows[0].note, "polled in batches of 16")

    def test_figures_come_from_any_step_but_rows_only_from_the_guest_test(self):
        text = ("vm-step-begin dvcq-bench-drain\nvm-figure drain_ns 172.2 ns/completion\n"
                "vm-row w rxe 1 0\nvm-step-end dvcq-bench-drain 0\nvm-figure stray 1 ns\n")
        con = report.parse(text, "log")
        self.assertEqual([f.name for f in con.figures], ["drain_ns"])
        self.assertEqual(con.problems, ["log:3: vm-row outside the guest-test step",
                                        "log:5: vm-figure outside a step"])

    def test_a_figure_needs_a_number(self):
        con = report.parse("vm-step-begin guest-test\nvm-figure lat fast ns\n", "log")
        self.assertEqual(con.figures, [])
        self.assertEqual(con.problems, ["log:2: vm-figure lat: value 'fast' is not a number"])


if __name__ == "__main__":
    unittest.main()
