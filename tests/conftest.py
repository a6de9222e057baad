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


def pytest_collection_modifyitems(items):
    items.sort(key=lambda item: not any(part in item.nodeid for part in HEAVY))  # a stable sort
