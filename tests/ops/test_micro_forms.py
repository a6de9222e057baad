"""The ops' second forms, taken when a model is traced for TensorFlow Lite
for Microcontrollers (`micro_forms.tracing()`), give what their usual forms
give, checked against NumPy: the sort-free compaction of valid steps, the
one-hot gathers and token embeddings, the top-k by counting, the masked
softmax by SOFTMAX, sqrt as x · rsqrt(x) and the BiLSTM summary's loop."""

import contextlib

import keras
import numpy as np
import pytest
from keras import ops

from keras_relrec.layers import SegmentSummary
from keras_relrec.layers import TransformerXL
from keras_relrec.ops import gather_steps
from keras_relrec.ops import masked_softmax
from keras_relrec.ops import micro_forms
from keras_relrec.ops import roots
from keras_relrec.ops import take_along_last_axis
from keras_relrec.ops import top_k_indices
from keras_relrec.ops import valid_steps_back
from keras_relrec.ops import valid_steps_first

FORMS = pytest.mark.parametrize("micro", [False, True], ids=["usual", "micro"])


def in_form(micro, fn, *args):
    if not micro:
        return ops.convert_to_numpy(fn(*args))
    with micro_forms.tracing():
        return ops.convert_to_numpy(fn(*args))


@FORMS
def test_valid_steps_first_and_back(micro):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 7, 3)).astype("float32")
    mask = rng.random((4, 7)) > 0.4
    mask[0], mask[1] = True, False  # every step valid; none
    x[~mask] = np.nan  # what padding holds never reaches the front
    with micro_forms.tracing() if micro else contextlib.nullcontext():
        front, valid = valid_steps_first(x, mask)
        back = valid_steps_back(front, mask)
    front, valid, back = (ops.convert_to_numpy(t) for t in (front, valid, back))
    for b in range(4):
        kept = x[b][mask[b]]
        want = np.concatenate([kept, np.zeros((7 - len(kept), 3), "float32")])
        np.testing.assert_array_equal(front[b], want)
        assert valid[b] == mask[b].sum()
        np.testing.assert_array_equal(back[b], np.where(mask[b][:, None], x[b], 0.0))


@FORMS
def test_gathers(micro):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 6, 2, 2)).astype("float32")
    indices = rng.integers(0, 6, size=(3, 4)).astype("int32")
    got = in_form(micro, gather_steps, x, indices)
    np.testing.assert_array_equal(got, np.stack([x[b, indices[b]] for b in range(3)]))
    scores = rng.normal(size=(2, 3, 4, 5)).astype("float32")
    columns = rng.integers(0, 5, size=(2, 1, 4, 6)).astype("int32")
    got = in_form(micro, take_along_last_axis, scores, columns)
    np.testing.assert_array_equal(got, np.take_along_axis(scores, np.broadcast_to(columns, (2, 3, 4, 6)), -1))


def test_top_k_indices_orders_as_top_k_with_ties_infinities_and_invalid_entries():
    scores = np.array([[0.5, 2.0, 2.0, -np.inf, 1.0, -np.inf],
                       [-np.inf, -np.inf, -np.inf, -np.inf, 3.0, -np.inf]], "float32")
    got = ops.convert_to_numpy(top_k_indices(scores, 4))
    # Largest first, ties to the lower index (a stable sort of the negation).
    want = np.argsort(-scores, axis=-1, kind="stable")[:, :4]
    np.testing.assert_array_equal(got, want)
    # Invalid entries rank last, in index order, as −inf scores do,
    # whatever scores they hold.
    valid = np.isfinite(scores)
    finite = np.where(valid, scores, [[9.0, 1.0, 8.0, 3.0, 7.0, 5.0]])
    np.testing.assert_array_equal(ops.convert_to_numpy(top_k_indices(finite, 6, valid=valid)),
                                  np.argsort(-scores, axis=-1, kind="stable"))
    with pytest.raises(ValueError, match=r"`k` must be an int in 1\.\.6 .*received k=7"):
        top_k_indices(scores, 7)
    # NaN scores rank as invalid entries (after the numbers, by index): each
    # index has one place, where NaN's false comparisons would give two
    # entries the same place and leave another place empty.
    with_nan = np.array([[0.5, np.nan, 2.0, np.nan, 1.0, 3.0], [np.nan] * 6], "float32")
    np.testing.assert_array_equal(ops.convert_to_numpy(top_k_indices(with_nan, 6)),
                                  [[5, 2, 4, 0, 1, 3], [0, 1, 2, 3, 4, 5]])
    np.testing.assert_array_equal(
        ops.convert_to_numpy(top_k_indices(with_nan, 3, valid=np.array([[True, True, False, True, True, True]] * 2))),
        [[5, 4, 0], [0, 1, 2]])
    rng = np.random.default_rng(2)
    scores = rng.integers(0, 4, size=(5, 9)).astype("float32")
    np.testing.assert_array_equal(ops.convert_to_numpy(top_k_indices(scores, 9)),
                                  np.argsort(-scores, axis=-1, kind="stable"))


