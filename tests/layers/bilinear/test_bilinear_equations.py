"""BilinearLayer and TABL against NumPy float64 computations of the paper's
equations, written per example in the paper's (features × time) layout, and
checked in both data formats, in float32 and under the float64 policy
(tests/layers/float64.py)."""

import keras
import numpy as np
import pytest

from keras_relrec.layers import TABL
from keras_relrec.layers import BilinearLayer

ATOL = 1e-5
B, T, D, UNITS, STEPS = 3, 6, 4, 5, 2


def softmax(z, axis):
    z = z - z.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def bilinear(x, w1, w2, b):
    """Y = W1 X W2 + B for every X (D × T)."""
    return np.stack([w1 @ example @ w2 + b for example in x])


def masked_softmax(z, valid, axis):
    """Softmax over the entries where `valid` is true; 0 elsewhere."""
    e = np.where(valid, np.exp(z - z.max(axis=axis, keepdims=True)), 0.0)
    return e / e.sum(axis=axis, keepdims=True)


def tabl(x, w1, w, w2, b, lam, attend_over, mask=None):
    """The paper's eqs. (4)–(8) for every X (D × T); a masked step (mask
    (batch, T) false) is a zero column of X and gets no attention over time."""
    mask = np.ones((x.shape[0], x.shape[2]), bool) if mask is None else mask
    out, attention = [], []
    for example, valid in zip(x, mask):
        x_bar = w1 @ np.where(valid, example, 0.0)  # (D', T)
        kernel = w.copy()
        np.fill_diagonal(kernel, 1.0 / kernel.shape[0])
        if attend_over == "time":
            a = masked_softmax(x_bar @ kernel, np.broadcast_to(valid, x_bar.shape), axis=1)  # rows over time
        else:
            # The time attention applied to X̄ᵀ: each column over features.
            a = softmax(x_bar.T @ kernel, axis=1).T
        x_tilde = lam * (x_bar * a) + (1 - lam) * x_bar
        out.append(x_tilde @ w2 + b)
        attention.append(a)
    return np.stack(out), np.stack(attention)


def paper_input(seed=0):
    return np.random.default_rng(seed).normal(size=(B, D, T))  # (batch, D, T)


def layout(x, data_format):
    """A (batch, D, T) array in the layer's data format."""
    return x if data_format == "channels_first" else np.swapaxes(x, 1, 2)


def random_weights(layer, rng, dtype="float32"):
    weights = [rng.uniform(-0.8, 0.8, w.shape) for w in layer.get_weights()]
    layer.set_weights([w.astype(dtype) for w in weights])
    return weights


@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
def test_bilinear_layer(data_format, precision):
    x = paper_input()
    layer = BilinearLayer(UNITS, STEPS, data_format=data_format)
    layer.build(layout(x, data_format).shape)
    w1, w2, b = random_weights(layer, np.random.default_rng(1), precision.dtype)
    expected = np.maximum(bilinear(x, w1, w2, b), 0.0)
    layer.activation = keras.activations.relu
    got = layer(precision.array(layout(x, data_format)))
    precision.assert_close(got, layout(expected, data_format), atol=ATOL)


@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
@pytest.mark.parametrize("attend_over", ["time", "features"])
def test_tabl(data_format, attend_over, precision):
    x = paper_input(2)
    layer = TABL(UNITS, STEPS, attend_over=attend_over, data_format=data_format)
    layer.build(layout(x, data_format).shape)
    rng = np.random.default_rng(3)
    w1, w2, b, w, _ = random_weights(layer, rng)
    # A diagonal far from 1/L, which the layer must overwrite.
    w = w + 40.0 * np.eye(w.shape[0])
    layer.set_weights([precision.array(v) for v in (w1, w2, b, w, 0.3)])
    expected, attention = tabl(x, w1, w, w2, b, 0.3, attend_over)
    inputs = precision.array(layout(x, data_format))
    precision.assert_close(layer(inputs), layout(expected, data_format), atol=ATOL)
    precision.assert_close(layer.attention_weights(inputs), layout(attention, data_format), atol=ATOL)


