"""The UEA BasicMotions set, from the copy bundled in the `aeon` wheel, as two
inputs: the accelerometer and the gyroscope.

Four students wore a smartwatch while standing, walking, running and playing
badminton; each recording is 10 s of a 3-axis accelerometer and a 3-axis
gyroscope at 10 Hz (100 steps), and the task is to tell the activity (UEA
multivariate archive, Bagnall et al. 2018). The UEA split has 40 training and
40 test recordings, 10 per class in each. Needs the `[datasets]` extra
(`aeon`); nothing is downloaded.
"""

import numpy as np

from keras_relrec.datasets.ucr_uea import aeon_datasets

CLASSES = ("badminton", "running", "standing", "walking")
STEPS = 100


def load_basic_motions(split="train"):
    """Loads one split.

    Args:
        split: `"train"` or `"test"`.

    Returns:
        `(accelerometer, gyroscope, y)`: float32 (N, 100, 3) each (aeon's
        channels 0–2 and 3–5, time first), and int32 labels, indices into
        `CLASSES`.
    """
    series, labels = aeon_datasets("load_basic_motions", split).load_basic_motions(split=split)
    x = np.transpose(series, (0, 2, 1)).astype(np.float32)  # aeon stores (channels, time)
    y = np.array([CLASSES.index(label) for label in labels], np.int32)
    return x[..., :3], x[..., 3:], y
