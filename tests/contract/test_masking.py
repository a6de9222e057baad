"""Masks, for every entry that reads one: a masked step changes no valid
output or state, and NaN or inf there never reaches an output."""

import keras
import numpy as np
import tensorflow as tf

from tests.contract.conformance import ATOL
from tests.contract.conformance import as_list
from tests.contract.conformance import assert_close
from tests.contract.conformance import each_input
from tests.contract.conformance import mask_entries
from tests.contract.conformance import masking_entries
from tests.contract.conformance import padded_input
from tests.contract.conformance import recurrent_entries
from tests.contract.conformance import sample_mask


@mask_entries
def test_masked_steps_change_nothing(entry):
    """What a masked step holds does not reach any valid output, and the
    mask is passed on (or consumed, for a pooled output)."""
    layer = entry.make_layer()
    x = entry.make_input(batch=3)
    mask = each_input(entry, x, sample_mask)
    rng = np.random.default_rng(5)

    def noisy(v, m):
        v = v.copy()
        v[~m] = rng.normal(size=v[~m].shape) * 10
        return v

    out = layer(x, mask=mask)
    out_noisy = layer(entry.structured([noisy(v, m) for v, m in zip(as_list(x), as_list(mask))]), mask=mask)
    if not isinstance(x, list):
        if len(out.shape) == len(x.shape) and not entry.consumes_mask:
            np.testing.assert_allclose(np.asarray(out)[mask], np.asarray(out_noisy)[mask], atol=ATOL)
            passed = layer.compute_mask(x, mask)
            np.testing.assert_array_equal(np.asarray(passed), mask)
        else:
            np.testing.assert_allclose(out, out_noisy, atol=ATOL)
            assert layer.compute_mask(x, mask) is None
        return
    # Several inputs: an output that passes a mask on is compared at its
    # valid steps, any other in full.
    for got, want, passed in zip(as_list(out_noisy), as_list(out), as_list(layer.compute_mask(x, mask))):
        if passed is None:
            np.testing.assert_allclose(got, want, atol=ATOL)
        else:
            passed = np.asarray(passed)
            assert any(np.array_equal(passed, m) for m in mask)
            np.testing.assert_allclose(np.asarray(got)[passed], np.asarray(want)[passed], atol=ATOL)


@masking_entries
def test_non_finite_values_in_masked_steps_never_reach_an_output(entry):
    """NaN and inf in masked steps leave every output finite and equal to
    the output with zeros there: masked values are selected away, never
    multiplied by zero (NaN · 0 is NaN). Weight gradients stay finite too,
    except for cells inside `keras.layers.RNN`, whose loop runs the cell on
    masked steps and selects afterwards (Keras' own LSTM does the same)."""
    layer = entry.make_layer(**({"return_sequences": True} if entry.recurrent else {}))
    x = entry.make_input(batch=3)
    mask = each_input(entry, x, sample_mask)

    def zeros(v):
        v = v.copy()
        v[~sample_mask(v)] = 0.0
        return v

    def bad(v):
        v = v.copy()
        v[0, -2], v[0, -1], v[1, 1] = np.nan, np.inf, -np.inf
        return v

    want = layer(each_input(entry, x, zeros), mask=mask)
    got = layer(each_input(entry, x, bad), mask=mask)
    assert all(np.all(np.isfinite(g)) for g in as_list(got))
    assert_close(got, want)
    if entry.is_cell:
        return
    with tf.GradientTape() as tape:
        loss = sum(tf.reduce_sum(o ** 2) for o in as_list(layer(each_input(entry, x, bad), mask=mask)))
    for w, g in zip(layer.trainable_weights, tape.gradient(loss, layer.trainable_weights)):
        assert np.all(np.isfinite(g)), w.path


@recurrent_entries
def test_masked_steps_leave_the_state_untouched(entry):
    layer = entry.make_layer(return_sequences=True, return_state=True)
    x = entry.make_input(batch=3)
    inputs = keras.Input(entry.input_shape)
    model = keras.Model(inputs, layer(keras.layers.Masking(0.0)(inputs)))
    xp = padded_input(entry, x)
    seq, *states = model(xp)
    # Sample 0: the final state is the state after its last real step.
    _, *unpadded = layer(x[:1, :-2])
    for s, u in zip(states, unpadded):
        np.testing.assert_allclose(s[:1], u, atol=ATOL)
    # Padded steps repeat the previous output.
    np.testing.assert_allclose(seq[0, -1], seq[0, -3], atol=ATOL)
    np.testing.assert_allclose(seq[1, 1], seq[1, 0], atol=ATOL)
    # Sample 1: skipping the masked step equals deleting it.
    _, *skipped = layer(np.delete(x[1:2], 1, axis=1))
    for s, u in zip(states, skipped):
        np.testing.assert_allclose(s[1:2], u, atol=ATOL)