@pytest.mark.parametrize("precision", ["float64"], indirect=True)
def test_initial_constants_in_float64(precision):
    """W starts at 1/L and λ at its initial value in the weight's dtype, not
    float32's rounding of them cast up."""
    layer = TABL(UNITS, STEPS, initial_lambda=0.3)
    layer.build((None, 7, D))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(layer.attention_kernel), np.full((7, 7), 1 / 7))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(layer.lambda_), 0.3)


@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
@pytest.mark.parametrize("attend_over", [None, "time", "features"])
def test_masked_steps_enter_as_zeros(data_format, attend_over):
    """Padding: masked steps are zero columns of X (whatever they hold) and,
    with attention over time, get no weight; the output has no mask."""
    x = paper_input(6)
    mask = np.ones((B, T), bool)
    mask[0, 4:] = False
    mask[2, 1] = False
    held = np.where(mask[:, None, :], x, 1e4)
    if attend_over is None:
        layer = BilinearLayer(UNITS, STEPS, data_format=data_format)
    else:
        layer = TABL(UNITS, STEPS, attend_over=attend_over, data_format=data_format)
    layer.build(layout(x, data_format).shape)
    weights = random_weights(layer, np.random.default_rng(7))
    if attend_over is None:
        expected = bilinear(np.where(mask[:, None, :], x, 0.0), *weights)
    else:
        w1, w2, b, w, _ = weights
        expected, _ = tabl(x, w1, w, w2, b, 0.3, attend_over, mask)
        layer.set_weights([v.astype("float32") for v in (w1, w2, b, w, np.float32(0.3))])
    inputs = layout(held, data_format).astype("float32")
    np.testing.assert_allclose(layer(inputs, mask=mask), layout(expected, data_format), atol=1e-4)
    assert layer.compute_mask(inputs, mask) is None


def test_squeezed_last_layer():
    x = paper_input(4)
    layer = TABL(3, 1, activation="softmax", squeeze=True, data_format="channels_first")
    layer.build(x.shape)
    w1, w2, b, w, _ = random_weights(layer, np.random.default_rng(5))
    layer.set_weights([v.astype("float32") for v in (w1, w2, b, w, np.float32(0.5))])
    logits, _ = tabl(x, w1, w, w2, b, 0.5, "time")
    expected = softmax(logits[..., 0], axis=-1)
    np.testing.assert_allclose(layer(x.astype("float32")), expected, atol=ATOL)
    with pytest.raises(ValueError, match="steps=1"):
        TABL(3, 2, squeeze=True)


def test_lambda_learns_and_stays_in_the_unit_interval():
    x = np.swapaxes(paper_input(6), 1, 2).astype("float32")
    inputs = keras.Input(x.shape[1:])
    layer = TABL(2, 1, initial_lambda=0.9, attention_initializer="random_normal")
    model = keras.Model(inputs, layer(inputs))
    # Adam moves λ by about the learning rate per step whatever the
    # gradient's size, so 0.9 reaches the constraint's bound in a few steps.
    model.compile(optimizer=keras.optimizers.Adam(0.2), loss="mse")
    seen = set()
    for target in (np.full((B, 1, 2), 30.0), np.full((B, 1, 2), -30.0)):
        model.fit(x, target.astype("float32"), epochs=3, verbose=0)
        value = float(layer.lambda_.numpy())
        assert 0.0 <= value <= 1.0
        seen.add(value)
    assert seen != {0.9}  # λ is trained, not frozen


def test_max_norm_constraint_applies_to_both_kernels():
    x = np.swapaxes(paper_input(7), 1, 2).astype("float32")
    inputs = keras.Input(x.shape[1:])
    layer = BilinearLayer(UNITS, STEPS, kernel_constraint=keras.constraints.MaxNorm(0.5))
    model = keras.Model(inputs, layer(inputs))
    model.compile(optimizer=keras.optimizers.SGD(10.0), loss="mse")
    model.fit(x, np.full((B, STEPS, UNITS), 9.0, "float32"), epochs=2, verbose=0)
    for kernel in (layer.feature_kernel, layer.time_kernel):
        norms = np.sqrt((np.asarray(kernel) ** 2).sum(axis=0))
        assert norms.max() <= 0.5 + 1e-5
