import numpy as np
import pytest

from keras_relrec.datasets import load_japanese_vowels


def test_splits_padding_and_labels():
    x, y, lengths = load_japanese_vowels("train")
    assert x.shape == (270, 26, 12) and x.dtype == np.float32
    assert set(np.unique(y)) == set(range(9))
    assert lengths.min() == 7 and lengths.max() == 26
    for frames, n in zip(x, lengths):
        # Real frames first, none of them all zeros; zeros after.
        assert np.all(np.abs(frames[:n]).sum(-1) > 0)
        assert np.all(frames[n:] == 0)
    x_test, _, _ = load_japanese_vowels("test", max_length=40)
    assert x_test.shape == (370, 40, 12)


def test_bad_arguments():
    with pytest.raises(ValueError, match="split"):
        load_japanese_vowels("validation")
    with pytest.raises(ValueError, match="max_length must be at least 26|`max_length` must be at least 26"):
        load_japanese_vowels("train", max_length=10)
