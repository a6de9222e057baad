"""The machinery every HyperModel of the package shares: arguments that are
fixed values, keras-tuner hyperparameters or the documented default space,
registered under stable names."""

import keras
import keras_tuner
from keras_tuner.engine import hyperparameters as hp_types

from keras_relrec.models.training_state import build_training_state
from keras_relrec.utils import validation


class SequenceHyperModel(keras_tuner.HyperModel):
    """Base of the package's HyperModels (keras-tuner's `HyperResNet` style:
    the fixed structure in `__init__`, the space in `build(hp)`).

    A subclass lists its tunable arguments in `space()`, each with its
    default hyperparameter, and builds the model in `build_model(hp)`,
    reading every tunable argument through `self.value(hp, name)`. A tunable
    argument given to the constructor is:

    - `None` (default): the default hyperparameter of `space()`;
    - a keras-tuner hyperparameter object (`keras_tuner.engine.
      hyperparameters.Choice`, `Int`, `Float`, `Boolean`, `Fixed`): its
      range, registered under the argument's own name, so that the names of
      the docstring's table hold whatever the object was called;
    - anything else: a fixed value, used as is and not registered.
    """

    def __init__(self, tunable_arguments, name=None, tunable=True):
        super().__init__(name=name, tunable=tunable)
        space = self.space()
        unknown = set(tunable_arguments) - set(space)
        if unknown:
            raise ValueError(f"{type(self).__name__} has no tunable argument {sorted(unknown)}; "
                             f"expected any of {sorted(space)}.")
        self.arguments = {name: tunable_arguments.get(name) for name in space}

    def space(self):
        """{argument name: its default keras-tuner hyperparameter}."""
        raise NotImplementedError

    def build_model(self, hp):
        """The uncompiled model for the values `hp` gives."""
        raise NotImplementedError

    def value(self, hp, name):
        """The value of tunable argument `name` in this trial."""
        argument = self.arguments[name]
        if argument is None:
            argument = self.space()[name]
        if not isinstance(argument, hp_types.HyperParameter):
            return argument
        config = argument.get_config()
        config.pop("conditions", None)
        config["name"] = name
        return getattr(hp, type(argument).__name__)(**config)

    def build(self, hp):
        model = self.build_model(hp)
        model.compile(
            optimizer=keras.optimizers.Adam(self.value(hp, "learning_rate")),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
        # Integer labels, the logits' shape without the classes: the trial's
        # first step is traced once on TensorFlow (`build_training_state`).
        inputs = model.inputs[0] if len(model.inputs) == 1 else model.inputs
        return build_training_state(model, inputs, keras.KerasTensor(model.outputs[0].shape[:-1], "int32"))


def check_structure(input_shape, num_classes, rank=2):
    """The fixed structure every classifier HyperModel takes."""
    validation.check_positive_int("num_classes", num_classes)
    if not (isinstance(input_shape, (list, tuple)) and len(input_shape) == rank):
        raise ValueError(f"Argument `input_shape` must be the shape of one example, {rank} sizes; received "
                         f"input_shape={input_shape!r}.")
    return tuple(input_shape)


def learning_rate(default=1e-3):
    """The learning-rate space every HyperModel uses: 1e-4 to 1e-2, log."""
    return hp_types.Float("learning_rate", 1e-4, 1e-2, sampling="log", default=default)
