"""The trained DRRT of the BasicMotions tutorial in savedmodels/ loads in
each of its formats, and they agree: `.keras`, the SavedModel's `serve` and
the TFLite file in LiteRT (two inputs by name); the `.keras` model
classifies the card's test recordings as the card says."""

import json
import pathlib

import numpy as np
import pytest

from tests.savedmodels.formats import accuracy
from tests.savedmodels.formats import keras_logits
from tests.savedmodels.formats import run_card_use
from tests.savedmodels.formats import saved_model_logits
from tests.savedmodels.formats import tflite_logits

FOLDER = pathlib.Path(__file__).parents[2] / "savedmodels" / "basic_motions"
STEM = "basic_motions_drrt"
CARD = json.loads((FOLDER / "card.json").read_text())
RECORDINGS = np.load(FOLDER / "test_recordings.npz")
FEED = {name: RECORDINGS[name].astype("float32") for name in ("accelerometer", "gyroscope")}


@pytest.fixture(scope="module")
def reference():
    return keras_logits(FOLDER, STEM, FEED)


def test_keras_file_classifies_as_its_card_says(reference):
    got = accuracy(reference, RECORDINGS["labels"])
    assert got == pytest.approx(CARD["test_accuracy"])
    assert got >= 0.9  # chance is 1/4


def test_saved_model_agrees(reference):
    np.testing.assert_allclose(saved_model_logits(FOLDER, STEM, None, FEED), reference, atol=1e-4)


def test_tflite_agrees(reference):
    np.testing.assert_allclose(tflite_logits(FOLDER, STEM, FEED), reference, atol=1e-4)


def test_the_cards_use_block_predicts(monkeypatch):
    use = run_card_use(FOLDER, monkeypatch)
    assert use["logits"].shape == (1, 4) and np.isfinite(use["logits"]).all()
