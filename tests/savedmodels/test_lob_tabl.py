"""The trained C(TABL) in savedmodels/ loads in each of its three formats and
scores, on the synthetic order-book test windows its card names, what the
card says."""

import json
import pathlib

import keras
import numpy as np
import pytest

from keras_relrec.datasets import synthetic_lob
from keras_relrec.export import run_sequence

FOLDER = pathlib.Path(__file__).parents[2] / "savedmodels" / "lob_tabl"
CARD = json.loads((FOLDER / "card.json").read_text())
# The test windows are regenerated from their seed: Keras must reproduce
# the card; the exports may differ on a window or two near a tie.
TIES = 2 / CARD["test_size"]


@pytest.fixture(scope="module")
def test_windows():
    return synthetic_lob(CARD["test_size"], signal=CARD["signal"], seed=tuple(CARD["test_seed"]))


@pytest.fixture(scope="module")
def keras_logits(test_windows):
    model = keras.saving.load_model(FOLDER / "lob_tabl.keras", safe_mode=True)
    return model.predict(test_windows[0], verbose=0)


def accuracy(logits, y):
    return float((np.asarray(logits).argmax(-1) == y).mean())


def test_keras_file(test_windows, keras_logits):
    assert accuracy(keras_logits, test_windows[1]) == pytest.approx(CARD["test_accuracy"], abs=1e-6)


def test_saved_model(test_windows, keras_logits):
    import tensorflow as tf

    loaded = tf.saved_model.load(str(FOLDER / "lob_tabl_savedmodel"))
    logits = loaded.serve({"window": test_windows[0]})["output"]
    np.testing.assert_allclose(logits, keras_logits, atol=1e-4)
    assert accuracy(logits, test_windows[1]) >= CARD["test_accuracy"] - TIES


def test_tflite(test_windows, keras_logits):
    logits = run_sequence(FOLDER / "lob_tabl.tflite", test_windows[0])["output"]
    np.testing.assert_allclose(logits, keras_logits, atol=1e-4)
    assert accuracy(logits, test_windows[1]) >= CARD["test_accuracy"] - TIES
