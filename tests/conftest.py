import os

import pytest

# The suite runs on TensorFlow; the JAX checks start their own processes.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# TensorFlow's oneDNN kernels on, as on CPUs with AVX-512, whatever this CPU
# is; the contract's portable worker runs every entry with them off.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")


@pytest.fixture(autouse=True)
def seeded():
    """Every test starts from the same random state, so a failure repeats."""
    import keras

    keras.utils.set_random_seed(0)

# The golden-array scripts need torch; they are run, not collected.
collect_ignore = ["goldens"]

# Tests of a minute or more on two cores (measured with --durations): run
# first, so that `make test`'s two workers finish together rather than one
# waiting on a long test at the end.
HEAVY = (
    "tests/test_tutorials.py",
    "tests/test_demo_and_benchmarks.py",
    "test_on_jax",
    "tests/contract/test_contract.py::test_other_backends",
)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items):
    # A module-scoped fixture is set up once per worker that runs a test
    # using it: the tests that use one form a group (one worker), so that a
    # reference model is loaded or converted once, not twice.
    for item in items:
        defs = getattr(item, "_fixtureinfo", None)
        # The last definition of a name is the one the test gets.
        scopes = {ds[-1].scope for ds in (defs.name2fixturedefs.values() if defs else ()) if ds}
        if "module" in scopes and not any(item.iter_markers("xdist_group")):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))
    items.sort(key=lambda item: not any(part in item.nodeid for part in HEAVY))  # a stable sort
