"""The trained bag-of-features model in savedmodels/ loads in each of its
three formats and scores, on the JapaneseVowels test split, what its card
says."""

import json
import pathlib

import keras
import numpy as np
import pytest

from keras_relrec.datasets import load_japanese_vowels
from keras_relrec.export import run_sequence

FOLDER = pathlib.Path(__file__).parents[2] / "savedmodels" / "japanese_vowels_nbof"
CARD = json.loads((FOLDER / "card.json").read_text())
# The test split is fixed: Keras must reproduce the card's accuracy; the
# exported files may differ from Keras on at most one utterance near a tie.
ONE_UTTERANCE = 1 / 370


@pytest.fixture(scope="module")
def test_split():
    x, y, _ = load_japanese_vowels("test", max_length=CARD["max_length"])
    return x, y


@pytest.fixture(scope="module")
def keras_logits(test_split):
    model = keras.saving.load_model(FOLDER / "japanese_vowels_nbof.keras", safe_mode=True)
    return model.predict(test_split[0], verbose=0)


def accuracy(logits, y):
    return float((np.asarray(logits).argmax(-1) == y).mean())


def test_keras_file(test_split, keras_logits):
    assert accuracy(keras_logits, test_split[1]) == pytest.approx(CARD["test_accuracy"], abs=1e-6)


def test_saved_model(test_split, keras_logits):
    import tensorflow as tf

    loaded = tf.saved_model.load(str(FOLDER / "japanese_vowels_nbof_savedmodel"))
    logits = loaded.serve({"sequence": test_split[0]})["output"]
    np.testing.assert_allclose(logits, keras_logits, atol=1e-4)
    assert accuracy(logits, test_split[1]) >= CARD["test_accuracy"] - ONE_UTTERANCE


def test_tflite(test_split, keras_logits):
    logits = run_sequence(FOLDER / "japanese_vowels_nbof.tflite", test_split[0])["output"]
    np.testing.assert_allclose(logits, keras_logits, atol=1e-4)
    assert accuracy(logits, test_split[1]) >= CARD["test_accuracy"] - ONE_UTTERANCE
