"""A keras-tuner HyperModel of a Transformer-XL sequence model."""

import keras
from keras_tuner.engine import hyperparameters as hp_types

from keras_relrec.layers import TransformerXL
from keras_relrec.tuning import hyper_model
from keras_relrec.utils import validation


class HyperTransformerXL(hyper_model.SequenceHyperModel):
    """A Transformer-XL (Dai et al., "Transformer-XL: Attentive Language
    Models Beyond a Fixed-Length Context", ACL 2019) that gives logits at
    every position (a language model over tokens, or a tagger over feature
    vectors), as a keras-tuner HyperModel.

    ```
    tokens (steps,) → TransformerXL(vocabulary_size=...)           → Dense(num_classes)
    features (steps, d) → Dense(hidden_dim, no bias) → TransformerXL → Dense(num_classes)
    ```

    Targets are (batch, steps) class indices. Compiled with Adam at
    `learning_rate` on sparse categorical cross-entropy from logits, with
    accuracy.

    Hyperparameters (names are stable; L is `segment_len`):

    | name | type | default space | default |
    |---|---|---|---|
    | num_layers | Int | 1 to 4 | 2 |
    | num_heads | Choice | 1, 2, 4 | 2 |
    | head_size | Choice | 16, 32, 64 | 32 |
    | hidden_dim | Choice | 64, 128, 256 | 128 |
    | intermediate_dim | Choice | 128, 256, 512 | 256 |
    | mem_len | Choice | 0, L, 2L, 4L | 2L |
    | dropout | Float | 0.0 to 0.3, step 0.1 | 0.1 |
    | pre_lnorm | Boolean | False, True | False |
    | learning_rate | Float | 1e-4 to 1e-2, log | 0.001 |

    Args:
        input_shape: `(steps,)` of token ids (give `vocabulary_size`) or
            `(steps, features)`; steps may be `None`.
        num_classes: Number of classes at every position.
        segment_len: Length L of a segment (fixed).
        vocabulary_size: For token inputs, the number of tokens.
        num_layers, num_heads, head_size, hidden_dim, intermediate_dim,
            mem_len, dropout, pre_lnorm, learning_rate: Of `TransformerXL`
            and Adam; each a fixed value, a keras-tuner hyperparameter
            object or `None` for the default space above.
        seed: Seed of the dropout.
        name, tunable: As `keras_tuner.HyperModel`.

    Example:

    ```python
    hypermodel = HyperTransformerXL((None,), num_classes=256, segment_len=32, vocabulary_size=256)
    tuner = keras_tuner.RandomSearch(hypermodel, objective="val_loss", max_trials=10)
    tuner.search(tokens, next_tokens, validation_split=0.1, epochs=3)
    ```
    """

    model_name = "transformer_xl"

    def __init__(self, input_shape, num_classes, segment_len, vocabulary_size=None, num_layers=None,
                 num_heads=None, head_size=None, hidden_dim=None, intermediate_dim=None, mem_len=None,
                 dropout=None, pre_lnorm=None, learning_rate=None, seed=None, name=None, tunable=True):
        self._set_up(input_shape, num_classes, segment_len, vocabulary_size, seed, name, tunable,
                     dict(num_layers=num_layers, num_heads=num_heads, head_size=head_size, hidden_dim=hidden_dim,
                          intermediate_dim=intermediate_dim, dropout=dropout, pre_lnorm=pre_lnorm,
                          learning_rate=learning_rate, mem_len=mem_len))

    def _set_up(self, input_shape, num_classes, segment_len, vocabulary_size, seed, name, tunable, arguments):
        """The fixed structure, shared with `HyperSegmentCache`."""
        self.input_shape = hyper_model.check_structure(input_shape, num_classes, rank=1 if vocabulary_size else 2)
        self.num_classes = num_classes
        self.segment_len = validation.check_positive_int("segment_len", segment_len)
        self.vocabulary_size, self.seed = vocabulary_size, seed
        super().__init__(arguments, name=name, tunable=tunable)

    def space(self):
        return {
            "num_layers": hp_types.Int("num_layers", 1, 4, default=2),
            "num_heads": hp_types.Choice("num_heads", [1, 2, 4], default=2),
            "head_size": hp_types.Choice("head_size", [16, 32, 64], default=32),
            "hidden_dim": hp_types.Choice("hidden_dim", [64, 128, 256], default=128),
            "intermediate_dim": hp_types.Choice("intermediate_dim", [128, 256, 512], default=256),
            **self.memory_space(),
            "dropout": hp_types.Float("dropout", 0.0, 0.3, step=0.1, default=0.1),
            "pre_lnorm": hp_types.Boolean("pre_lnorm", default=False),
            "learning_rate": hyper_model.learning_rate(),
        }

    def memory_space(self):
        """The hyperparameters of the memory, which subclasses replace."""
        length = self.segment_len
        return {"mem_len": hp_types.Choice("mem_len", [0, length, 2 * length, 4 * length], default=2 * length)}

    def backbone(self, hp, **common):
        return TransformerXL(mem_len=self.value(hp, "mem_len"), **common)

    def build_model(self, hp):
        hidden_dim = self.value(hp, "hidden_dim")
        common = dict(
            num_layers=self.value(hp, "num_layers"), num_heads=self.value(hp, "num_heads"),
            head_size=self.value(hp, "head_size"), hidden_dim=hidden_dim,
            intermediate_dim=self.value(hp, "intermediate_dim"), segment_len=self.segment_len,
            vocabulary_size=self.vocabulary_size, dropout=self.value(hp, "dropout"),
            pre_lnorm=self.value(hp, "pre_lnorm"), seed=self.seed, name="backbone",
        )
        if self.vocabulary_size:
            inputs = keras.Input(self.input_shape, dtype="int32", name="tokens")
            h = inputs
        else:
            inputs = keras.Input(self.input_shape, name="features")
            h = keras.layers.Dense(hidden_dim, use_bias=False, name="embedding")(inputs)
        h = self.backbone(hp, **common)(h)
        outputs = keras.layers.Dense(self.num_classes, name="logits")(h)
        return keras.Model(inputs, outputs, name=self.model_name)
