"""The trained segment cache of the long-range recall tutorial in
savedmodels/ loads in each of its formats, and they agree: `.keras`, the
SavedModel's `serve` and its `step` fed segment by segment, and the TFLite
step run segment by segment in LiteRT; the `.keras` model answers the
card's test streams as the card says, far above chance."""

import json
import pathlib

import keras
import numpy as np
import pytest

from keras_relrec.export import run_streaming
from tests.export.saved_model_stream import stream_saved_model
from tests.savedmodels.formats import run_card_use
from tests.savedmodels.formats import saved_model_logits

FOLDER = pathlib.Path(__file__).parents[2] / "savedmodels" / "long_range_recall"
STEM = "long_range_recall_cache"
CARD = json.loads((FOLDER / "card.json").read_text())
STREAMS = np.load(FOLDER / "test_streams.npz")
FEATURES = STREAMS["features"].astype("float32")


@pytest.fixture(scope="module")
def reference():
    model = keras.saving.load_model(FOLDER / f"{STEM}.keras", safe_mode=True)
    return model.predict(FEATURES, verbose=0)


def test_keras_file_answers_as_its_card_says(reference):
    accuracy = float((reference[:, -1].argmax(-1) == STREAMS["answers"]).mean())
    assert accuracy == pytest.approx(CARD["test_streams_accuracy"])
    assert accuracy >= 0.9  # chance is 1/16


def test_saved_model_serve_and_step_agree(reference):
    import tensorflow as tf

    np.testing.assert_allclose(saved_model_logits(FOLDER, STEM, "features", FEATURES), reference, atol=1e-4)
    loaded = tf.saved_model.load(str(FOLDER / f"{STEM}_savedmodel"))
    np.testing.assert_allclose(stream_saved_model(loaded, FEATURES, "features"), reference, atol=1e-4)


def test_tflite_step_agrees(reference):
    result = run_streaming(FOLDER / f"{STEM}_step.tflite", FEATURES)
    np.testing.assert_allclose(result["output"], reference, atol=1e-4)


def test_the_cards_use_block_predicts(monkeypatch):
    use = run_card_use(FOLDER, monkeypatch)
    assert use["logits"].shape == (1, 40, 16) and np.isfinite(use["logits"]).all()
