"""A Transformer-XL language model with adaptive input and adaptive softmax
(HF's WT103 structure, scaled down, its weights from the committed HF
checkpoint) exported as a streaming step of builtins only: fed a token
stream one segment at a time, batch 1, LiteRT gives Keras'
log-probabilities of the next token."""

import json

import keras
import numpy as np

from keras_relrec.export import export_tflite
from keras_relrec.export import run_streaming
from keras_relrec.migrate import build_hf_transfo_xl
from keras_relrec.migrate import load_hf_transfo_xl
from keras_relrec.migrate import read_safetensors
from tests.migrate.test_hf_transfo_xl import CHECKPOINT


def test_the_step_with_adaptive_softmax_is_builtins_only_and_matches_keras(tmp_path):
    backbone, head = build_hf_transfo_xl(json.loads((CHECKPOINT / "config.json").read_text()), segment_len=4)
    load_hf_transfo_xl(backbone, read_safetensors(CHECKPOINT / "model.safetensors"), head=head)
    tokens = keras.Input((None,), dtype="int32", name="sequence")
    model = keras.Model(tokens, head(backbone(tokens)))
    path = tmp_path / "step.tflite"
    summary = export_tflite(model, path, streaming=True)
    assert not [op for op in summary["ops"] if op.startswith(("CUSTOM", "FlexOp"))], summary["ops"]
    ids = np.random.default_rng(0).integers(0, 100, size=(1, 12)).astype("int32")
    got = run_streaming(path, ids)["output"]
    want = model.predict(ids, verbose=0)
    assert got.shape == want.shape == (1, 12, 100)
    # Log-probabilities reach −30 here: float32 holds them to a relative 1e-6.
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(got.argmax(-1), want.argmax(-1))
