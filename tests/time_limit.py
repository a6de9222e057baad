"""Test time is a budget: a test of `make test` (no `check` or `slow`
marker, on TensorFlow) whose setup and call take longer than `LIMIT_S`
fails when it lands, not at the next measurement of the tier.

The limit is in seconds of the development machine (2 cores, two pytest
workers, as `make test` runs). Machines of the same name differ in speed,
so each worker first times `calibration_work()`, a fixed piece of Python
and small NumPy calls of the kind that tracing a model is made of, and scales the
limit by how much longer it took than `REFERENCE_S` (never below 1): a
machine twice as slow allows twice the seconds. `KERAS_RELREC_TEST_TIME_SCALE`
sets the scale instead, e.g. under a profiler.

In a session that runs `make check`'s tests too (CI), the tests of `make
test` share the two cores with heavier checks and their subprocesses (a
test of 7.3 s in `make test` took 13.2 s there): the limit is `IN_CHECK`
times longer there.

The session's summary lists the slowest tests of `make test` with their
seconds and the limit they were held to.
"""

import os
import time

import numpy as np
import pytest

LIMIT_S = 10.0
# calibration_work()'s best time of three on the development machine, with
# the other core busy (as under `make test`): 0.050-0.052 s.
REFERENCE_S = 0.05
SLOWEST_SHOWN = 15
IN_CHECK = 2.5


def calibration_work():
    """Dict work in the interpreter and NumPy calls on arrays too small for
    their arithmetic to count: what building and tracing a Keras model
    spends its time on. Neither depends on the CPU's vector instructions,
    which large-array math (np.tanh of a 64x64 array took 4x longer on a
    CPU without AVX-512) would make the scale measure instead."""
    table = {}
    for i in range(100_000):
        table[i % 997] = table.get(i % 997, 0) + i
    a = np.ones((4, 4))
    for _ in range(5_000):
        a = np.maximum(a * 0.5, a.T)
    return sum(table.values()) + float(a.sum())


def machine_scale():
    """How much slower than the development machine this one is (≥ 1), or
    `KERAS_RELREC_TEST_TIME_SCALE`."""
    given = os.environ.get("KERAS_RELREC_TEST_TIME_SCALE")
    if given:
        return float(given)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        calibration_work()
        times.append(time.perf_counter() - start)
    return scale_for(min(times))


def scale_for(seconds):
    """The limit's scale for calibration_work() taking `seconds`."""
    return max(1.0, seconds / REFERENCE_S)


def in_make_test(item):
    """Whether `make test` runs the test: on TensorFlow, with neither tier
    marker."""
    return (os.environ.get("KERAS_BACKEND") == "tensorflow"
            and not any(item.iter_markers("check")) and not any(item.iter_markers("slow")))


_SCALE = []  # the machine's scale, measured as the session starts
_SETUP_S = pytest.StashKey[float]()
_TIMES = {}  # node id: seconds of setup, call and teardown
_LIMITS = {}  # node id: the limit a test of make test was held to


def pytest_sessionstart(session):
    # Before any test, so that none shares the machine with the timing.
    _SCALE.append(machine_scale())


def pytest_collection_finish(session):
    if any(any(item.iter_markers("check")) for item in session.items):
        _SCALE[-1] *= IN_CHECK


def limit_s():
    """This machine's limit for a test of `make test`, in seconds."""
    return LIMIT_S * _SCALE[-1]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if report.when == "setup":
        item.stash[_SETUP_S] = report.duration
    if report.when != "call" or not in_make_test(item):
        return
    took, limit = item.stash.get(_SETUP_S, 0.0) + report.duration, limit_s()
    # Read by the summary, on the controller too under xdist.
    report.user_properties.append(("make_test_limit_s", limit))
    message = over_limit(item.nodeid, took, limit)
    if report.passed and message:
        report.outcome, report.longrepr = "failed", message


def over_limit(nodeid, took, limit):
    """Why a test of `took` seconds fails against `limit`; None within it."""
    if took <= limit:
        return None
    return (
        f"{nodeid} took {took:.1f} s (setup and call), over make test's limit of {limit:.1f} s "
        f"({LIMIT_S:.0f} s on the development machine): share a compiled model or a converted file with the "
        "other tests that read it, make the configuration smaller where the property holds at any size, "
        "or move the test to make check (@pytest.mark.check) with the reason (docs/contributing.md)."
    )


def pytest_runtest_logreport(report):
    _TIMES[report.nodeid] = _TIMES.get(report.nodeid, 0.0) + report.duration
    for name, value in report.user_properties:
        if name == "make_test_limit_s":
            _LIMITS[report.nodeid] = value


def pytest_terminal_summary(terminalreporter):
    timed = sorted(((_TIMES[nodeid], nodeid) for nodeid in _LIMITS), reverse=True)
    if not timed:
        return
    terminalreporter.section(f"slowest tests of make test (limit {LIMIT_S:.0f} s on the development machine)")
    for took, nodeid in timed[:SLOWEST_SHOWN]:
        terminalreporter.write_line(f"{took:6.1f} s  (limit {_LIMITS[nodeid]:.1f} s)  {nodeid}")
