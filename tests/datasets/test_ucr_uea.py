import numpy as np
import pytest
from aeon.datasets import load_classification

from keras_relrec.datasets import load_ucr_uea


def test_official_split_steps_first_and_classes_shared_by_the_splits():
    x, y, lengths = load_ucr_uea("ArrowHead", "test")
    series, labels = load_classification("ArrowHead", split="test")
    assert x.shape == (175, 251, 1) and x.dtype == np.float32
    np.testing.assert_array_equal(x[:, :, 0], series[:, 0, :].astype("float32"))
    np.testing.assert_array_equal(y, labels.astype(int))
    assert np.all(lengths == 251)
    x, y, _ = load_ucr_uea("BasicMotions", "train")
    assert x.shape == (40, 100, 6)
    # Class values are strings (e.g. "standing"); both splits map them alike.
    _, y_test, _ = load_ucr_uea("BasicMotions", "test")
    assert set(y) == set(y_test) == set(range(4))


def test_unequal_lengths_are_padded_with_a_value_no_step_holds():
    # PickupGestureWiimoteZ holds exact zeros: zero padding would hide them.
    with pytest.raises(ValueError, match=r"`pad_value` must differ .* pad_value=0.0"):
        load_ucr_uea("PickupGestureWiimoteZ", "train")
    x, _, lengths = load_ucr_uea("PickupGestureWiimoteZ", "train", pad_value=-1e4, max_length=400)
    assert x.shape == (50, 400, 1) and lengths.max() == 361
    for series, n in zip(x, lengths):
        assert np.all(series[n:] == -1e4) and not np.any(series[:n] == -1e4)


def test_bad_arguments():
    with pytest.raises(ValueError, match="split='dev'"):
        load_ucr_uea("GunPoint", "dev")
    with pytest.raises(ValueError, match="`max_length` must be at least 150"):
        load_ucr_uea("GunPoint", "train", max_length=100)
