"""One entry per HyperModel of `keras_relrec.tuning`: the fixed structure, a
tiny fixed configuration, the hyperparameters a test search tunes, and data.
A new HyperModel joins the tuning tests by one entry here."""

import dataclasses

import numpy as np
from keras_tuner.engine import hyperparameters as hp_types

from keras_relrec import tuning


@dataclasses.dataclass
class Entry:
    cls: type
    structure: dict
    tiny: dict  # fixed values that keep a trial small
    tuned: dict  # hyperparameter objects a test search explores (names not the stable ones)
    make_data: callable

    @property
    def id(self):
        return self.cls.__name__

    def hypermodel(self, **arguments):
        return self.cls(**self.structure, **{**self.tiny, **self.tuned, **arguments})


def sequences(shape, classes, per_position=False):
    def make(count, seed):
        rng = np.random.default_rng(seed)
        x = rng.normal(size=(count, *shape)).astype("float32")
        y = rng.integers(0, classes, (count, shape[0]) if per_position else count)
        return x, y

    return make


def tokens(length, vocabulary):
    def make(count, seed):
        rng = np.random.default_rng(seed)
        x = rng.integers(0, vocabulary, (count, length)).astype("int32")
        return x, np.roll(x, -1, axis=1)

    return make


def pairs(shape_a, shape_b, classes):
    def make(count, seed):
        rng = np.random.default_rng(seed)
        x = [rng.normal(size=(count, *shape_a)).astype("float32"), rng.normal(size=(count, *shape_b)).astype("float32")]
        return x, rng.integers(0, classes, count)

    return make


LR = {"learning_rate": hp_types.Float("lr", 1e-3, 1e-2, sampling="log")}
TXL_TINY = dict(num_layers=1, num_heads=1, head_size=4, hidden_dim=8, intermediate_dim=8, dropout=0.0,
                pre_lnorm=False)

ENTRIES = [
    Entry(tuning.HyperRelationalMemory, dict(input_shape=(5, 3), num_classes=3),
          dict(head_size=4, num_heads=1, num_blocks=1, gate_style="unit", attention_mlp_layers=1, head_units=8),
          {"mem_slots": hp_types.Choice("slots", [1, 2]), **LR}, sequences((5, 3), 3)),
    Entry(tuning.HyperTABL, dict(input_shape=(10, 6), num_classes=3),
          dict(config="A", dropout=0.1, max_norm=0.0),
          {"kind": hp_types.Choice("last_layer", ["TABL", "BL"]), **LR}, sequences((10, 6), 3)),
    Entry(tuning.HyperNBoF, dict(input_shape=(6, 3), num_classes=3, seed=1),
          dict(scale="per_dimension", hidden_units=8, dropout=0.0),
          {"num_codewords": hp_types.Choice("k", [4, 6]), "attention": hp_types.Choice("a", ["none", "codeword"]),
           **LR}, sequences((6, 3), 3)),
    Entry(tuning.HyperTransformerXL, dict(input_shape=(8,), num_classes=6, segment_len=4, vocabulary_size=6),
          TXL_TINY, {"mem_len": hp_types.Choice("memory", [0, 4]), **LR}, tokens(8, 6)),
    Entry(tuning.HyperSegmentCache, dict(input_shape=(8, 3), num_classes=4, segment_len=4),
          dict(TXL_TINY, num_slots=2, summary="dense"),
          {"top_k": hp_types.Choice("k", [1, 2]), "query": hp_types.Choice("q", ["causal", "standard"]), **LR},
          sequences((8, 3), 4, per_position=True)),
    Entry(tuning.HyperRTransformer, dict(input_shape=(6, 2), num_classes=3),
          dict(width=8, num_blocks=1, num_heads=1, num_local_layers=1, dropout=0.0),
          {"window_size": hp_types.Choice("m", [2, 3]), "cell": hp_types.Choice("c", ["gru", "lstm"]), **LR},
          sequences((6, 2), 3)),
    Entry(tuning.HyperDRRT, dict(input_shapes=((6, 3), (4, 2)), num_classes=3),
          dict(feature_units=4, window_size=2, relation_units=4, regions=2, pairwise="concat", num_blocks=1,
               dropout=0.0),
          {"fusion": hp_types.Choice("f", ["sum", "maxout"]), "local_recurrence": hp_types.Boolean("lr_on"),
           **LR}, pairs((6, 3), (4, 2), 3)),
]
