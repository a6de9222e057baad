"""RTransformerBlock against the public R-Transformer code (PyTorch), through
the committed golden arrays of `tests/goldens/make_r_transformer_goldens.py`
(float64), loaded with `keras_relrec.migrate.load_r_transformer_block`;
and the block's equations against a float64 NumPy computation (in float32
and under the float64 policy, tests/layers/float64.py). Where torch
and a checkout of the reference are at hand (R_TRANSFORMER=<checkout>,
REFERENCE_PYTHON=<a python with torch>), the script runs again and must give
the committed arrays."""

import os
import pathlib
import subprocess

import keras
import numpy as np
import pytest

from keras_relrec.layers import RTransformerBlock
from keras_relrec.migrate import load_r_transformer_block
from tests.layers.local_recurrence.gradient_memory import gradient_temporaries
from tests.layers.local_recurrence.test_local_recurrence import gru_np
from tests.layers.local_recurrence.test_local_recurrence import local_recurrence_np

GOLDENS = pathlib.Path(__file__).parents[2] / "goldens"
FILES = sorted(GOLDENS.glob("r_transformer_block_*.npz"))
CELLS = {"gru": "gru", "lstm": "lstm", "rnn": "simple_rnn"}
ATOL = 1e-5


def params(golden):
    return {k[len("param/"):]: golden[k] for k in golden.files if k.startswith("param/")}


def block_for(golden, name, **kwargs):
    block = RTransformerBlock(int(golden["h"]), int(golden["ksize"]), num_local_layers=int(golden["n"]),
                              cell=CELLS[name], **kwargs)
    block(golden["x"].astype("float32"))
    not_loaded = load_r_transformer_block(block, params(golden))
    assert sorted(not_loaded) == sorted(k for k in params(golden) if ".local_rnn.output." in k)
    return block


def test_goldens_are_committed():
    assert [p.stem for p in FILES] == [f"r_transformer_block_{n}" for n in ("gru", "lstm", "rnn")]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_the_block_matches_the_reference(path):
    golden = np.load(path)
    name = path.stem.rsplit("_", 1)[1]
    block = block_for(golden, name)
    np.testing.assert_allclose(block(golden["x"].astype("float32")), golden["output"], atol=ATOL)
    # Chunked local recurrence: the same.
    chunked = block_for(golden, name, chunk_size=2)
    np.testing.assert_allclose(chunked(golden["x"].astype("float32")), golden["output"], atol=ATOL)


def test_keras_layer_norm_is_the_documented_other_choice():
    """norm="standard" differs from the reference by the unbiased std: its
    output is not the golden one (so the option is not a no-op)."""
    golden = np.load(GOLDENS / "r_transformer_block_gru.npz")
    block = block_for(golden, "gru", norm="standard")
    assert np.abs(np.asarray(block(golden["x"].astype("float32"))) - golden["output"]).max() > 1e-3


def test_the_loader_refuses_a_block_of_another_shape():
    golden = np.load(GOLDENS / "r_transformer_block_gru.npz")
    block = RTransformerBlock(2, 3, num_local_layers=1)
    block(golden["x"].astype("float32"))
    with pytest.raises(ValueError, match="2 local layers; the block has 1"):
        load_r_transformer_block(block, params(golden))
    wide = RTransformerBlock(2, 3, num_local_layers=2)
    wide(np.zeros((1, 3, 10), "float32"))
    with pytest.raises(ValueError, match=r"R-Transformer weight '.*' must have shape"):
        load_r_transformer_block(wide, params(golden))


def layer_norm_np(x, scale, offset, epsilon=1e-6):
    centred = x - x.mean(-1, keepdims=True)
    return scale * centred / (np.sqrt((centred**2).sum(-1, keepdims=True) / (x.shape[-1] - 1)) + epsilon) + offset


def softmax_np(z):
    z = z - z.max(-1, keepdims=True)
    return np.exp(z) / np.exp(z).sum(-1, keepdims=True)


