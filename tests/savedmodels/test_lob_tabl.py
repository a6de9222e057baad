"""The trained C(TABL) in savedmodels/ loads in each of its three formats and
scores, on the synthetic order-book test windows its card names, what the
card says."""

import json
import pathlib

import numpy as np
import pytest

from keras_relrec.datasets import synthetic_lob
from tests.savedmodels.formats import accuracy
from tests.savedmodels.formats import keras_logits
from tests.savedmodels.formats import micro_logits
from tests.savedmodels.formats import run_card_use
from tests.savedmodels.formats import saved_model_logits
from tests.savedmodels.formats import tflite_logits

FOLDER = pathlib.Path(__file__).parents[2] / "savedmodels" / "lob_tabl"
STEM = "lob_tabl"
CARD = json.loads((FOLDER / "card.json").read_text())
# The test windows are regenerated from their seed: Keras must reproduce
# the card; the exports may differ on a window or two near a tie.
TIES = 2 / CARD["test_size"]


@pytest.fixture(scope="module")
def test_windows():
    return synthetic_lob(CARD["test_size"], signal=CARD["signal"], seed=tuple(CARD["test_seed"]))


@pytest.fixture(scope="module")
def reference(test_windows):
    return keras_logits(FOLDER, STEM, test_windows[0])


def test_keras_file(test_windows, reference):
    assert accuracy(reference, test_windows[1]) == pytest.approx(CARD["test_accuracy"], abs=1e-6)


@pytest.mark.parametrize("run", [
    lambda x: saved_model_logits(FOLDER, STEM, "window", x),
    lambda x: tflite_logits(FOLDER, STEM, x),
    lambda x: micro_logits(FOLDER, STEM, x),
], ids=["saved_model", "tflite", "tflite_micro"])
def test_exports(test_windows, reference, run):
    logits = run(test_windows[0])
    np.testing.assert_allclose(logits, reference, atol=1e-4)
    assert accuracy(logits, test_windows[1]) >= CARD["test_accuracy"] - TIES


def test_the_cards_use_block_predicts(monkeypatch):
    use = run_card_use(FOLDER, monkeypatch)
    assert use["logits"].shape == (1, 3) and np.isfinite(use["logits"]).all()
