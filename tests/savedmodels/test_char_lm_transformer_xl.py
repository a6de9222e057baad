"""The trained character-level Transformer-XL in savedmodels/ loads in each
of its formats, and they agree: `.keras`, the SavedModel's `serve` and
`step`, the TFLite sequence file and the TFLite step run by segment; the
`.keras` model scores the card's test snippet as it should."""

import json
import math
import pathlib

import keras
import numpy as np
import pytest

from keras_relrec.export import run_streaming
from tests.savedmodels.formats import run_card_use
from tests.savedmodels.formats import saved_model_logits
from tests.savedmodels.formats import tflite_logits

FOLDER = pathlib.Path(__file__).parents[2] / "savedmodels" / "char_lm_transformer_xl"
STEM = "char_lm_transformer_xl"
CARD = json.loads((FOLDER / "card.json").read_text())


@pytest.fixture(scope="module")
def snippet():
    tokens = np.frombuffer(CARD["test_snippet"].encode("latin-1"), np.uint8).astype("int32")
    return tokens[None]


@pytest.fixture(scope="module")
def reference(snippet):
    model = keras.saving.load_model(FOLDER / f"{STEM}.keras", safe_mode=True)
    return model.predict(snippet, verbose=0)


def test_keras_file_scores_its_card(snippet, reference):
    """The card's bits per character on its test snippet (from an empty
    memory), far below a uniform guess's 8."""
    logits = reference[0, :-1].astype("float64")
    logits -= logits.max(-1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    bits = -log_probs[np.arange(len(logits)), snippet[0, 1:]].mean() / math.log(2)
    assert bits == pytest.approx(CARD["snippet_bpc"], abs=1e-4)
    assert bits < 5


def test_saved_model_and_tflite_agree(snippet, reference):
    np.testing.assert_allclose(saved_model_logits(FOLDER, STEM, "tokens", snippet), reference, atol=1e-4)
    np.testing.assert_allclose(tflite_logits(FOLDER, STEM, snippet), reference, atol=1e-4)


def test_tflite_step_by_segment(snippet, reference):
    result = run_streaming(FOLDER / f"{STEM}_step.tflite", snippet)
    np.testing.assert_allclose(result["output"], reference, atol=1e-4)


def test_the_cards_use_block_predicts(monkeypatch):
    use = run_card_use(FOLDER, monkeypatch)
    assert use["logits"].shape == (1, use["x"].shape[1], 256) and np.isfinite(use["logits"]).all()
