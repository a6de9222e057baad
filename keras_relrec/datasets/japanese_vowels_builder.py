"""UEA JapaneseVowels as a TensorFlow Datasets builder over local files.

Registered as `japanese_vowels` when `keras_relrec.datasets.tfds` is
imported. It downloads nothing: examples are read from the copy of the set
bundled in the `aeon` wheel (extra `[datasets]`) through
`load_japanese_vowels`. Splits `train` (270) and `test` (370); each
utterance is zero-padded to 29 frames (the longest in the set), with its
frame count in `length`.

    import tensorflow_datasets as tfds
    import keras_relrec.datasets.tfds  # registers the builder
    train = tfds.load("japanese_vowels", split="train", as_supervised=True)
"""

import numpy as np
import tensorflow_datasets as tfds

from keras_relrec.datasets.japanese_vowels import NUM_CLASSES
from keras_relrec.datasets.japanese_vowels import NUM_FEATURES
from keras_relrec.datasets.japanese_vowels import load_japanese_vowels

MAX_LENGTH = 29


class JapaneseVowels(tfds.core.GeneratorBasedBuilder):
    """UEA JapaneseVowels (Kudo et al. 1999), from aeon's bundled files."""

    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        return self.dataset_info_from_configs(
            description=__doc__,
            features=tfds.features.FeaturesDict(
                {
                    "series": tfds.features.Tensor(
                        shape=(MAX_LENGTH, NUM_FEATURES), dtype=np.float32
                    ),
                    "length": tfds.features.Scalar(dtype=np.int32),
                    "label": tfds.features.ClassLabel(num_classes=NUM_CLASSES),
                }
            ),
            supervised_keys=("series", "label"),
        )

    def _split_generators(self, dl_manager):
        del dl_manager  # nothing to download
        return {split: self._generate_examples(split) for split in ("train", "test")}

    def _generate_examples(self, split):
        x, y, lengths = load_japanese_vowels(split, max_length=MAX_LENGTH)
        for k in range(len(y)):
            yield k, {"series": x[k], "length": int(lengths[k]), "label": int(y[k])}
