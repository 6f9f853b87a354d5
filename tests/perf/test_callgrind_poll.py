#!/usr/bin/env python3
"""Tests of tests/perf/callgrind_poll.py, the parser of tests/perf/preload-perftest-callgrind,
on its own output: tests/perf/fixtures holds callgrind_annotate's output (gzip) and the
standard error of five perftest processes of one run of that script on the emulated
ConnectX (ib_send_bw -s 8 -n 2000, server and client, without and with the preload; and
ib_write_bw's server, which never polls), with the checkout's and the temporary
directory's paths replaced by REPO and TMP.

Run: python3 -B tests/perf/test_callgrind_poll.py
"""

import gzip
import json
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import callgrind_poll  # noqa: E402

FIXTURES = HERE / "fixtures"


def load(name):
    ann = gzip.decompress((FIXTURES / f"{name}.ann.gz").read_bytes()).decode()
    return ann, (FIXTURES / f"{name}.err").read_text()


class Side(unittest.TestCase):
    def test_dvcq_own_mode(self):
        # count_poll -> dispatch::poll_cq: 111,184,711 Ir in 353,840 calls; probe_empty ->
        # dispatch::poll_cq: 314,000 in 1,000; the shim's and the preload's lines.
        s = callgrind_poll.side(*load("mlx5_0-ib_send_bw-own-client"))
        self.assertEqual(
            s,
            {
                "op": "dvcq_preload::dispatch::poll_cq",
                "calls": 353840,
                "empty": 353820,
                "completions": 20,
                "poll_ir": 111184711,
                "probes": 1000,
                "probe_ir": 314000,
                "dvcq_polled": 20,
            },
        )

    def test_provider_without_symbols(self):
        s = callgrind_poll.side(*load("mlx5_0-ib_send_bw-none-server"))
        self.assertEqual(s["op"], "0x000000000001e880")
        self.assertEqual((s["calls"], s["empty"], s["completions"]), (1450196, 1450025, 2000))
        self.assertEqual((s["poll_ir"], s["probe_ir"], s["dvcq_polled"]), (132841463, 90000, None))

    def test_a_process_that_never_polls_takes_the_probe_s_op(self):
        s = callgrind_poll.side(*load("mlx5_0-ib_write_bw-none-server"))
        self.assertEqual((s["op"], s["calls"], s["poll_ir"], s["probe_ir"]), ("0x000000000001e880", 0, 0, 90000))

    def test_counts_that_disagree_with_callgrind_are_refused(self):
        ann, err = load("mlx5_0-ib_send_bw-own-client")
        with self.assertRaisesRegex(ValueError, "callgrind counted 353840 calls"):
            callgrind_poll.side(ann, err.replace("calls 353840", "calls 353841"))
        with self.assertRaisesRegex(ValueError, "0 lines of the shim"):
            callgrind_poll.side(ann, err.replace("poll-count:", "other:"))


class Table(unittest.TestCase):
    def test_both_processes_summed_and_compared(self):
        lines = []
        for mode in ("none", "own"):
            for side in ("server", "client"):
                s = callgrind_poll.side(*load(f"mlx5_0-ib_send_bw-{mode}-{side}"))
                lines.append(f"mlx5_0 ib_send_bw {mode} {json.dumps(s)}")
        out = callgrind_poll.table(lines).splitlines()
        none = next(line for line in out if " none " in line).split()
        own = next(line for line in out if " own " in line).split()
        # calls, empty, completions, Ir per empty poll, Ir per call, dvcq's completions
        self.assertEqual(none[3:9], ["2846905", "2846714", "2020", "90.0", "90.8", "-"])
        self.assertEqual(own[3:9], ["675196", "675034", "2020", "314.0", "314.6", "2020"])
        self.assertIn("own/none: empty poll 3.49, per call 3.46", out[-1])


if __name__ == "__main__":
    unittest.main()
