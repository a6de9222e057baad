"""A keras-tuner HyperModel of a relational-memory sequence classifier."""

import keras
from keras_tuner.engine import hyperparameters as hp_types

from keras_relrec.layers import RelationalMemoryCell
from keras_relrec.tuning import hyper_model
from keras_relrec.utils import validation


class HyperRelationalMemory(hyper_model.SequenceHyperModel):
    """Sequence classifier on the relational memory core (Santoro et al.,
    "Relational recurrent neural networks", NeurIPS 2018), as a keras-tuner
    HyperModel.

    ```
    sequence (steps, features) → RNN(RelationalMemoryCell) (last output)
        → Dense(head_units, ReLU) → Dense(num_classes) (logits)
    ```

    Compiled with Adam at `learning_rate` on sparse categorical
    cross-entropy from logits, with accuracy.

    Hyperparameters (names are stable; pass `hyperparameters=` with
    `tune_new_entries=False` to a tuner to search only some of them):

    | name | type | default space | default |
    |---|---|---|---|
    | mem_slots | Choice | 1, 2, 4, 8 | 4 |
    | head_size | Choice | 8, 16, 32, 64 | 16 |
    | num_heads | Choice | 1, 2, 4 | 2 |
    | num_blocks | Int | 1 to 3 | 1 |
    | gate_style | Choice | unit, memory, none | unit |
    | attention_mlp_layers | Int | 1 to 3 | 2 |
    | head_units | Choice | 32, 64, 128 | 64 |
    | learning_rate | Float | 1e-4 to 1e-2, log | 0.001 |

    `gate_style` "none" is the cell's `gate_style=None`.

    Args:
        input_shape: (steps, features) of one example; steps may be `None`.
        num_classes: Number of classes.
        mem_slots, head_size, num_heads, num_blocks, gate_style,
            attention_mlp_layers: Of the `RelationalMemoryCell`; each a fixed
            value, a keras-tuner hyperparameter object or `None` for the
            default space above.
        head_units: Width of the hidden layer of the classifier head.
        learning_rate: Adam's learning rate.
        name, tunable: As `keras_tuner.HyperModel`.

    Example:

    ```python
    import keras_tuner
    from keras_relrec.tuning import HyperRelationalMemory

    hypermodel = HyperRelationalMemory((16, 8), num_classes=4, gate_style="unit")
    tuner = keras_tuner.RandomSearch(hypermodel, objective="val_accuracy", max_trials=10)
    tuner.search(x, y, validation_split=0.2, epochs=5)
    best = tuner.get_best_models(1)[0]
    ```
    """

    def __init__(self, input_shape, num_classes, mem_slots=None, head_size=None, num_heads=None,
                 num_blocks=None, gate_style=None, attention_mlp_layers=None, head_units=None,
                 learning_rate=None, name=None, tunable=True):
        self.input_shape = hyper_model.check_structure(input_shape, num_classes)
        self.num_classes = num_classes
        super().__init__(
            dict(mem_slots=mem_slots, head_size=head_size, num_heads=num_heads, num_blocks=num_blocks,
                 gate_style=gate_style, attention_mlp_layers=attention_mlp_layers, head_units=head_units,
                 learning_rate=learning_rate),
            name=name, tunable=tunable,
        )

    def space(self):
        return {
            "mem_slots": hp_types.Choice("mem_slots", [1, 2, 4, 8], default=4),
            "head_size": hp_types.Choice("head_size", [8, 16, 32, 64], default=16),
            "num_heads": hp_types.Choice("num_heads", [1, 2, 4], default=2),
            "num_blocks": hp_types.Int("num_blocks", 1, 3, default=1),
            "gate_style": hp_types.Choice("gate_style", ["unit", "memory", "none"], default="unit"),
            "attention_mlp_layers": hp_types.Int("attention_mlp_layers", 1, 3, default=2),
            "head_units": hp_types.Choice("head_units", [32, 64, 128], default=64),
            "learning_rate": hyper_model.learning_rate(),
        }

    def build_model(self, hp):
        gate_style = self.value(hp, "gate_style")
        cell = RelationalMemoryCell(
            mem_slots=self.value(hp, "mem_slots"),
            head_size=self.value(hp, "head_size"),
            num_heads=self.value(hp, "num_heads"),
            num_blocks=self.value(hp, "num_blocks"),
            gate_style=None if gate_style == "none" else gate_style,
            attention_mlp_layers=self.value(hp, "attention_mlp_layers"),
        )
        inputs = keras.Input(self.input_shape, name="sequence")
        h = keras.layers.RNN(cell, name="relational_memory")(inputs)
        units = validation.check_positive_int("head_units", self.value(hp, "head_units"))
        h = keras.layers.Dense(units, activation="relu", name="hidden")(h)
        outputs = keras.layers.Dense(self.num_classes, name="logits")(h)
        return keras.Model(inputs, outputs, name="relational_memory_classifier")
