"""`keras.layers.RNN` as a `StreamingLayer` of the export."""

import keras
import tensorflow as tf
from keras import tree

from keras_relrec.export.export_error import ExportError
from keras_relrec.export.graph import recurrent_loop
from keras_relrec.export.graph import stateful_protocol
from keras_relrec.layers.streaming_layer import StreamingLayer
from keras_relrec.utils import keras_internals

# Cells whose output is their first state (h), as Keras' loops assume.
FIRST_STATE_OUTPUT_CELLS = (
    keras.layers.LSTMCell,
    keras.layers.GRUCell,
    keras.layers.SimpleRNNCell,
    keras_internals.ConvLSTMCell,
)


class RNNStreamer(StreamingLayer):
    """Streams a `keras.layers.RNN` (ours and Keras' cells, stacked cells,
    `LSTM`, `GRU`, ...) one step at a time; see `StreamingLayer`.

    States: the cell's flat states, named `state_<k>` in the order of the
    layer's Keras states (for an LSTM, 0 is h and 1 is c). A masked step
    repeats the layer's real previous output, as Keras' TensorFlow loop does
    (zeros before the first step). For a cell whose output is its first
    state — Keras' cells, and any cell that sets `output_is_first_state =
    True`, as all of keras_relrec's do — that output is already a state: the
    last cell's first state, in a stack. For any other cell reached by a
    mask, the previous output is carried as one more state, `output`.

    Args:
        layer: The `keras.layers.RNN`.
        input_shape: The shape of the layer's input sequences.
        masked: Whether a mask may reach the layer in the model.
    """

    def __init__(self, layer, input_shape, masked):
        self.layer = layer
        self.output_index = _output_state_index(layer)
        self.holds_output = masked and not layer.zero_output_for_mask and self.output_index is None
        shape = layer.compute_output_shape(tuple(input_shape))
        if layer.return_state:
            shape = shape[0]
        self.output_shape = tuple(shape[2:] if layer.return_sequences else shape[1:])

    def streaming_refusal(self):
        return recurrent_loop.streaming_refusal(self.layer)

    def streaming_state_specs(self):
        specs = [
            (f"state_{k}", tuple(value.shape[1:]), value.dtype)
            for k, value in enumerate(recurrent_loop.initial_state(self.layer, 1))
        ]
        if self.holds_output:
            specs.append(("output", self.output_shape, self.layer.compute_dtype))
        return specs

    def streaming_initial_state(self, batch_size):
        states = recurrent_loop.initial_state(self.layer, batch_size)
        if self.holds_output:
            shape = tf.concat([[batch_size], self.output_shape], 0)
            states.append(tf.zeros(shape, self.layer.compute_dtype))
        return states

    def streaming_step(self, inputs, states, mask=None):
        count = len(states) - int(self.holds_output)
        cell_states = list(states[:count])
        output, new_states = recurrent_loop.call_cell(
            # A squeeze, not a slice: TFLite Micro slices at most 4-D tensors.
            self.layer, tf.squeeze(inputs, 1), cell_states
        )
        output = tf.cast(output, self.layer.compute_dtype)
        if mask is not None:
            mask_t = recurrent_loop.step_mask(mask)[:, 0]
            if self.layer.zero_output_for_mask:
                held = tf.zeros_like(output)
            elif self.holds_output:
                held = states[-1]
            elif self.output_index is not None:
                held = states[self.output_index]
            else:
                raise ExportError(
                    f"layer '{self.layer.name}' receives a mask that the export plan did not "
                    "find in the model's graph; pass the mask through keras.layers.Masking or "
                    "Embedding(mask_zero=True)"
                )
            output = recurrent_loop.where(mask_t, output, tf.cast(held, output.dtype))
            new_states = [recurrent_loop.where(mask_t, n, s) for n, s in zip(new_states, cell_states)]
        if self.holds_output:
            new_states.append(output)
        if self.layer.return_sequences:
            output = tf.expand_dims(output, 1)
        return output, new_states


def _output_state_index(layer):
    """The flat index of the state that equals the layer's output, or None
    when the cell (the last one of a stack) is not known to keep it there."""
    cell = layer.cell
    last, before = cell, []
    if isinstance(cell, keras.layers.StackedRNNCells):
        last, before = cell.cells[-1], layer.get_initial_state(1)[:-1]
    if isinstance(last, FIRST_STATE_OUTPUT_CELLS) or stateful_protocol.output_is_first_state(last):
        return len(tree.flatten(before))
    return None
