"""SeriesNormalization and SeriesStatistics against a NumPy float64 reading
of their equations, with masks, flat series and amplitudes over decades."""

import keras
import numpy as np
import pytest

from keras_relrec.layers import SeriesNormalization
from keras_relrec.layers import SeriesStatistics

ATOL = 1e-5


def scaled_input(rng, batch=4, steps=9, features=3):
    """Series of amplitudes 1e-4 … 1e2 and offsets, lengths 9, 6, 1 and 0
    (an empty row), the padding NaN (which must reach nothing); one feature
    of the second series flat."""
    amplitudes = 10.0 ** rng.uniform(-4, 2, (batch, 1, features))
    x = amplitudes * (rng.normal(size=(batch, steps, features)) + rng.normal(size=(batch, 1, features)))
    x[1, :, 2] = 3.0
    lengths = np.array([steps, 6, 1, 0])[:batch]
    mask = np.arange(steps) < lengths[:, None]
    x[~mask] = np.nan
    return x, mask


def reference_moments(x, mask, epsilon, dtype):
    """μ and σ̃ of each series and feature by explicit sums over the valid steps."""
    roundoff = 8.0 * float(np.finfo(dtype).eps)
    means, scales = [], []
    for series, valid in zip(x.astype(np.float64), mask):
        steps = series[valid]
        mean = steps.mean(axis=0) if len(steps) else np.zeros(series.shape[-1])
        variance = ((steps - mean) ** 2).mean(axis=0) if len(steps) else np.zeros(series.shape[-1])
        means.append(mean)
        scales.append(np.sqrt(variance + epsilon + (roundoff * mean) ** 2))
    return np.array(means), np.array(scales)


@pytest.mark.parametrize("epsilon", [1e-20, 1e-3])
def test_series_normalization(precision, epsilon):
    """y_t = (x_t − μ) / σ̃ at the valid steps, zeros at the padding."""
    x, mask = scaled_input(np.random.default_rng(0))
    mean, scale = reference_moments(x, mask, epsilon, precision.dtype)
    want = np.where(mask[..., None], (np.nan_to_num(x) - mean[:, None]) / scale[:, None], 0.0)
    got = SeriesNormalization(epsilon=epsilon)(precision.array(x), mask=mask)
    precision.assert_close(got, want, atol=ATOL)
    got = keras.ops.convert_to_numpy(got)
    if epsilon == 1e-20:
        # A whole series has unit scale, however small (ε a larger floor).
        assert np.allclose(got[0].std(axis=0), 1.0, atol=1e-4)
    # The flat feature is (near) zeros, not rounding noise blown up.
    assert np.abs(got[1, :, 2]).max() < 1e-6


@pytest.mark.parametrize("reference", [(0.0, 1.0), ([0.5, -1.0, 2.0], [4.0, 0.25, 1e-2])])
def test_series_statistics(precision, reference):
    """[(μ − m) / √v, log10(σ̃ / √v)] per feature."""
    x, mask = scaled_input(np.random.default_rng(1))
    m, v = (np.asarray(r, np.float64) for r in reference)
    mean, scale = reference_moments(x, mask, 1e-20, precision.dtype)
    want = np.concatenate([(mean - m) / np.sqrt(v), np.log10(scale / np.sqrt(v))], axis=-1)
    layer = SeriesStatistics(*reference)
    got = layer(precision.array(x), mask=mask)
    assert tuple(got.shape) == layer.compute_output_shape(x.shape) == (4, 6)
    precision.assert_close(got, want, atol=ATOL)


def test_without_a_mask_every_step_counts():
    x = np.random.default_rng(2).normal(size=(2, 5, 2)) * np.array([1e-3, 1e2])
    mean, scale = reference_moments(x, np.ones(x.shape[:2], bool), 1e-20, "float32")
    np.testing.assert_allclose(SeriesNormalization()(x.astype("float32")), (x - mean[:, None]) / scale[:, None],
                               atol=ATOL)


def test_statistics_in_float32_under_mixed_precision():
    """A series of amplitude 1e-4: its float16 variance (1e-8) would
    underflow; the statistics are taken in float32 and the output given in
    float16."""
    x, mask = scaled_input(np.random.default_rng(3))
    x = np.nan_to_num(x, nan=0.0)
    x[0] = 1e-4 * np.random.default_rng(4).normal(size=x[0].shape)
    normalized = SeriesNormalization(dtype="mixed_float16")(x.astype("float32"), mask=mask)
    assert keras.backend.standardize_dtype(normalized.dtype) == "float16"
    mean, scale = reference_moments(x, mask, 1e-20, "float32")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(normalized)[0], (x[0] - mean[0]) / scale[0], atol=1e-2)
    statistics = SeriesStatistics(dtype="mixed_float16")(x.astype("float32"), mask=mask)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(statistics)[0, 3:], np.log10(scale[0]), atol=1e-2)


def test_a_reference_of_the_wrong_width_is_refused_when_built():
    with pytest.raises(ValueError, match=r"`mean` must be one number or one per feature \(3\)"):
        SeriesStatistics(mean=[0.0, 1.0])(keras.Input((5, 3)))
    with pytest.raises(ValueError, match="`variance` must be positive"):
        SeriesStatistics(variance=[1.0, -1.0])
    with pytest.raises(ValueError, match="`mean` must be a finite number"):
        SeriesStatistics(mean="x")
    with pytest.raises(ValueError, match=r"expects inputs \(batch, steps, features\)"):
        SeriesNormalization()(keras.Input((5,)))
    with pytest.raises(ValueError, match="epsilon"):
        SeriesNormalization(epsilon=0.0)
    with pytest.raises(ValueError, match="per_step"):
        SeriesStatistics(per_step="yes")


def test_statistics_per_step_keep_the_mask():
    """`per_step=True`: the same 2·D numbers at every valid step, zeros at
    the padding, and the mask passed on (a concatenation with the series
    keeps it)."""
    x, mask = scaled_input(np.random.default_rng(5))
    per_series = keras.ops.convert_to_numpy(SeriesStatistics()(x, mask=mask))
    layer = SeriesStatistics(per_step=True)
    got = keras.ops.convert_to_numpy(layer(x, mask=mask))
    assert got.shape == layer.compute_output_shape(x.shape) == (4, 9, 6)
    np.testing.assert_allclose(got, np.where(mask[..., None], per_series[:, None], 0.0), atol=1e-6)
    normalized = SeriesNormalization()(x, mask=mask)
    passed = layer.compute_mask(x, mask)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(passed), mask)
    joined = keras.layers.Concatenate().compute_mask([normalized, got], [mask, passed])
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(joined), mask)
    assert SeriesStatistics().compute_mask(x, mask) is None


def test_a_long_flat_series_stays_flat_in_float32():
    """5,000 constant float32 steps: the mean's rounding would leave
    deviations of about 0.1 to 0.8 after standardizing; in two passes they
    stay below the roundoff term, and the output is near zero."""
    x = np.full((1, 5000, 1), 3.3, "float32")
    y = keras.ops.convert_to_numpy(SeriesNormalization()(x))
    assert np.abs(y).max() < 1e-3, np.abs(y).max()
    decades = keras.ops.convert_to_numpy(SeriesStatistics()(x))[0, 1]
    assert decades < -5, decades
