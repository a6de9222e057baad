"""The shared attention math against NumPy float64: scaled dot-product
attention of several heads, with and without a mask, and the masked softmax."""

import numpy as np
import pytest
from keras import ops

from keras_relrec.ops import masked_softmax
from keras_relrec.ops import merge_heads
from keras_relrec.ops import scaled_dot_product_attention
from keras_relrec.ops import split_heads

ATOL = 1e-5


def softmax(x, valid):
    x = np.where(valid, x, -np.inf)
    top = np.max(x, -1, keepdims=True)
    e = np.where(valid, np.exp(x - np.where(np.isfinite(top), top, 0)), 0.0)
    total = e.sum(-1, keepdims=True)
    return e / np.where(total > 0, total, 1.0)


@pytest.mark.parametrize("masked", [False, True])
def test_scaled_dot_product_attention(masked):
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(2, 3, 4, 5)), rng.normal(size=(2, 3, 6, 5)), rng.normal(size=(2, 3, 6, 7))
    mask = rng.random((2, 1, 4, 6)) > 0.4 if masked else np.ones((2, 1, 4, 6), bool)
    if masked:
        mask[0, 0, 1] = False  # a query with nothing to attend to gets zeros
    a = softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(5), mask)
    want = a @ v
    got, weights = scaled_dot_product_attention(
        *(x.astype("float32") for x in (q, k, v)), mask=mask if masked else None, return_weights=True
    )
    np.testing.assert_allclose(weights, a, atol=ATOL)
    np.testing.assert_allclose(got, want, atol=ATOL)
    if masked:
        np.testing.assert_array_equal(np.asarray(got)[0, :, 1], 0.0)


def test_no_mask_and_a_given_scale():
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(1, 2, 3, 4)), rng.normal(size=(1, 2, 5, 4)), rng.normal(size=(1, 2, 5, 2))
    want = softmax(0.3 * q @ k.transpose(0, 1, 3, 2), np.ones((1, 2, 3, 5), bool)) @ v
    got = scaled_dot_product_attention(*(x.astype("float32") for x in (q, k, v)), scale=0.3)
    np.testing.assert_allclose(got, want, atol=ATOL)


def test_masked_softmax_ignores_what_masked_entries_hold():
    logits = np.array([[1.0, np.nan, 3.0, np.inf], [-1e4, -1e4 - 1, np.nan, 0.0]], "float32")
    valid = np.array([[True, False, True, False], [True, True, False, False]])
    got = np.asarray(masked_softmax(logits, valid))
    np.testing.assert_allclose(got, softmax(np.where(valid, logits, 0).astype("float64"), valid), atol=ATOL)
    assert np.all(got[~valid] == 0.0)


def test_heads_split_and_merge():
    x = np.arange(2 * 3 * 8, dtype="float32").reshape(2, 3, 8)
    heads = np.asarray(split_heads(ops.convert_to_tensor(x), 2))
    np.testing.assert_array_equal(heads, x.reshape(2, 3, 2, 4).transpose(0, 2, 1, 3))
    np.testing.assert_array_equal(merge_heads(ops.convert_to_tensor(heads)), x)
