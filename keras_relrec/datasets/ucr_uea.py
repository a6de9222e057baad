"""Any UCR (univariate) or UEA (multivariate) classification set that ships
inside the `aeon` wheel, with its official train/test split.

The sets bundled with aeon 1.6 include ACSF1, ArrowHead, BasicMotions,
GunPoint, ItalyPowerDemand, JapaneseVowels, OSULeaf and
PickupGestureWiimoteZ. Needs the `[datasets]` extra; nothing is downloaded.
"""

import numpy as np


def load_ucr_uea(name, split="train", max_length=None, pad_value=0.0):
    """Loads one split as an array padded at the end.

    Args:
        name: The set's name in the archive, e.g. `"GunPoint"`.
        split: `"train"` or `"test"`.
        max_length: Pad (never truncate) to this many steps; default the
            longest series of the split.
        pad_value: What padded steps hold (the builders' `mask_value`).
            It must differ from every real step: a set whose series hold
            exact zeros (PickupGestureWiimoteZ does) needs another one.

    Returns:
        `(x, y, lengths)`: `x` float32 (N, T, channels), steps first; `y`
        int32 class ids 0..K−1 in the order of the archive's class values,
        the same for both splits; `lengths` int32 steps of each series.
    """
    datasets = aeon_datasets("load_ucr_uea", split)
    series, labels, metadata = datasets.load_classification(name, split=split, return_metadata=True)
    lengths = np.array([s.shape[-1] for s in series], np.int32)
    longest = int(lengths.max())
    if max_length is None:
        max_length = longest
    if max_length < longest:
        raise ValueError(
            f"Argument `max_length` must be at least {longest}, the longest series of the {split} split "
            f"of {name}; received max_length={max_length}."
        )
    x = np.full((len(series), max_length, series[0].shape[0]), pad_value, np.float32)
    for k, s in enumerate(series):
        x[k, : s.shape[-1]] = np.asarray(s, np.float32).T  # aeon stores (channels, time)
    valid = np.arange(max_length) < lengths[:, None]
    if np.any(np.all(x[valid] == pad_value, axis=-1)):
        raise ValueError(
            f"Argument `pad_value` must differ from every real step, but some steps of {name} hold "
            f"pad_value={pad_value!r} in every channel; choose another."
        )
    classes = {value: k for k, value in enumerate(metadata["class_values"])}
    y = np.array([classes[label] for label in labels], np.int32)
    return x, y, lengths


def aeon_datasets(loader, split):
    """`aeon.datasets`, for the loader named `loader` (named in the error
    raised without aeon) once its `split` is checked to be "train" or
    "test"."""
    if split not in ("train", "test"):
        raise ValueError(f"Argument `split` must be 'train' or 'test'; received split={split!r}.")
    try:
        from aeon import datasets
    except ImportError as error:
        raise ImportError(
            f"{loader} needs aeon: install keras_relrec's `datasets` extra "
            "(pip install -e '.[datasets]' in a checkout)"
        ) from error
    return datasets
