"""The UEA JapaneseVowels set, from the copy bundled in the `aeon` wheel.

Nine male speakers each utter the vowels /ae/; every utterance is a sequence
of 7 to 29 frames of 12 LPC cepstrum coefficients, and the task is to tell
the speaker (Kudo et al., Pattern Recognition Letters 1999). The UEA split
has 270 training and 370 test utterances. Needs the `[datasets]` extra
(`aeon`); nothing is downloaded.
"""

from keras_relrec.datasets.ucr_uea import load_ucr_uea

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
    # The archive's class values are the speakers "1".."9", in order.
    return load_ucr_uea("JapaneseVowels", split, max_length)
