"""The neural bag-of-features layers against NumPy float64 computations of
their equations, in float32 and under the float64 policy (tests/layers/
float64.py): quantizer memberships and histograms, 2-D attention, the
recurrent cell, local features, segment means; the quantizer at zero
distance and for large inputs; the k-means codebook."""

import itertools
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_relrec.layers import BoFQuantizer
from keras_relrec.layers import LocalFeatures
from keras_relrec.layers import RecurrentBoFCell
from keras_relrec.layers import SegmentMean
from keras_relrec.layers import TwoDAttention
from tests.layers.bag_of_features.reference import memberships
from tests.layers.bag_of_features.reference import recurrent_bof
from tests.layers.bag_of_features.reference import softmax

ATOL = 1e-5


def random_quantizer(rng, k, d, dtype="float32", **kwargs):
    layer = BoFQuantizer(k, **kwargs)
    layer.build((None, None, d))
    codebook = rng.normal(size=(k, d))
    scales = rng.uniform(0.3, 2.0, size=layer.scales.shape)
    layer.set_weights([codebook.astype(dtype), scales.astype(dtype)])
    return layer, codebook, scales


@pytest.mark.parametrize("scale", ["per_dimension", "per_codeword"])
@pytest.mark.parametrize("distance", ["l2", "squared_l2"])
def test_memberships_and_histogram(scale, distance, precision):
    rng = np.random.default_rng(1)
    layer, codebook, scales = random_quantizer(rng, 6, 4, precision.dtype, scale=scale, distance=distance)
    x = rng.normal(size=(3, 7, 4))
    expected = memberships(x, codebook, scales, distance)
    precision.assert_close(layer(precision.array(x)), expected, atol=ATOL)

    layer.output_mode = "histogram"
    mask = np.ones((3, 7), bool)
    mask[0, 4:] = False
    mask[2, 0] = False
    histogram = np.stack([expected[b][mask[b]].mean(0) for b in range(3)])
    precision.assert_close(layer(precision.array(x), mask=mask), histogram, atol=ATOL)


def test_feature_maps(precision):
    rng = np.random.default_rng(2)
    layer, codebook, scales = random_quantizer(rng, 5, 3, precision.dtype)
    x = rng.normal(size=(2, 4, 6, 3))
    expected = memberships(x, codebook, scales, "l2")
    precision.assert_close(layer(precision.array(x)), expected, atol=ATOL)
    layer.output_mode = "histogram"
    precision.assert_close(layer(precision.array(x)), expected.mean((1, 2)), atol=ATOL)


@pytest.mark.parametrize("precision", ["float64"], indirect=True)
def test_inputs_on_the_codewords_in_float64(precision):
    """Every input exactly on a codeword, where ‖x‖² − 2 x·v + ‖v‖² leaves a
    rounding that the square root's slope at ε magnifies (float32 is
    documented to be inexact there): float64 keeps float64's precision.
    One scale per codeword, a codebook where that rounding shows."""
    rng = np.random.default_rng(5)
    layer = BoFQuantizer(6, scale="per_codeword")
    layer.build((None, None, 8))
    codebook = 3.0 * rng.normal(size=(6, 8))
    scales = rng.uniform(0.3, 2.0, size=layer.scales.shape)
    layer.set_weights([codebook, scales])
    x = np.stack([codebook, codebook[::-1]])
    precision.assert_close(layer(x), memberships(x, codebook, scales, "l2"), atol=ATOL)


@pytest.mark.parametrize("precision", ["float64"], indirect=True)
def test_initial_constants_in_float64(precision):
    """The documented starting values are made in the weight's dtype, not
    float32's rounding of them cast up."""
    attention = TwoDAttention(axis=1, initial_tau=0.3)
    attention.build((None, 7, 2))
    quantizer = BoFQuantizer(2, initial_scale=0.3)
    quantizer.build((None, None, 2))
    cell = RecurrentBoFCell(2, initial_scale=0.3)
    cell.build((None, 2))
    for weight, value in [(attention.kernel, 1 / 7), (attention.tau, 0.3), (quantizer.scales, 0.3),
                          (cell.scales, 0.3)]:
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(weight), np.full(weight.shape, value))


