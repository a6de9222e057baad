"""The UEA JapaneseVowels set, from the copy bundled in the `aeon` wheel.

Nine male speakers each utter the vowels /ae/; every utterance is a sequence
of 7 to 29 frames of 12 LPC cepstrum coefficients, and the task is to tell
the speaker (Kudo et al., Pattern Recognition Letters 1999). The UEA split
has 270 training and 370 test utterances. Needs the `[datasets]` extra
(`aeon`); nothing is downloaded.
"""

import numpy as np

NUM_CLASSES = 9
NUM_FEATURES = 12


def load_japanese_vowels(split="train", max_length=None):
    """Loads one split as zero-padded arrays.

    Args:
        split: `"train"` or `"test"`.
        max_length: Pad (never truncate) to this many frames; default the
            longest utterance of the split.

    Returns:
        `(x, y, lengths)`: `x` float32 (N, T, 12) with the frames of each
        utterance first and zeros after (mask them with
        `keras.layers.Masking(0.0)`: no real frame is all zeros), `y` int32
        speaker ids 0..8, `lengths` int32 frame counts.
    """
    if split not in ("train", "test"):
        raise ValueError(f"Argument `split` must be 'train' or 'test'; received split={split!r}.")
    try:
        from aeon.datasets import load_japanese_vowels as load
    except ImportError as error:
        raise ImportError(
            "load_japanese_vowels needs aeon: install keras_relrec's `datasets` extra "
            "(pip install -e '.[datasets]' in a checkout)"
        ) from error
    series, labels = load(split=split)
    lengths = np.array([s.shape[1] for s in series], np.int32)
    longest = int(lengths.max())
    if max_length is None:
        max_length = longest
    if max_length < longest:
        raise ValueError(
            f"Argument `max_length` must be at least {longest}, the longest "
            f"utterance of the {split} split; received max_length={max_length}."
        )
    x = np.zeros((len(series), max_length, NUM_FEATURES), np.float32)
    for k, s in enumerate(series):
        x[k, : s.shape[1]] = s.T  # aeon stores (channels, time)
    y = labels.astype(np.int32) - 1  # speakers are "1".."9"
    return x, y, lengths
