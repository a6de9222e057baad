"""The synthetic order-book generator: layout, book ordering, seeding, and a
signal that a linear discriminant on two summary features can or cannot
read."""

import numpy as np
import pytest

from keras_relrec.datasets import synthetic_lob


def summary(x):
    """Mid move over the window (ticks) and the last step's mean standardised
    bid-minus-ask log volume."""
    mid = (x[:, :, 0] + x[:, :, 2]) / 2
    imbalance = (x[:, -1, 3::4] - x[:, -1, 1::4]).mean(-1)
    return np.stack([mid[:, -1] - mid[:, 0], imbalance], axis=-1)


def discriminant_accuracy(x, y, num_train):
    """Held-out accuracy of linear discriminant analysis (class means, pooled
    covariance) fitted on the first num_train examples."""
    f = summary(x).astype(np.float64)
    f_train, y_train = f[:num_train], y[:num_train]
    means = np.stack([f_train[y_train == c].mean(0) for c in range(3)])
    centred = f_train - means[y_train]
    inverse = np.linalg.inv(centred.T @ centred / (num_train - 3))
    scores = f[num_train:] @ inverse @ means.T - 0.5 * np.einsum("ci,ij,cj->c", means, inverse, means)
    return float((scores.argmax(-1) == y[num_train:]).mean())


def test_shapes_dtypes_seeding_and_balance():
    x, y = synthetic_lob(3000, window=7, levels=3, seed=4)
    assert x.shape == (3000, 7, 12) and x.dtype == np.float32
    assert y.shape == (3000,) and y.dtype == np.int32
    counts = np.bincount(y, minlength=3)
    assert len(counts) == 3 and counts.min() > 900
    x2, y2 = synthetic_lob(3000, window=7, levels=3, seed=4)
    np.testing.assert_array_equal(x, x2)
    np.testing.assert_array_equal(y, y2)
    x3, _ = synthetic_lob(3000, window=7, levels=3, seed=(4, 1))
    assert not np.array_equal(x, x3)
    assert synthetic_lob(1, window=1, levels=1)[0].shape == (1, 1, 4)


@pytest.mark.parametrize("signal", [0.0, 2.0])
def test_book_is_ordered_and_prices_are_ticks_from_the_first_mid(signal):
    x, _ = synthetic_lob(500, window=10, levels=5, signal=signal, seed=1)
    ask, bid = x[..., 0::4], x[..., 2::4]
    assert np.all(ask[..., 0] > bid[..., 0])
    assert np.all(np.diff(ask, axis=-1) > 0) and np.all(np.diff(bid, axis=-1) < 0)
    np.testing.assert_allclose(ask[..., 1:] - ask[..., :-1], 1.0, atol=1e-4)  # one tick apart
    np.testing.assert_allclose((ask[:, 0, 0] + bid[:, 0, 0]) / 2, 0.0, atol=1e-4)
    spread = ask[..., 0] - bid[..., 0]
    assert set(np.unique(np.round(spread))) <= {1.0, 2.0, 3.0}


def test_signal_controls_how_much_the_window_tells():
    accuracies = {}
    for signal in (0.0, 2.0):
        x, y = synthetic_lob(3000, signal=signal, seed=0)
        accuracies[signal] = discriminant_accuracy(x, y, num_train=2000)
    assert accuracies[0.0] < 0.45, accuracies
    assert accuracies[2.0] > 0.8, accuracies


def test_bad_arguments():
    for name, value in (("num_examples", 0), ("window", 1.5), ("levels", -1)):
        with pytest.raises(ValueError, match=name):
            synthetic_lob(**{"num_examples": 2, name: value})
    for signal in (-0.1, float("nan"), "1"):
        with pytest.raises(ValueError, match="signal"):
            synthetic_lob(2, signal=signal)


@pytest.mark.parametrize("seed", [-1, 1.5, "seven", True])
def test_a_bad_seed_is_named(seed):
    with pytest.raises(ValueError, match="`seed`"):
        synthetic_lob(4, seed=seed)
