"""The trained bag-of-features model in savedmodels/ loads in each of its
three formats and scores, on the JapaneseVowels test split, what its card
says."""

import json
import pathlib

import numpy as np
import pytest

from keras_relrec.datasets import load_japanese_vowels
from tests.savedmodels.formats import accuracy
from tests.savedmodels.formats import keras_logits
from tests.savedmodels.formats import micro_logits
from tests.savedmodels.formats import run_card_use
from tests.savedmodels.formats import saved_model_logits
from tests.savedmodels.formats import tflite_logits

FOLDER = pathlib.Path(__file__).parents[2] / "savedmodels" / "japanese_vowels_nbof"
STEM = "japanese_vowels_nbof"
CARD = json.loads((FOLDER / "card.json").read_text())
# The test split is fixed: Keras must reproduce the card's accuracy; the
# exported files may differ from Keras on at most one utterance near a tie.
ONE_UTTERANCE = 1 / 370


@pytest.fixture(scope="module")
def test_split():
    x, y, _ = load_japanese_vowels("test", max_length=CARD["max_length"])
    return x, y


@pytest.fixture(scope="module")
def reference(test_split):
    return keras_logits(FOLDER, STEM, test_split[0])


def test_keras_file(test_split, reference):
    assert accuracy(reference, test_split[1]) == pytest.approx(CARD["test_accuracy"], abs=1e-6)


@pytest.mark.parametrize("run", [
    lambda x: saved_model_logits(FOLDER, STEM, "sequence", x),
    lambda x: tflite_logits(FOLDER, STEM, x),
    lambda x: micro_logits(FOLDER, STEM, x),
], ids=["saved_model", "tflite", "tflite_micro"])
def test_exports(test_split, reference, run):
    logits = run(test_split[0])
    np.testing.assert_allclose(logits, reference, atol=1e-4)
    assert accuracy(logits, test_split[1]) >= CARD["test_accuracy"] - ONE_UTTERANCE


def test_the_cards_use_block_predicts(monkeypatch):
    use = run_card_use(FOLDER, monkeypatch)
    assert use["logits"].shape == (1, 9) and np.isfinite(use["logits"]).all()
