"""The Nth-farthest task as a TensorFlow Datasets builder.

Registered as `nth_farthest` when `keras_relrec.datasets.tfds` is imported.
It downloads nothing: examples come from the seeded generator
`keras_relrec.datasets.nth_farthest`. Configs: `paper` (8 vectors of 16
dimensions) and `reduced` (4 × 4); splits `train` (100,000 examples),
`validation` and `test` (10,000 each), each from its own seed.

    import tensorflow_datasets as tfds
    import keras_relrec.datasets.tfds  # registers the builder
    train = tfds.load("nth_farthest/reduced", split="train", as_supervised=True)
"""

import numpy as np
import tensorflow_datasets as tfds

from keras_relrec.datasets.nth_farthest import PAPER
from keras_relrec.datasets.nth_farthest import REDUCED
from keras_relrec.datasets.nth_farthest import nth_farthest

SPLITS = {"train": (100_000, 0), "validation": (10_000, 1), "test": (10_000, 2)}
# Examples are generated in chunks so that memory stays small.
CHUNK = 10_000


class NthFarthestConfig(tfds.core.BuilderConfig):
    def __init__(self, *, num_objects, num_features, **kwargs):
        super().__init__(version="1.0.0", **kwargs)
        self.num_objects = num_objects
        self.num_features = num_features


class NthFarthest(tfds.core.GeneratorBasedBuilder):
    """Nth-farthest (Santoro et al. 2018), generated offline."""

    VERSION = tfds.core.Version("1.0.0")
    BUILDER_CONFIGS = [
        NthFarthestConfig(name="paper", description="8 vectors of 16 dimensions", **PAPER),
        NthFarthestConfig(name="reduced", description="4 vectors of 4 dimensions", **REDUCED),
    ]

    def _info(self):
        c = self.builder_config
        width = c.num_features + 3 * c.num_objects
        return self.dataset_info_from_configs(
            description=__doc__,
            features=tfds.features.FeaturesDict(
                {
                    "rows": tfds.features.Tensor(shape=(c.num_objects, width), dtype=np.float32),
                    "label": tfds.features.ClassLabel(num_classes=c.num_objects),
                }
            ),
            supervised_keys=("rows", "label"),
        )

    def _split_generators(self, dl_manager):
        del dl_manager  # nothing to download
        return {name: self._generate_examples(count, seed) for name, (count, seed) in SPLITS.items()}

    def _generate_examples(self, count, seed):
        c = self.builder_config
        for start in range(0, count, CHUNK):
            # Each chunk has its own seed, derived from the split's.
            x, y = nth_farthest(
                min(CHUNK, count - start), c.num_objects, c.num_features,
                seed=(seed, start),
            )
            for k in range(len(y)):
                yield start + k, {"rows": x[k], "label": int(y[k])}
