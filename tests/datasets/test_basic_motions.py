"""BasicMotions as two inputs: the accelerometer's and the gyroscope's
channels of aeon's copy, time first."""

import numpy as np
import pytest
from aeon.datasets import load_basic_motions as aeon_load

from keras_relrec.datasets import load_basic_motions
from keras_relrec.datasets.basic_motions import CLASSES


@pytest.mark.parametrize("split", ["train", "test"])
def test_two_sensors_of_the_uea_split(split):
    accelerometer, gyroscope, y = load_basic_motions(split)
    assert accelerometer.shape == gyroscope.shape == (40, 100, 3)
    assert accelerometer.dtype == gyroscope.dtype == np.float32
    np.testing.assert_array_equal(np.bincount(y), [10, 10, 10, 10])
    series, labels = aeon_load(split=split)
    np.testing.assert_array_equal(accelerometer[7, :, 2], series[7, 2].astype("float32"))
    np.testing.assert_array_equal(gyroscope[7, :, 0], series[7, 3].astype("float32"))
    assert [CLASSES[k] for k in y] == list(labels)


def test_split_is_checked():
    with pytest.raises(ValueError, match="split"):
        load_basic_motions("validation")