def test_bilstm_summary_steps_as_keras_loop():
    keras.utils.set_random_seed(3)
    layer = SegmentSummary(6, kind="bilstm")
    x = np.random.default_rng(3).normal(size=(3, 5, 4)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [0, 1, 0, 1, 1], [0, 0, 0, 0, 0]], bool)
    want = ops.convert_to_numpy(layer(x, mask=mask))
    with micro_forms.tracing():
        got = ops.convert_to_numpy(layer(x, mask=mask))
    np.testing.assert_allclose(got, want, atol=1e-6)


@FORMS
def test_masked_softmax_and_sqrt(micro):
    """The masked softmax: zero weight for masked entries whatever they
    hold, a row with none valid all zeros; sqrt: 0 at 0."""
    logits = np.array([[1.0, np.nan, 3.0, -2.0], [5.0, 6.0, np.inf, 0.0]], "float32")
    valid = np.array([[True, False, True, True], [False, False, False, False]])
    got = in_form(micro, masked_softmax, logits, valid)
    kept = np.exp(np.array([1.0, 3.0, -2.0]) - 3.0)
    np.testing.assert_allclose(got[0], np.insert(kept / kept.sum(), 1, 0.0), atol=1e-6)
    np.testing.assert_array_equal(got[1], np.zeros(4))
    x = np.array([0.0, 1e-6, 2.0, 900.0], "float32")
    np.testing.assert_allclose(in_form(micro, roots.sqrt, x), np.sqrt(x.astype("float64")), rtol=1e-6)


def test_token_embedding_micro_form():
    """Token ids embedded as a one-hot product give the lookup's values."""
    keras.utils.set_random_seed(4)
    layer = TransformerXL(num_layers=1, num_heads=1, head_size=4, hidden_dim=4, intermediate_dim=4, segment_len=2,
                          mem_len=2, vocabulary_size=7)
    ids = np.array([[0, 6, 3, 3], [1, 2, 5, 4]], "int32")
    want = ops.convert_to_numpy(layer(ids))
    with micro_forms.tracing():
        got = ops.convert_to_numpy(layer(ids))
    np.testing.assert_allclose(got, want, atol=1e-6)


@FORMS
def test_gathers_of_unknown_sizes_trace(micro):
    """Traced with every size unknown (a model of any batch, length and
    width), the gathers keep the usual values."""
    import tensorflow as tf

    x = np.random.default_rng(5).normal(size=(2, 5, 3)).astype("float32")
    indices = np.array([[4, 0], [2, 2]], "int32")
    spec = (tf.TensorSpec((None, None, None)), tf.TensorSpec((None, None), tf.int32))
    traced = tf.function(lambda x, i: gather_steps(x, i), input_signature=spec)
    got = in_form(micro, traced, x, indices)
    np.testing.assert_array_equal(got, np.stack([x[b, indices[b]] for b in range(2)]))
