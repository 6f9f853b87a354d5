"""Run rdma-core's pyverbs tests and print one line per test: `pyverbs-test <id> <result>`.

Usage: python3 pyverbs-results.py ROOT --dev DEVICE [--gid N] [MODULE...]

ROOT holds rdma-core's test package as `ROOT/tests` (Debian's python3-pyverbs ships it
gzip-compressed under /usr/share/doc/rdma-core/tests; tests/vm/run unpacks it). The package
loads every `test_*.py` it holds; with MODULE names (`test_cq`, ...) only their tests run.
<result> is pass, fail, error or skip (an expected failure counts as pass, an unexpected
success as fail); an error raised outside a test (setUpClass, a module that does not import)
gets the id unittest gives it. The last line is `pyverbs-done <tests run>`, so a run that died
half-way is told from one that finished. tests/vm/preload-apps compares these lines, test by
test, between a run without the preload and runs under it. The exit status is 0 whatever
the tests' results: a failing test is data here, not an error of this script.
"""

import os
import sys
import unittest


class PerTest(unittest.TestResult):
    """Prints each test's outcome as it is known (a run killed by a timeout keeps its lines)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def _out(self, test: unittest.TestCase, what: str) -> None:
        self.count += 1
        # A test id has no blanks; an _ErrorHolder's description may: keep one word.
        print(f"pyverbs-test {test.id().replace(' ', '_')} {what}", flush=True)

    def addSuccess(self, test):  # noqa: N802 (unittest's names)
        self._out(test, "pass")

    def addFailure(self, test, err):  # noqa: N802
        super().addFailure(test, err)
        self._out(test, "fail")

    def addError(self, test, err):  # noqa: N802
        super().addError(test, err)
        self._out(test, "error")

    def addSkip(self, test, reason):  # noqa: N802
        self._out(test, "skip")

    def addExpectedFailure(self, test, err):  # noqa: N802
        self._out(test, "pass")

    def addUnexpectedSuccess(self, test):  # noqa: N802
        self._out(test, "fail")


def main() -> int:
    if len(sys.argv) < 2:
        sys.exit(__doc__.split("\n\n")[1])
    root = os.path.abspath(sys.argv[1])
    rest = sys.argv[2:]
    modules = [a for a in rest if a.startswith("test_")]
    options = [a for a in rest if not a.startswith("test_")]
    # The suite's own modules import `args_parser` at top level and `tests.*` as a package.
    sys.path[:0] = [root, os.path.join(root, "tests")]
    from args_parser import parser  # noqa: E402 (needs the path above)

    sys.argv[1:] = options
    parser.parse_args()
    import tests  # noqa: E402

    loader = unittest.TestLoader()
    suite = unittest.TestSuite()
    for mod in tests.__test_modules__:
        if not modules or mod.__name__.rsplit(".", 1)[-1] in modules:
            suite.addTests(loader.loadTestsFromModule(mod))
    result = PerTest()
    suite.run(result)
    for test, trace in result.errors + result.failures:
        # The last line of each trace says why, for the log (stderr: not compared).
        print(f"pyverbs-why {test.id()}: {trace.strip().splitlines()[-1]}", file=sys.stderr)
    print(f"pyverbs-done {result.count}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
