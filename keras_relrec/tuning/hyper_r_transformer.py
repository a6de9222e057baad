"""A keras-tuner HyperModel of an R-Transformer sequence classifier."""

import keras
from keras_tuner.engine import hyperparameters as hp_types

from keras_relrec.layers import RTransformerBlock
from keras_relrec.layers.local_recurrence import r_transformer_block
from keras_relrec.tuning import hyper_model
from keras_relrec.utils import validation

POOLINGS = ("last", "mean")


class HyperRTransformer(hyper_model.SequenceHyperModel):
    """Sequence classifier of R-Transformer blocks (Wang et al.,
    "R-Transformer: Recurrent Neural Network Enhanced Transformer", 2019:
    local recurrence over windows, then causal attention), as a keras-tuner
    HyperModel.

    ```
    sequence (steps, features) → Dense(width) → RTransformerBlock × num_blocks
        → last step (pooling "last") or mean over steps ("mean") → Dense(num_classes)
    ```

    Compiled with Adam at `learning_rate` on sparse categorical
    cross-entropy from logits, with accuracy.

    Hyperparameters (names are stable):

    | name | type | default space | default |
    |---|---|---|---|
    | width | Choice | 32, 64, 128 | 64 |
    | num_blocks | Int | 1 to 3 | 2 |
    | num_heads | Choice | 1, 2, 4 | 2 |
    | window_size | Choice | 4, 8, 16 | 8 |
    | num_local_layers | Int | 0 to 2 | 1 |
    | cell | Choice | gru, lstm, simple_rnn | gru |
    | dropout | Float | 0.0 to 0.3, step 0.1 | 0.1 |
    | learning_rate | Float | 1e-4 to 1e-2, log | 0.001 |

    Args:
        input_shape: (steps, features) of one example; steps may be `None`
            with pooling "mean".
        num_classes: Number of classes.
        pooling: `"last"` (default: the causal model's last output; needs a
            fixed number of steps) or `"mean"`.
        width, num_blocks, num_heads, window_size, num_local_layers, cell,
            dropout, learning_rate: Of the blocks and Adam; each a fixed
            value, a keras-tuner hyperparameter object or `None` for the
            default space above. `width` must be a multiple of `num_heads`.
        seed: Seed of the dropout.
        name, tunable: As `keras_tuner.HyperModel`.

    Example:

    ```python
    hypermodel = HyperRTransformer((64, 1), num_classes=10, cell="gru")
    tuner = keras_tuner.RandomSearch(hypermodel, objective="val_accuracy", max_trials=10)
    ```
    """

    def __init__(self, input_shape, num_classes, pooling="last", width=None, num_blocks=None, num_heads=None,
                 window_size=None, num_local_layers=None, cell=None, dropout=None, learning_rate=None, seed=None,
                 name=None, tunable=True):
        self.input_shape = hyper_model.check_structure(input_shape, num_classes)
        self.num_classes = num_classes
        self.pooling = validation.check_choice("pooling", pooling, POOLINGS)
        if pooling == "last" and self.input_shape[0] is None:
            raise ValueError("Argument `pooling` 'last' needs a fixed number of steps; received "
                             f"input_shape={input_shape!r}. Give the steps or use pooling='mean'.")
        self.seed = seed
        super().__init__(
            dict(width=width, num_blocks=num_blocks, num_heads=num_heads, window_size=window_size,
                 num_local_layers=num_local_layers, cell=cell, dropout=dropout, learning_rate=learning_rate),
            name=name, tunable=tunable,
        )

    def space(self):
        return {
            "width": hp_types.Choice("width", [32, 64, 128], default=64),
            "num_blocks": hp_types.Int("num_blocks", 1, 3, default=2),
            "num_heads": hp_types.Choice("num_heads", [1, 2, 4], default=2),
            "window_size": hp_types.Choice("window_size", [4, 8, 16], default=8),
            "num_local_layers": hp_types.Int("num_local_layers", 0, 2, default=1),
            "cell": hp_types.Choice("cell", list(r_transformer_block.CELLS), default="gru"),
            "dropout": hp_types.Float("dropout", 0.0, 0.3, step=0.1, default=0.1),
            "learning_rate": hyper_model.learning_rate(),
        }

    def build_model(self, hp):
        width = validation.check_positive_int("width", self.value(hp, "width"))
        inputs = keras.Input(self.input_shape, name="sequence")
        h = keras.layers.Dense(width, name="projection")(inputs)
        for k in range(self.value(hp, "num_blocks")):
            h = RTransformerBlock(
                self.value(hp, "num_heads"), self.value(hp, "window_size"),
                num_local_layers=self.value(hp, "num_local_layers"), cell=self.value(hp, "cell"),
                dropout=self.value(hp, "dropout"), seed=self.seed, name=f"block_{k}",
            )(h)
        if self.pooling == "last":
            h = keras.layers.Cropping1D((self.input_shape[0] - 1, 0), name="last_step")(h)
            h = keras.layers.Reshape((width,))(h)
        else:
            h = keras.layers.GlobalAveragePooling1D(name="mean")(h)
        outputs = keras.layers.Dense(self.num_classes, name="logits")(h)
        return keras.Model(inputs, outputs, name="r_transformer")
