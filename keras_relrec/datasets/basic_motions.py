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
    if split not in ("train", "test"):
        raise ValueError(f"Argument `split` must be 'train' or 'test'; received split={split!r}.")
    try:
        from aeon.datasets import load_basic_motions as load
    except ImportError as error:
        raise ImportError(
            "load_basic_motions needs aeon: install keras_relrec's `datasets` extra "
            "(pip install -e '.[datasets]' in a checkout)"
        ) from error
    series, labels = load(split=split)
    x = np.transpose(series, (0, 2, 1)).astype(np.float32)  # aeon stores (channels, time)
    y = np.array([CLASSES.index(label) for label in labels], np.int32)
    return x[..., :3], x[..., 3:], y