def test_finite_gradients_at_zero_distance():
    rng = np.random.default_rng(3)
    layer, codebook, _ = random_quantizer(rng, 4, 3, output_mode="histogram")
    # Every vector sits exactly on a codeword.
    x = tf.constant(np.stack([codebook[[0, 1, 2]], codebook[[3, 3, 0]]]).astype("float32"))
    with tf.GradientTape() as tape:
        tape.watch(x)
        loss = tf.reduce_sum(layer(x) * tf.range(1.0, 5.0))
    grads = tape.gradient(loss, [x] + layer.trainable_weights)
    for g in grads:
        assert np.all(np.isfinite(g)), g


@pytest.mark.parametrize("offset", [1e3, 1e5])
def test_inputs_far_from_the_origin(offset):
    """Prices and the like: vectors near each other but far from zero keep
    their memberships (no cancellation), and nothing overflows."""
    rng = np.random.default_rng(4)
    codebook = offset + rng.normal(size=(5, 3))
    x = offset + rng.normal(size=(2, 8, 3))
    layer = BoFQuantizer(5)
    layer.build((None, None, 3))
    layer.set_weights([codebook.astype("float32"), np.ones((5, 3), "float32")])
    got = np.asarray(layer(x.astype("float32")))
    # float32 holds offset + noise to about offset · 6e-8 per coordinate.
    expected = memberships(x.astype("float32").astype("float64"),
                           codebook.astype("float32").astype("float64"), 1.0, "l2")
    np.testing.assert_allclose(got, expected, atol=1e-4)


def test_large_distances_stay_finite():
    layer = BoFQuantizer(3, distance="squared_l2")
    x = np.full((1, 2, 4), 1e9, "float32")
    out = np.asarray(layer(x))
    assert np.all(np.isfinite(out)) and np.allclose(out.sum(-1), 1.0)


def test_adapt_is_scikit_learn_kmeans():
    from sklearn.cluster import KMeans

    rng = np.random.default_rng(5)
    centres = np.array([[5.0, 0.0], [-5.0, 0.0], [0.0, 5.0]])
    x = (centres[rng.integers(0, 3, (40, 6))] + 0.1 * rng.normal(size=(40, 6, 2)))
    x[:10, -2:] = 0.0  # padding, which mask_value leaves out
    x = x.astype("float32")
    layer = BoFQuantizer(3)
    layer.adapt(x, seed=7, mask_value=0.0)
    vectors = x.reshape(-1, 2)
    vectors = vectors[~np.all(vectors == 0.0, axis=-1)].astype("float64")
    expected = KMeans(3, n_init=4, random_state=7).fit(vectors).cluster_centers_
    np.testing.assert_allclose(layer.codebook.numpy(), expected, atol=1e-5)

    # Deterministic, and the same from a tf.data.Dataset of (x, y) batches.
    again = BoFQuantizer(3)
    dataset = tf.data.Dataset.from_tensor_slices((x, np.zeros(40))).batch(16)
    again.adapt(dataset, seed=7, mask_value=0.0)
    np.testing.assert_allclose(again.codebook.numpy(), layer.codebook.numpy(), atol=1e-6)

    # Sampling: deterministic for a seed.
    a, b = BoFQuantizer(3), BoFQuantizer(3)
    a.adapt(x, sample_size=50, seed=1)
    b.adapt(x, sample_size=50, seed=1)
    np.testing.assert_array_equal(a.codebook.numpy(), b.codebook.numpy())


