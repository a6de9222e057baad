"""The trained relational memory core in savedmodels/ loads in each of its
three formats and scores, on fresh Nth-farthest examples, what its card
says."""

import json
import pathlib

import numpy as np
import pytest

from keras_relrec.datasets import nth_farthest
from tests.savedmodels.formats import accuracy
from tests.savedmodels.formats import keras_logits
from tests.savedmodels.formats import run_card_use
from tests.savedmodels.formats import saved_model_logits
from tests.savedmodels.formats import tflite_logits

FOLDER = pathlib.Path(__file__).parents[2] / "savedmodels" / "nth_farthest_rmc"
STEM = "nth_farthest_rmc"
CARD = json.loads((FOLDER / "card.json").read_text())
# 3,000 fresh examples: the accuracy's standard error is under 1 point, so
# 3 points below the card's figure is a real regression, not noise.
MARGIN = 0.03


@pytest.fixture(scope="module")
def fresh():
    return nth_farthest(3000, **CARD["task"], seed=12345)


def test_keras_file(fresh):
    x, y = fresh
    assert accuracy(keras_logits(FOLDER, STEM, x), y) >= CARD["test_accuracy"] - MARGIN


def test_saved_model(fresh):
    x, y = fresh
    logits = saved_model_logits(FOLDER, STEM, "rows", x)
    assert accuracy(logits, y) >= CARD["test_accuracy"] - MARGIN


def test_tflite(fresh):
    x, y = fresh
    logits = tflite_logits(FOLDER, STEM, x)
    assert accuracy(logits, y) >= CARD["test_accuracy"] - MARGIN
    np.testing.assert_allclose(logits, keras_logits(FOLDER, STEM, x), atol=1e-4)


def test_the_cards_use_block_predicts(monkeypatch):
    use = run_card_use(FOLDER, monkeypatch)
    assert use["logits"].shape == (1, 3) and np.isfinite(use["logits"]).all()