def test_the_block_equations_with_padding(precision):
    """The docstring's equations in float64 NumPy on a batch whose second
    row is padded before and after: the padded steps are dropped from the
    sequence the equations see, and come out as zeros."""
    rng = np.random.default_rng(0)
    d, heads, window = 6, 2, 3
    block = RTransformerBlock(heads, window, intermediate_dim=10, bias_initializer="random_normal")
    x = precision.array(rng.normal(size=(2, 7, d)))
    mask = np.ones((2, 7), bool)
    mask[1, :2] = mask[1, -1] = False
    block(x)
    for w in block.weights:  # norms away from 1 and 0
        if w.path.endswith(("gamma", "beta")):
            w.assign(rng.normal(size=w.shape) * 0.3 + (1.0 if w.path.endswith("gamma") else 0.0))
    got = keras.ops.convert_to_numpy(block(x, mask=mask))
    weights = {w.path.split("/", 1)[1]: np.asarray(w, "float64") for w in block.weights}

    def dense(h, name):
        return h @ weights[f"{name}/kernel"] + weights[f"{name}/bias"]

    def norm(h, name):
        return layer_norm_np(h, weights[f"{name}/gamma"], weights[f"{name}/beta"])

    cell = [weights[f"local_0/local_0_cell/{n}"] for n in ("kernel", "recurrent_kernel", "bias")]
    for row in range(2):
        h = x[row, mask[row]].astype("float64")[None]
        steps = h.shape[1]
        h = h + local_recurrence_np(lambda xk, s: gru_np(cell, xk, s), d, norm(h, "local_0_norm"), window)
        a = norm(h, "attention_norm")
        q, k, v = (dense(a, f"attention_{p}").reshape(steps, heads, d // heads).transpose(1, 0, 2)
                   for p in ("query", "key", "value"))
        logits = q @ k.transpose(0, 2, 1) / np.sqrt(d // heads)
        logits = np.where(np.tril(np.ones((steps, steps), bool)), logits, -np.inf)
        attended = (softmax_np(logits) @ v).transpose(1, 0, 2).reshape(1, steps, d)
        h = h + dense(attended, "attention_output")
        inner = np.maximum(dense(norm(h, "feed_forward_norm"), "feed_forward_inner"), 0)
        h = h + dense(inner, "feed_forward_output")
        precision.assert_close(got[row, mask[row]], h[0], atol=ATOL)
    np.testing.assert_array_equal(got[~mask], 0.0)


def test_any_length_beyond_the_reference_caps():
    """The reference's attention mask stops at 3,000 steps; here 3,500 run,
    and the outputs before 3,000 do not depend on what comes after."""
    block = RTransformerBlock(2, 4, chunk_size=1024)
    x = np.random.default_rng(1).normal(size=(1, 3500, 4)).astype("float32")
    long = np.asarray(block(x))
    np.testing.assert_allclose(long[:, :100], block(x[:, :100]), atol=ATOL)


# Chunks of one position, a size the length does not divide, one chunk
# longer than the sequence. make check: the block's attention and two local
# layers recomputed chunk by chunk, eagerly and under XLA, cost more than
# make test's time limit (the chunked local recurrence alone is held to the
# same property in make test, tests/layers/local_recurrence). Each XLA
# compile costs 5-10 s whatever the length, so XLA runs where its program
# differs: both masks at 4, the mask at 1; a chunk longer than the
# sequence runs the unchunked program, whose XLA training the contract
# checks.
@pytest.mark.check
@pytest.mark.parametrize(("chunk", "compiled"), [(1, ("mask",)), (4, ("none", "mask")), (16, ())], ids=["1", "4", "16"])
def test_chunked_block_trains_as_the_unchunked_one(chunk, compiled):
    """chunk_size=C: the local layers and the attention C positions at a
    time, each chunk recomputed by the gradient; the same outputs and
    gradients, with and without a mask, eagerly and (`compiled`) under XLA
    (an LSTM cell, two local layers, a length C does not divide)."""
    import tensorflow as tf

    x = tf.constant(np.random.default_rng(2).normal(size=(2, 11, 8)).astype("float32"))
    mask = np.ones((2, 11), bool)
    mask[0, 8:] = False
    mask[1, 3:6] = False
    whole = RTransformerBlock(2, 3, num_local_layers=2, cell="lstm", bias_initializer="random_normal")
    whole(x)
    chunked = RTransformerBlock.from_config({**whole.get_config(), "chunk_size": chunk})
    chunked(x)
    chunked.set_weights(whole.get_weights())

    def step(block, m, training=True):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = block(x, mask=m, training=training)
            loss = tf.reduce_sum(y**2)
        return [y] + tape.gradient(loss, [x] + block.trainable_weights)

    for name, m in (("none", None), ("mask", mask)):
        want = step(whole, m)
        for run in (step, tf.function(step, jit_compile=True)) if name in compiled else (step,):
            for a, b in zip(want, run(chunked, m)):
                np.testing.assert_allclose(a, b, atol=1e-4)
        np.testing.assert_allclose(chunked(x, mask=m), whole(x, mask=m), atol=ATOL)


# make check: a JAX process of its own, its import and two compiles at a
# length where the memory shows (above make test's time limit).
@pytest.mark.check
def test_chunked_block_keeps_no_attention_matrix():
    """The XLA program of a training step (JAX) at T = 1,500: without
    chunks it keeps (batch, heads, T, T) weights for the gradient; with
    them, a fraction of that memory."""
    whole, chunked = gradient_temporaries("RTransformerBlock", "2, 5", (2, 1500, 16), 100)
    weights = 2 * 2 * 1500 * 1500 * 4  # one (batch, heads, T, T) float32 tensor
    assert whole > 2 * weights and chunked < weights / 2, (whole, chunked, weights)


# The live rerun: `make test-parity` (and `make test-slow`).
@pytest.mark.slow
@pytest.mark.skipif(not (os.environ.get("R_TRANSFORMER") and os.environ.get("REFERENCE_PYTHON")),
                    reason="live comparison: set R_TRANSFORMER (a checkout) and REFERENCE_PYTHON (with torch)")
def test_the_script_reproduces_the_committed_goldens(tmp_path):
    subprocess.run([os.environ["REFERENCE_PYTHON"], str(GOLDENS / "make_r_transformer_goldens.py"),
                    os.environ["R_TRANSFORMER"], str(tmp_path)], check=True)
    for path in FILES:
        fresh, committed = np.load(tmp_path / path.name), np.load(path)
        assert sorted(fresh.files) == sorted(committed.files)
        for key in committed.files:
            np.testing.assert_allclose(fresh[key], committed[key], atol=1e-12, err_msg=key)


def test_a_model_of_blocks_saves_and_reloads(tmp_path):
    inputs = keras.Input((None, 8))
    h = RTransformerBlock(2, 3, num_local_layers=2, cell="lstm")(keras.layers.Masking(0.0)(inputs))
    model = keras.Model(inputs, RTransformerBlock(4, 5, norm="standard", dropout=0.1)(h))
    x = np.random.default_rng(2).normal(size=(2, 6, 8)).astype("float32")
    model.save(tmp_path / "m.keras")
    np.testing.assert_allclose(keras.saving.load_model(tmp_path / "m.keras")(x), model(x), atol=ATOL)
