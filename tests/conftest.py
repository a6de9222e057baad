import os

import pytest

# Each test of `make test` is held to a time limit (tests/time_limit.py).
pytest_plugins = ["tests.time_limit"]

# The suite runs on TensorFlow unless KERAS_BACKEND says otherwise (`make
# check` reruns the tests marked `jax` on JAX).
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# TensorFlow's oneDNN kernels on, as on CPUs with AVX-512, whatever this CPU
# is; `make check` runs the contract's goldens with them off too.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

# The backend is imported as the session starts, not in the first test (whose
# time the limit of tests/time_limit.py holds).
import keras  # noqa: E402


@pytest.fixture(autouse=True)
def seeded():
    """Every test starts from the same random state, so a failure repeats."""
    keras.utils.set_random_seed(0)

# The golden-array scripts are run, not collected.
collect_ignore = ["goldens"]

# What `make check` adds to `make test` (the marker `check`), where a whole
# module or folder does: the promises of the README beyond the layers' own
# equations and contract. Modules that are partly in `make test` mark their
# tests themselves.
CHECK = (
    "tests/datasets/",
    "tests/export/",
    "tests/migrate/",
    "tests/models/",
    "tests/savedmodels/",
    "tests/tuning/",
    "tests/layers/relational/test_model_parallel.py",
    "tests/test_demo_and_benchmarks.py",
    "tests/test_tutorials.py",
)

# Tests of a minute or more on two cores (measured with --durations): run
# first, so that the two workers finish together rather than one waiting on
# a long test at the end.
HEAVY = (
    "tests/contract/test_distribution.py",
    "tests/test_tutorials.py",
    "tests/tuning/test_hyper_models.py::test_search_and_the_best_model",
    "tests/contract/test_exported_files_on_device.py",
    "tests/contract/test_file_writes.py",
)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items):
    for item in items:
        if item.nodeid.startswith(CHECK):
            item.add_marker(pytest.mark.check)
        # A module-scoped fixture is set up once per worker that runs a test
        # using it: the tests that use one form a group (one worker), so that
        # a reference model is loaded or converted once, not twice.
        defs = getattr(item, "_fixtureinfo", None)
        # The last definition of a name is the one the test gets.
        scopes = {ds[-1].scope for ds in (defs.name2fixturedefs.values() if defs else ()) if ds}
        if "module" in scopes and not any(item.iter_markers("xdist_group")):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    items.sort(key=lambda item: not any(part in item.nodeid for part in HEAVY))  # a stable sort


def fail_a_skip_off_tensorflow(report, what):
    """On another backend than TensorFlow, a skipped test or module fails:
    what runs there is backend-neutral, and a check that does not run
    assures nothing."""
    backend = os.environ["KERAS_BACKEND"]
    if backend != "tensorflow" and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"{what} skipped on {backend}, where the suite runs it: {report.longrepr}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    fail_a_skip_off_tensorflow((yield).get_result(), "test")


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    fail_a_skip_off_tensorflow((yield).get_result(), "module")
