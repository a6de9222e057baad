"""The states of a layer of the streaming protocol at the start of a stream
(zeros of its `streaming_state_specs()`), and those a `stateful=True` layer
keeps between calls, as `keras.layers.RNN` keeps its own: variables that are
not weights (saving and `set_weights` skip them), one per streaming state."""

import keras
from keras import ops

from keras_relrec.utils import keras_internals


def zeros(layer, batch):
    """Zeros of `layer.streaming_state_specs()` for `batch` rows."""
    return [ops.zeros((batch,) + shape, dtype) for _, shape, dtype in layer.streaming_state_specs()]


@keras_internals.untracked
def create(layer, batch):
    """Sets `layer.states`: variables holding `zeros(layer, batch)`."""
    layer.states = [
        keras.Variable(value, trainable=False, dtype=dtype, name=name)
        for value, (name, _, dtype) in zip(zeros(layer, batch), layer.streaming_state_specs())
    ]


def reset(layer):
    """Sets `layer.states` back to zeros (the start of a stream)."""
    if layer.states is None:
        raise ValueError(f"{type(layer).__name__}.reset_state() needs a built, stateful layer.")
    for state in layer.states:
        state.assign(ops.zeros(state.shape, state.dtype))
