#!/usr/bin/env python3
"""Tests of tests/vm/preload-apps' pyverbs comparison, on the host, with a stand-in for
pyverbs-results.py whose results depend on the preload's mode (no RDMA device needed).

Run: python3 -B tests/vm/test_preload_apps.py (needs busybox, as the guest's shell)
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Prints a run's results as pyverbs-results.py does. $FAKE_OWN_RESULT replaces the result
# of test_cq's traffic test in own mode (a preload that broke it); in own mode the stand-in
# reports, as the preload does at exit, that dvcq polled completions.
FAKE = """#!/bin/sh
mode=${DVCQ_PRELOAD_MODE:-base}
traffic=pass
[ "$mode" = own ] && traffic=${FAKE_OWN_RESULT:-pass}
echo "pyverbs-test tests.test_cq.CQTest.test_resize_cq pass"
echo "pyverbs-test tests.test_cq.CQTest.test_traffic $traffic"
echo "pyverbs-test tests.test_cqex.CqExTestCase.test_rc_traffic_cq_ex error"
echo "pyverbs-test tests.test_qp.QPTest.test_create_raw_qp_no_attr skip"
[ "${FAKE_UNFINISHED:-}" = "$mode" ] && exit 1
echo "pyverbs-done 4"
[ "$mode" = base ] || echo "dvcq-preload: mode $mode cqs 2 dvcq polled 40" >&2
exit 0
"""


class PyverbsComparison(unittest.TestCase):
    def run_apps(self, **env: str) -> subprocess.CompletedProcess:
        # Not a skip: CI installs busybox-static (.ci/run), and the guest's shell is busybox.
        if not shutil.which("busybox"):
            self.fail("busybox is not installed (apt-get install busybox-static)")
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "pyverbs" / "tests").mkdir(parents=True)
            lib = root / "libdvcq_preload.so"
            lib.write_bytes(b"")
            fake = root / "fake-results"
            fake.write_text(FAKE)
            # python3 runs the stand-in: a directory first on PATH holds a python3 that is sh.
            bindir = root / "bin"
            bindir.mkdir()
            (bindir / "python3").write_text('#!/bin/sh\nexec sh "$@"\n')
            (bindir / "python3").chmod(0o755)
            full_env = {
                "PATH": f"{bindir}:{os.environ['PATH']}",
                "TMPDIR": tmp,
                "DVCQ_PRELOAD_LIB": str(lib),
                "PRELOAD_APPS_PYVERBS": str(root / "pyverbs"),
                "PRELOAD_APPS_PYVERBS_RUN": str(fake),
                **env,
            }
            return subprocess.run(
                ["busybox", "sh", str(HERE / "preload-apps"), "pyverbs"],
                env=full_env, capture_output=True, text=True, timeout=60, check=False,
            )

    def test_same_results_count_each_module_and_what_dvcq_polled(self):
        r = self.run_apps()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("preload-app pyverbs-test_cq same (baseline: 2 of 2 tests pass)", r.stdout)
        self.assertIn("preload: 3 programs, 0 differ from their baseline, dvcq polled 40 completions",
                      r.stdout)

    def test_a_test_failing_only_under_the_preload_differs(self):
        r = self.run_apps(FAKE_OWN_RESULT="fail")
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("preload-app pyverbs-test_cq differs: own:results", r.stdout)
        self.assertIn("+pyverbs-test tests.test_cq.CQTest.test_traffic fail", r.stdout)
        self.assertIn("preload: 3 programs, 1 differ from their baseline", r.stdout)

    def test_a_test_passing_only_under_the_preload_differs_too(self):
        r = self.run_apps(FAKE_OWN_RESULT="skip")
        self.assertIn("preload: 3 programs, 1 differ from their baseline", r.stdout)

    def test_a_run_that_did_not_finish_differs(self):
        r = self.run_apps(FAKE_UNFINISHED="verify")
        self.assertIn("verify:unfinished-exit-1", r.stdout)
        self.assertNotEqual(r.returncode, 0, r.stdout)


# A test package shaped as rdma-core's: `args_parser.parser`, and `tests.__test_modules__`.
ARGS_PARSER = """
import sys
class _P:
    args = None
    def parse_args(self):
        self.args = {"dev": sys.argv[sys.argv.index("--dev") + 1]}
parser = _P()
"""
INIT = """
import importlib
from args_parser import parser
__test_modules__ = [importlib.import_module(".test_a", __name__), importlib.import_module(".test_b", __name__)]
"""
TEST_A = """
import unittest
from args_parser import parser
class A(unittest.TestCase):
    def test_pass(self):
        self.assertEqual(parser.args["dev"], "rxe0")
    def test_fail(self):
        self.fail("no")
    def test_error(self):
        raise OSError("device")
    def test_skip(self):
        raise unittest.SkipTest("no XRC")
    @unittest.expectedFailure
    def test_expected(self):
        self.fail("known")
class Broken(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        raise OSError("no device")
    def test_never(self):
        pass
"""
TEST_B = """
import unittest
class B(unittest.TestCase):
    def test_other(self):
        pass
"""


class PyverbsResults(unittest.TestCase):
    """tests/vm/pyverbs-results.py on a small package shaped as rdma-core's tests."""

    def run_results(self, *modules: str) -> list[str]:
        with tempfile.TemporaryDirectory() as tmp:
            pkg = Path(tmp) / "tests"
            pkg.mkdir()
            for name, text in [("args_parser.py", ARGS_PARSER), ("__init__.py", INIT),
                               ("test_a.py", TEST_A), ("test_b.py", TEST_B)]:
                (pkg / name).write_text(text)
            r = subprocess.run([sys.executable, "-B", str(HERE / "pyverbs-results.py"), tmp, "--dev", "rxe0",
                                *modules], capture_output=True, text=True, timeout=60, check=False)
            self.assertEqual(r.returncode, 0, r.stderr)
            return r.stdout.splitlines()

    def test_one_line_per_test_with_its_result(self):
        lines = self.run_results()
        self.assertEqual(sorted(lines[:-1]), sorted([
            "pyverbs-test tests.test_a.A.test_pass pass",
            "pyverbs-test tests.test_a.A.test_fail fail",
            "pyverbs-test tests.test_a.A.test_error error",
            "pyverbs-test tests.test_a.A.test_skip skip",
            "pyverbs-test tests.test_a.A.test_expected pass",
            "pyverbs-test setUpClass_(tests.test_a.Broken) error",
            "pyverbs-test tests.test_b.B.test_other pass",
        ]))
        self.assertEqual(lines[-1], "pyverbs-done 7")

    def test_named_modules_only(self):
        lines = self.run_results("test_b")
        self.assertEqual(lines, ["pyverbs-test tests.test_b.B.test_other pass", "pyverbs-done 1"])


if __name__ == "__main__":
    unittest.main()
