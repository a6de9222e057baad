"""The states a `stateful=True` layer of the streaming protocol keeps between
calls, as `keras.layers.RNN` keeps its own: variables that are not weights
(saving and `set_weights` skip them), one per streaming state."""

import keras
from keras import ops

from keras_relrec.utils import keras_internals


@keras_internals.untracked
def create(layer, batch):
    """Sets `layer.states`: zeros of `layer.streaming_state_specs()` for
    `batch` rows."""
    layer.states = [
        keras.Variable(ops.zeros((batch,) + shape, dtype), trainable=False, dtype=dtype, name=name)
        for name, shape, dtype in layer.streaming_state_specs()
    ]


def reset(layer):
    """Sets `layer.states` back to zeros (the start of a stream)."""
    if layer.states is None:
        raise ValueError(f"{type(layer).__name__}.reset_state() needs a built, stateful layer.")
    for state in layer.states:
        state.assign(ops.zeros(state.shape, state.dtype))
