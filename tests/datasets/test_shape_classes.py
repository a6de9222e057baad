"""The shape-by-class generator: sizes, lengths, amplitudes, padding,
determinism, and a class that is its shape (the prototype recovered)."""

import numpy as np
import pytest

from keras_relrec.datasets import shape_classes


def test_splits_lengths_and_padding():
    (x, y, n), (x_test, y_test, n_test) = shape_classes(num_classes=4, train_per_class=3, test_per_class=5,
                                                        lengths=(10, 30), pad_value=-7.0, seed=1)
    assert x.shape == (12, 30, 1) and x_test.shape == (20, 30, 1) and x.dtype == np.float32
    assert np.bincount(y).tolist() == [3] * 4 and np.bincount(y_test).tolist() == [5] * 4
    for series, length in zip(np.concatenate([x, x_test]), np.concatenate([n, n_test])):
        assert 10 <= length <= 30
        assert np.all(series[length:] == -7.0) and not np.any(series[:length] == -7.0)
    again = shape_classes(num_classes=4, train_per_class=3, test_per_class=5, lengths=(10, 30), pad_value=-7.0,
                          seed=1)
    np.testing.assert_array_equal(again[0][0], x)
    assert not np.array_equal(shape_classes(num_classes=4, train_per_class=3, lengths=(10, 30), seed=2)[0][0], x)


def test_amplitudes_spread_log_uniformly():
    """Each series' scale is its amplitude times that of its shape and
    noise: over seven decades the standard deviations spread over about
    as many."""
    (x, _, n), _ = shape_classes(num_classes=2, train_per_class=200, lengths=(50, 50), amplitudes=(1e-5, 1e2))
    decades = np.log10(x[:, :, 0].std(axis=1))
    assert decades.max() - decades.min() > 6 and -6.5 < decades.min() and decades.max() < 3


def test_the_class_is_the_shape():
    """Without noise, warp or offset spread, two series of a class at one
    amplitude and length are the same curve; of two classes, not."""
    (x, y, _), _ = shape_classes(num_classes=2, train_per_class=2, lengths=(40, 40), noise=0.0, warp=0.0,
                                 amplitudes=(2.0, 2.0))
    centred = x[:, :, 0] - x[:, :, 0].mean(axis=1, keepdims=True)
    same = [np.abs(centred[y == c][0] - centred[y == c][1]).max() for c in (0, 1)]
    assert max(same) < 1e-5 and np.abs(centred[y == 0][0] - centred[y == 1][0]).max() > 0.1


@pytest.mark.parametrize("kwargs, name", [
    ({"num_classes": 0}, "num_classes"),
    ({"lengths": (1, 5)}, "lengths"),
    ({"lengths": (9, 5)}, "lengths"),
    ({"lengths": 5}, "lengths"),
    ({"amplitudes": (0.0, 1.0)}, "amplitudes"),
    ({"amplitudes": (2.0, 1.0)}, "amplitudes"),
    ({"warp": 0.5}, "warp"),
    ({"noise": -1.0}, "noise"),
])
def test_bad_arguments_name_themselves(kwargs, name):
    with pytest.raises(ValueError, match=name):
        shape_classes(**kwargs)
