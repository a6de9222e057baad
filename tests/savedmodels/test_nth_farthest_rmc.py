"""The trained relational memory core in savedmodels/ loads in each of its
three formats and scores, on fresh Nth-farthest examples, what its card
says."""

import json
import pathlib

import keras
import numpy as np
import pytest

from keras_relrec.datasets import nth_farthest
from keras_relrec.export import run_sequence

FOLDER = pathlib.Path(__file__).parents[2] / "savedmodels" / "nth_farthest_rmc"
CARD = json.loads((FOLDER / "card.json").read_text())
# 3,000 fresh examples: the accuracy's standard error is under 1 point, so
# 3 points below the card's figure is a real regression, not noise.
MARGIN = 0.03


@pytest.fixture(scope="module")
def fresh():
    return nth_farthest(3000, **CARD["task"], seed=12345)


def accuracy(logits, y):
    return float((np.asarray(logits).argmax(-1) == y).mean())


def test_keras_file(fresh):
    x, y = fresh
    model = keras.saving.load_model(FOLDER / "nth_farthest_rmc.keras", safe_mode=True)
    assert accuracy(model.predict(x, verbose=0), y) >= CARD["test_accuracy"] - MARGIN


def test_saved_model(fresh):
    import tensorflow as tf

    x, y = fresh
    loaded = tf.saved_model.load(str(FOLDER / "nth_farthest_rmc_savedmodel"))
    logits = loaded.serve({"rows": x})["output"]
    assert accuracy(logits, y) >= CARD["test_accuracy"] - MARGIN


def test_tflite(fresh):
    x, y = fresh
    logits = run_sequence(FOLDER / "nth_farthest_rmc.tflite", x)["output"]
    assert accuracy(logits, y) >= CARD["test_accuracy"] - MARGIN
    model = keras.saving.load_model(FOLDER / "nth_farthest_rmc.keras", safe_mode=True)
    np.testing.assert_allclose(logits, model.predict(x, verbose=0), atol=1e-4)