def test_adapt_errors():
    with pytest.raises(ValueError, match="at least num_codewords=8"):
        BoFQuantizer(8).adapt(np.zeros((1, 3, 2), "float32") + 1.0)
    layer = BoFQuantizer(2)
    layer.build((None, None, 3))
    with pytest.raises(ValueError, match="feature vectors of size 3; received size 2"):
        layer.adapt(np.ones((4, 5, 2), "float32"))


def two_d_attention(s, kernel, tau, axis, mask=None):
    """S̃ = τ(S ⊙ A) + (1 − τ)S with A = softmax(S W') along `axis`, W' = W
    with its diagonal 1/L; written per example as the paper's matrices."""
    length = kernel.shape[0]
    kernel = kernel.copy()
    np.fill_diagonal(kernel, 1.0 / length)
    out = np.empty_like(s)
    for b in range(s.shape[0]):
        example = s[b]  # (steps, features)
        if axis == 2:
            a = softmax(example @ kernel, axis=-1)
        else:
            valid = np.ones(example.shape[0], bool) if mask is None else mask[b]
            matrix = np.where(valid[:, None], example, 0.0).T  # (features, steps)
            logits = matrix @ kernel
            a = np.zeros_like(logits)
            a[:, valid] = softmax(logits[:, valid], axis=-1)
            a = a.T
        out[b] = tau * example * a + (1 - tau) * example
    return out


@pytest.mark.parametrize("axis", [1, 2])
def test_two_d_attention(axis, precision):
    rng = np.random.default_rng(6)
    s = rng.normal(size=(3, 5, 4))
    layer = TwoDAttention(axis=axis)
    layer.build(s.shape)
    length = s.shape[axis]
    # A large diagonal that the layer must overwrite with 1/L.
    kernel = rng.normal(size=(length, length)) + 50.0 * np.eye(length)
    layer.set_weights([precision.array(kernel), precision.array(0.3)])
    expected = two_d_attention(s, kernel, 0.3, axis)
    precision.assert_close(layer(precision.array(s)), expected, atol=ATOL)


def test_two_d_attention_over_masked_steps():
    rng = np.random.default_rng(7)
    s = rng.normal(size=(3, 6, 2))
    mask = np.ones((3, 6), bool)
    mask[0, 3:] = False
    mask[1, 0] = False
    layer = TwoDAttention(axis=1)
    layer.build(s.shape)
    kernel = rng.normal(size=(6, 6))
    layer.set_weights([kernel.astype("float32"), np.float32(0.8)])
    expected = two_d_attention(s, kernel, 0.8, 1, mask)
    got = np.asarray(layer(s.astype("float32"), mask=mask))
    np.testing.assert_allclose(got[mask], expected[mask], atol=ATOL)
    a = np.asarray(layer.attention_weights(s.astype("float32"), mask=mask))
    np.testing.assert_allclose(a.sum(axis=1), 1.0, atol=ATOL)
    assert np.all(a[~mask] == 0.0)


@pytest.mark.parametrize("axis", [1, 2])
def test_low_rank_two_d_attention(axis, precision):
    """rank=r: the same equations with W = 1/L + U Vᵀ formed in full here,
    behind a mask over the steps."""
    rng = np.random.default_rng(16)
    s = rng.normal(size=(3, 6, 5))
    mask = np.ones((3, 6), bool)
    mask[0, 4:] = False
    length = s.shape[axis]
    layer = TwoDAttention(axis=axis, rank=2)
    layer.build(s.shape)
    left, right = rng.normal(size=(length, 2)), rng.normal(size=(length, 2))
    layer.set_weights([precision.array(left), precision.array(right), precision.array(0.6)])
    kernel = 1.0 / length + left @ right.T
    expected = two_d_attention(s, kernel, 0.6, axis, mask if axis == 1 else None)
    got = layer(precision.array(s), mask=mask)
    precision.assert_close(keras.ops.convert_to_numpy(got)[mask], expected[mask], atol=ATOL)


