import os

import pytest

# The suite runs on TensorFlow; the JAX checks start their own processes.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@pytest.fixture(autouse=True)
def seeded():
    """Every test starts from the same random state, so a failure repeats."""
    import keras

    keras.utils.set_random_seed(0)

# The golden-array scripts need torch; they are run, not collected.
collect_ignore = ["goldens"]
