"""The states of a `StreamingLayer` at the start of a stream
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


def read(layer, inputs):
    """The values of `layer.states`, once `inputs` is known to have the batch
    size they were made for: kept states are never broadcast or cut. A
    layer may keep none (Transformer-XL without memory)."""
    if not layer.states:
        return []
    kept, batch = layer.states[0].shape[0], inputs.shape[0]
    if batch is not None and batch != kept:
        raise ValueError(
            f"{type(layer).__name__} '{layer.name}' (stateful=True) keeps states for batch size {kept}, "
            f"the batch size it was built for; received inputs of batch size {batch}. Feed batches of "
            f"{kept} only. Under tf.distribute each replica receives a share of every batch, which a "
            "stateful layer cannot take: train it data-parallel with JAX's "
            "keras.distribution.DataParallel (one program over the whole batch), or with stateful=False."
        )
    return [ops.convert_to_tensor(state) for state in layer.states]


def reset(layer):
    """Sets `layer.states` back to zeros (the start of a stream)."""
    if layer.states is None:
        raise ValueError(f"{type(layer).__name__}.reset_state() needs a built, stateful layer.")
    for state in layer.states:
        state.assign(ops.zeros(state.shape, state.dtype))