def test_low_rank_attention_starts_uniform_with_few_weights():
    s = np.random.default_rng(17).normal(size=(2, 427, 3)).astype("float32")
    layer = TwoDAttention(axis=1, rank=8)
    a = np.asarray(layer.attention_weights(s))
    assert layer.count_params() == 2 * 427 * 8 + 1
    # W = 1/L + U·0 gives E = mean over the steps, the same at every step.
    np.testing.assert_allclose(a, 1.0 / 427, rtol=1e-5)
    with pytest.raises(ValueError, match=r"`rank` must be below the attended length 5.*rank=5"):
        TwoDAttention(axis=1, rank=5)(s[:, :5])


def local_features(x, mode, window, strides, kernel=None, bias=None, mask=None):
    """y_j over the window ending at e = s·j + s − 1, zeros outside the
    sequence and at masked steps; by explicit loops."""
    x = np.where(mask[..., None], x, 0.0) if mask is not None else x
    batch, steps, features = x.shape
    outputs = []
    for j in range(-(-steps // strides)):
        end = strides * j + strides - 1
        window_values = np.zeros((batch, window, features))
        for k in range(window):
            t = end - window + 1 + k
            if 0 <= t < steps:
                window_values[:, k] = x[:, t]
        if mode == "window":
            outputs.append(window_values.reshape(batch, -1))
        else:
            outputs.append(np.maximum(np.einsum("bkd,kdf->bf", window_values, kernel) + bias, 0.0))
    return np.stack(outputs, axis=1)


@pytest.mark.parametrize(("mode", "window", "strides"), [("window", 3, 1), ("window", 4, 3), ("conv", 5, 1),
                                                         ("conv", 4, 2)])
def test_local_features(mode, window, strides, precision):
    rng = np.random.default_rng(18)
    x = rng.normal(size=(3, 11, 2))
    mask = np.ones((3, 11), bool)
    mask[0, 7:] = False
    mask[1, 2] = False
    layer = LocalFeatures(mode=mode, window_size=window, strides=strides)
    layer.build(x.shape)
    kernel = bias = None
    if mode == "conv":
        kernel, bias = rng.normal(size=(window, 2, 32)), rng.normal(size=32)
        layer.set_weights([precision.array(kernel), precision.array(bias)])
    expected = local_features(x, mode, window, strides, kernel, bias, mask)
    precision.assert_close(layer(precision.array(x), mask=mask), expected, atol=ATOL)
    # Output j is valid where a step of its block is.
    blocks = np.pad(mask, ((0, 0), (0, -11 % strides))).reshape(3, -1, strides)
    np.testing.assert_array_equal(np.asarray(layer.compute_mask(x, mask)), blocks.any(-1))


def minirocket_responses(x, window, strides, mask, dilations=None):
    """MiniRocket's 84 kernels (nine taps of −1, three of them 2) on each
    feature alone, at the given dilations or 1, 2, 4, … with
    8·d + 1 ≤ window, over the window ending at e = s·j + s − 1; by
    explicit loops."""
    x = np.where(mask[..., None], x, 0.0)
    batch, steps, features = x.shape
    kernels = [[2.0 if k in chosen else -1.0 for k in range(9)] for chosen in itertools.combinations(range(9), 3)]
    dilations = dilations or [d for d in (1, 2, 4, 8, 16, 32) if 8 * d + 1 <= window]
    outputs = np.zeros((batch, -(-steps // strides), len(dilations), features, len(kernels)))
    for j in range(outputs.shape[1]):
        end = strides * j + strides - 1
        for i, d in enumerate(dilations):
            for m, v in enumerate(kernels):
                for k in range(9):
                    t = end - 8 * d + k * d
                    if 0 <= t < steps:
                        outputs[:, j, i, :, m] += v[k] * x[:, t]
    return outputs.reshape(batch, outputs.shape[1], -1)


@pytest.mark.parametrize(("window", "strides"), [(9, 1), (20, 3)])
def test_local_features_minirocket_kernels(window, strides, precision):
    rng = np.random.default_rng(19)
    x = rng.normal(size=(3, 23, 2))
    mask = np.ones((3, 23), bool)
    mask[0, 17:] = False
    mask[1, 4] = False
    layer = LocalFeatures(mode="kernels", window_size=window, strides=strides)
    got = layer(precision.array(x), mask=mask)
    precision.assert_close(got, minirocket_responses(x, window, strides, mask), atol=1e-4)
    assert layer.count_params() == 0 and got.shape[-1] == 84 * 2 * (1 if window < 17 else 2)
    with pytest.raises(ValueError, match=r"`window_size` must be at least 9.*window_size=8"):
        LocalFeatures(mode="kernels", window_size=8)


def test_local_features_kernels_at_given_dilations():
    """`dilations` picks the kernels' dilations (a model that quantizes
    each dilation apart makes a layer for each); each must fit the window."""
    rng = np.random.default_rng(20)
    x = rng.normal(size=(2, 23, 2))
    mask = np.ones((2, 23), bool)
    mask[0, 15:] = False
    layer = LocalFeatures(mode="kernels", window_size=20, strides=3, dilations=(2,))
    got = np.asarray(layer(x.astype("float32"), mask=mask))
    np.testing.assert_allclose(got, minirocket_responses(x, 20, 3, mask, dilations=[2]), atol=1e-4)
    assert got.shape[-1] == 84 * 2 and layer.compute_output_shape((2, 23, 2)) == (2, 8, 168)
    assert LocalFeatures.from_config(layer.get_config()).dilations == (2,)
    for mode, dilations in (("kernels", (4,)), ("kernels", (0,)), ("kernels", (1, 1)), ("kernels", 2),
                            ("kernels", ()), ("window", (1,))):
        with pytest.raises(ValueError, match=rf"`dilations`.*dilations={re.escape(repr(dilations))}"):
            LocalFeatures(mode=mode, window_size=20, dilations=dilations)


def test_tau_stays_in_the_unit_interval():
    s = np.random.default_rng(8).normal(size=(4, 5, 3)).astype("float32")
    inputs = keras.Input((5, 3))
    layer = TwoDAttention(axis=1, initial_tau=0.95)
    model = keras.Model(inputs, layer(inputs))
    model.compile(optimizer=keras.optimizers.SGD(100.0), loss="mse")
    # Any target pushes τ hard one way; the constraint clips it back.
    for target in (s * 5.0, -s * 5.0):
        model.fit(s, target, epochs=3, verbose=0)
        assert 0.0 <= float(layer.tau.numpy()) <= 1.0
    assert float(layer.tau.numpy()) in (0.0, 1.0)


def test_recurrent_bof_cell(precision):
    rng = np.random.default_rng(9)
    b, t, d, k = 3, 6, 4, 5
    cell = RecurrentBoFCell(k)
    rnn = keras.layers.RNN(cell, return_sequences=True)
    x = rng.normal(size=(b, t, d))
    s0 = rng.dirichlet(np.ones(k), size=b)
    rnn(precision.array(x), initial_state=[precision.array(s0)])
    weights = [rng.uniform(-0.8, 0.8, w.shape) for w in cell.get_weights()]
    weights[1] = np.abs(weights[1]) + 0.2  # scales
    cell.set_weights([precision.array(w) for w in weights])
    got = rnn(precision.array(x), initial_state=[precision.array(s0)])
    precision.assert_close(got, recurrent_bof(x, s0, *weights), atol=ATOL)


def test_recurrent_bof_cell_groups(precision):
    """`groups=G`: each of the G parts of a step is its own sequence
    through the same weights, with its own K states side by side."""
    rng = np.random.default_rng(19)
    b, t, d, k, g = 3, 5, 4, 3, 2
    cell = RecurrentBoFCell(k, groups=g)
    rnn = keras.layers.RNN(cell, return_sequences=True)
    x = rng.normal(size=(b, t, g * d))
    s0 = np.concatenate([rng.dirichlet(np.ones(k), size=b) for _ in range(g)], axis=1)
    rnn(precision.array(x), initial_state=[precision.array(s0)])
    weights = [rng.uniform(-0.8, 0.8, w.shape) for w in cell.get_weights()]
    weights[1] = np.abs(weights[1]) + 0.2  # scales
    cell.set_weights([precision.array(w) for w in weights])
    got = rnn(precision.array(x), initial_state=[precision.array(s0)])
    expected = np.concatenate([recurrent_bof(x[..., j * d:(j + 1) * d], s0[:, j * k:(j + 1) * k], *weights)
                               for j in range(g)], axis=-1)
    assert cell.codebook.shape == (k, d) and cell.state_size == [g * k]
    precision.assert_close(got, expected, atol=ATOL)
    with pytest.raises(ValueError, match="groups=2 expects a number of features that 2 divides.*received steps of "
                                         r"shape \(None, 5\)"):
        RecurrentBoFCell(k, groups=2).build((None, 5))
    for bad in (0, 1.5, "2"):
        with pytest.raises(ValueError, match="groups"):
            RecurrentBoFCell(k, groups=bad)
    # A state of one group's width would reshape to one row and broadcast.
    with pytest.raises(ValueError, match=r"states\[0\] of shape \(1, 3\).*expected \(batch, 6\)"):
        rnn(x[:1], initial_state=[np.zeros((1, k))])


def test_recurrent_bof_groups_adapt_on_the_parts():
    """With groups, k-means runs on the parts of the valid steps."""
    from sklearn.cluster import KMeans

    rng = np.random.default_rng(20)
    x = rng.normal(size=(6, 7, 4)).astype("float32")
    x[0, 4:] = 0.0  # padding
    cell = RecurrentBoFCell(3, groups=2)
    cell.adapt(x, seed=0, mask_value=0.0)
    vectors = x.reshape(-1, 4)
    vectors = vectors[~np.all(vectors == 0.0, axis=-1)].reshape(-1, 2).astype("float64")
    expected = KMeans(3, n_init=4, random_state=0).fit(vectors).cluster_centers_
    np.testing.assert_allclose(cell.codebook.numpy(), expected, atol=1e-5)
    assert cell.built and cell.kernel.shape == (2, 6)
    with pytest.raises(ValueError, match="`groups` must divide.*groups=2 for vectors of size 3"):
        RecurrentBoFCell(3, groups=2).adapt(x[..., :3], seed=0)


def test_recurrent_bof_adapt_and_sequence_histogram():
    rng = np.random.default_rng(10)
    x = rng.normal(size=(5, 7, 3)).astype("float32")
    x[0, 5:] = 0.0
    cell = RecurrentBoFCell(4)
    cell.adapt(x, seed=0, mask_value=0.0)
    inputs = keras.Input((7, 3))
    masked = keras.layers.Masking(0.0)(inputs)
    states = keras.layers.RNN(cell, return_sequences=True)(masked)
    model = keras.Model(inputs, keras.layers.GlobalAveragePooling1D()(states))
    weights = [w.astype("float64") for w in cell.get_weights()]
    per_step = recurrent_bof(x[:1, :5].astype("float64"), np.zeros((1, 4)), *weights)
    np.testing.assert_allclose(model(x)[0], per_step[0].mean(0), atol=ATOL)


def test_mixed_precision_keeps_the_inputs_digits():
    """Under mixed_float16 the quantizer reads float32 inputs and computes
    in float32: prices near 1e5 keep their memberships (a float16 copy of
    them would be 64 apart)."""
    rng = np.random.default_rng(11)
    codebook = 1e5 + rng.normal(size=(4, 2))
    x = (1e5 + rng.normal(size=(2, 5, 2))).astype("float32")
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        layer = BoFQuantizer(4)
        layer.build((None, None, 2))
        layer.set_weights([codebook.astype("float32"), np.ones((4, 2), "float32")])
        got = np.asarray(layer(x), "float64")
    finally:
        keras.config.set_dtype_policy(previous)
    expected = memberships(x.astype("float64"), codebook.astype("float32").astype("float64"),
                           1.0, "l2")
    np.testing.assert_allclose(got, expected, atol=2e-3)  # float16 output


def test_recurrent_cell_stays_finite_in_float16():
    """Squared distances beyond float16's range must not turn into NaN."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        rnn = keras.layers.RNN(RecurrentBoFCell(3, distance="squared_l2"))
        out = np.asarray(rnn(np.full((2, 4, 3), 300.0, "float32")), "float32")
    finally:
        keras.config.set_dtype_policy(previous)
    assert np.all(np.isfinite(out))


def test_integer_inputs():
    layer, codebook, scales = random_quantizer(np.random.default_rng(12), 3, 2)
    x = np.array([[[1, 2], [0, -1]]], "int32")
    np.testing.assert_allclose(layer(x), memberships(x.astype("float64"), codebook, scales, "l2"),
                               atol=ATOL)


def test_feature_map_histogram_with_a_mask():
    rng = np.random.default_rng(13)
    layer, codebook, scales = random_quantizer(rng, 4, 3, output_mode="histogram")
    x = rng.normal(size=(2, 3, 4, 3))
    mask = rng.random((2, 3, 4)) > 0.3
    phi = memberships(x, codebook, scales, "l2")
    expected = np.stack([phi[b][mask[b]].mean(0) for b in range(2)])
    np.testing.assert_allclose(layer(x.astype("float32"), mask=mask), expected, atol=ATOL)


def test_masked_temporal_attention_with_extreme_logits():
    """The softmax runs over the valid steps alone, whatever the logits'
    range: A sums to one over them and is zero elsewhere."""
    rng = np.random.default_rng(14)
    s = (rng.normal(size=(2, 5, 3)) * 1e3 - 5e4).astype("float32")
    mask = np.array([[1, 1, 0, 1, 0], [0, 0, 0, 0, 0]], bool)
    layer = TwoDAttention(axis=1, kernel_initializer="random_normal")
    a = np.asarray(layer.attention_weights(s, mask=mask))
    assert np.all(np.isfinite(a))
    np.testing.assert_allclose(a[0].sum(axis=0), 1.0, atol=ATOL)
    assert np.all(a[0][~mask[0]] == 0.0) and np.all(a[1] == 0.0)


def test_histogram_of_no_vector_is_zero():
    """A sequence of no steps, or with every step masked, has an all-zero
    histogram (the mean of nothing), never NaN."""
    layer, _, _ = random_quantizer(np.random.default_rng(14), 3, 2, output_mode="histogram")
    np.testing.assert_array_equal(layer(np.zeros((2, 0, 2), "float32")), np.zeros((2, 3)))
    x = np.full((2, 4, 2), np.nan, "float32")
    np.testing.assert_array_equal(layer(x, mask=np.zeros((2, 4), bool)), np.zeros((2, 3)))


def segment_histograms(phi, mask, num_segments):
    """y_s = mean of φ_t over the valid steps t with ⌊t · S / T⌋ = s, by
    explicit loops; zeros for a segment with no valid step."""
    batch, steps, k = phi.shape
    out = np.zeros((batch, num_segments, k))
    for b in range(batch):
        for s in range(num_segments):
            members = [t for t in range(steps) if (t * num_segments) // steps == s and mask[b, t]]
            if members:
                out[b, s] = phi[b, members].mean(0)
    return out


@pytest.mark.parametrize("steps, num_segments", [(7, 3), (12, 4), (5, 5), (9, 1)])
def test_segment_histograms(steps, num_segments, precision):
    rng = np.random.default_rng(15)
    layer, codebook, scales = random_quantizer(rng, 4, 3, precision.dtype, output_mode="segment_histograms",
                                               num_segments=num_segments)
    x = rng.normal(size=(3, steps, 3))
    mask = np.ones((3, steps), bool)
    mask[0, -3:] = False  # padding: sample 0's last segment is empty where it has 3 steps or fewer
    mask[1, ::2] = False
    phi = memberships(x, codebook, scales, "l2")
    got = layer(precision.array(x), mask=mask)
    precision.assert_close(got, segment_histograms(phi, mask, num_segments), atol=ATOL)
    precision.assert_close(layer(precision.array(x)), segment_histograms(phi, np.ones_like(mask), num_segments),
                           atol=ATOL)
    assert layer.compute_mask(x, mask) is None


def test_segment_histograms_refuse_what_they_cannot_segment():
    with pytest.raises(ValueError, match=r"num_segments.*at most the number of steps, 5"):
        BoFQuantizer(3, output_mode="segment_histograms", num_segments=6)(keras.Input((5, 2)))
    # Of unknown length: shorter sequences leave empty segments, as zeros.
    layer = BoFQuantizer(3, output_mode="segment_histograms", num_segments=4)
    layer.build((None, None, 2))
    out = np.asarray(layer(np.ones((1, 2, 2), "float32")))
    assert out.shape == (1, 4, 3) and np.all(out[0, 1] == 0) and np.all(out[0, 3] == 0)
    np.testing.assert_allclose(out[0, [0, 2]].sum(-1), 1.0, atol=ATOL)


def segment_mean_input(steps, seed=16):
    """(3, steps, 2) values near 5 ± 10, NaN at the masked steps, and the mask."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(3, steps, 2)) * 10 + 5
    mask = np.ones((3, steps), bool)
    mask[0, -4:] = False
    mask[2, 1::3] = False
    x[~mask] = np.nan
    return x, mask


@pytest.mark.parametrize("steps, num_segments", [(10, 3), (16, 16), (12, 4)])
def test_segment_mean(steps, num_segments, precision):
    """The means of the features over the segments of the histograms, valid
    steps only."""
    x, mask = segment_mean_input(steps)
    precision.assert_close(SegmentMean(num_segments)(precision.array(x), mask=mask),
                           segment_histograms(x, mask, num_segments), atol=ATOL)


def test_segment_mean_sums_in_float32_under_mixed_precision():
    """Under mixed precision, summed in float32: 5 steps near 2e4 would
    overflow float16 (65504), their mean does not."""
    x, mask = segment_mean_input(10)
    large = x + 2e4
    half = SegmentMean(2, dtype="mixed_float16")
    out = half(large.astype("float32"), mask=mask)
    assert keras.backend.standardize_dtype(out.dtype) == "float16"
    np.testing.assert_allclose(out, segment_histograms(large, mask, 2), rtol=1e-3)
    with pytest.raises(ValueError, match=r"num_segments.*at most the number of steps, 2"):
        SegmentMean(3)(keras.Input((2, 4)))


def test_masks_of_feature_maps_and_of_attention_weights_are_checked():
    """A feature map's mask is (batch, height, width); `attention_weights`
    checks its mask as `call` does."""
    quantizer = BoFQuantizer(3)
    maps = np.zeros((2, 4, 5, 3), "float32")
    quantizer(maps, mask=np.ones((2, 4, 5), bool))
    with pytest.raises(ValueError, match=r"expects `mask` of shape \(batch, height, width\) = \(2, 4, 5\)"):
        quantizer(maps, mask=np.ones((2, 4), bool))
    attention = TwoDAttention()
    with pytest.raises(ValueError, match=r"expects `mask` of shape \(batch, steps\) = \(2, 6\)"):
        attention.attention_weights(np.zeros((2, 6, 3), "float32"), mask=np.ones((2, 5), bool))
