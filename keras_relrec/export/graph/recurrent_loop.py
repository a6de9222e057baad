"""The recurrent loop of the export path.

Keras' own loop on TensorFlow carries its outputs in a `TensorArray`, which
the TFLite converter can only keep as Flex TensorList ops. This loop runs a
layer's cell in a `tf.while_loop` whose output buffer is a plain tensor,
written one step at a time with a dynamic-update-slice: it converts to the
builtin `WHILE`, `GATHER` and `DYNAMIC_UPDATE_SLICE` ops with dynamic batch
and length. It computes what `keras.layers.RNN` computes, masks included:
a masked step keeps the states and repeats the previous output (or outputs
zeros with `zero_output_for_mask=True`).

`sequence` runs a whole sequence; `rnn_streamer.RNNStreamer` runs one step
from given states, for the streaming signatures, with the helpers here.
"""

import contextlib
import contextvars

import keras
import tensorflow as tf
from keras import tree

from keras_relrec.export.export_error import ExportError
from keras_relrec.export.tensorflow_internals import dynamic_update_slice


def is_recurrent(layer):
    return isinstance(layer, (keras.layers.RNN, keras.layers.Bidirectional))


def initial_state(layer, batch_size):
    """The flat list of a recurrent layer's initial states."""
    if isinstance(layer, keras.layers.Bidirectional):
        return initial_state(layer.forward_layer, batch_size) + initial_state(
            layer.backward_layer, batch_size
        )
    return tree.flatten(layer.get_initial_state(batch_size))


# Whether masks are traced as numbers (`arithmetic_masks`).
_ARITHMETIC = contextvars.ContextVar("arithmetic_masks", default=False)
# tanh(this · tanh(Σ|a − b|)) is 1 (to float32) for a frame that differs
# from the mask value by 1e-3 in sum or more. Tanhs, not a minimum at 1:
# their int16 outputs keep a fixed scale, where 1 at the scale of a large
# product rounds to 0; and two of them, since TFLite's int16 TANH
# overflows on inputs beyond about 1e5 (the inner one takes the sum as it
# is, the outer one at most this).
_DIFFERS = 1e4


def _numeric_any(total):
    """1 where a non-negative `total` is 1e-3 or more, 0 where it is 0."""
    return tf.tanh(tf.tanh(total) * _DIFFERS)


@contextlib.contextmanager
def arithmetic_masks():
    """Within it, masks of padding are traced as numbers, 1 for a valid
    step and 0 for padding, and a masked step keeps the states by
    arithmetic (old + m · (new − old)): TFLite's 16x8 quantizer has no
    comparison, and TFLite Micro no int16 REDUCE_MAX. A frame that differs
    from the mask value by less than 1e-3 in sum counts in part, and one
    that differs by more than 1e5 overflows TFLite's int16 TANH."""
    token = _ARITHMETIC.set(True)
    try:
        yield
    finally:
        _ARITHMETIC.reset(token)


def reduce_any(values, axis, keepdims=False):
    """`reduce_any` as a reduce-max: TFLite Micro has REDUCE_MAX, not
    REDUCE_ANY. Of a comparison `a != b` (a mask of padding, as
    `keras.layers.Masking` makes), the max of |a − b|, which an int8 file
    computes in int8; of anything else, the max of the values as numbers.

    Within `arithmetic_masks` the mask of padding is a number, 1 or 0 from
    Σ|a − b| (a model that uses `keras.ops.any` of such a comparison as
    anything but a mask then reads that number)."""
    op = getattr(values, "op", None)
    if op is not None and op.type == "NotEqual" and not op.inputs[0].dtype.is_bool:
        a, b = op.inputs
        if _ARITHMETIC.get():
            return _numeric_any(tf.reduce_sum(tf.abs(a - b), axis=axis, keepdims=keepdims))
        return tf.reduce_max(tf.abs(a - b), axis=axis, keepdims=keepdims) > 0
    return tf.reduce_max(tf.cast(tf.cast(values, tf.bool), tf.float32), axis=axis, keepdims=keepdims) > 0


def step_mask(mask):
    """A (batch, time) mask from a Keras mask of rank 2 or more: boolean,
    or within `arithmetic_masks` 0/1 numbers."""
    if _ARITHMETIC.get():
        mask = tf.cast(mask, tf.float32)
        if mask.shape.rank > 2:
            mask = _numeric_any(tf.reduce_sum(mask, axis=list(range(2, mask.shape.rank))))
        return mask
    mask = tf.cast(mask, tf.bool)
    if mask.shape.rank > 2:
        mask = reduce_any(mask, axis=list(range(2, mask.shape.rank)))
    return mask


def where(mask_t, new, old):
    """`new` where the step is valid, `old` where it is masked; a numeric
    mask (`arithmetic_masks`) blends them."""
    mask_t = tf.reshape(mask_t, [-1] + [1] * (new.shape.rank - 1))
    if mask_t.dtype.is_floating:
        # Not m·new + (1 − m)·old: TFLM aborts on that form's int16 file.
        return old + tf.cast(mask_t, new.dtype) * (new - old)
    return tf.where(mask_t, new, old)


def keep_valid(mask, sequences):
    """`sequences` with zeros where the (batch, time, 1) mask is false (or,
    as numbers, 0)."""
    if mask.dtype.is_floating:
        return sequences * tf.cast(mask, sequences.dtype)
    return tf.where(mask, sequences, tf.zeros_like(sequences))


def call_cell(layer, x_t, states):
    """One step of the cell with Keras' state structure."""
    states = tree.pack_sequence_as(layer.get_initial_state(1), states)
    output, new_states = layer.cell(x_t, states, training=False)
    return output, tree.flatten(new_states)


def _step_output_shape(layer, sequences):
    shape = layer.compute_output_shape(tuple(sequences.shape))
    if layer.return_state:
        shape = shape[0]
    return tuple(shape[2:] if layer.return_sequences else shape[1:])


def sequence(layer, sequences, mask=None, states=None, unroll=False):
    """Runs a recurrent layer over `sequences` as Keras would at inference.

    With `unroll=True` a sequence of static length is traced as one copy of
    the step per time step (no WHILE: the accelerator target's export), as
    Sonnet's `static_unroll` against its `dynamic_unroll`.

    Returns what the layer returns: the output (all steps or the last), and
    with `return_state=True` the final states after it.
    """
    if isinstance(layer, keras.layers.Bidirectional):
        return _bidirectional_sequence(layer, sequences, mask, states, unroll)
    if layer.unroll:
        raise ExportError(
            f"layer '{layer.name}' has unroll=True; export it with unroll=False "
            "(the exported loop handles any length)"
        )
    if mask is not None:
        mask = step_mask(mask)
    if layer.go_backwards:
        sequences = tf.reverse(sequences, [1])
        mask = None if mask is None else tf.reverse(mask, [1])
    # Static sizes where the signature fixes them: the loop's shapes then stay
    # static, which runtimes without dynamic shapes (TFLite Micro) need.
    batch = sequences.shape[0] or tf.shape(sequences)[0]
    steps = sequences.shape[1] or tf.shape(sequences)[1]
    if states is None:
        states = initial_state(layer, batch)
    dtype = layer.compute_dtype
    output_shape = _step_output_shape(layer, sequences)
    last = tf.zeros(tf.concat([[batch], output_shape], 0), dtype)
    if layer.return_sequences:
        buffer = tf.zeros(tf.concat([[batch, steps], output_shape], 0), dtype)
    else:
        buffer = tf.zeros([0], dtype)  # unused, but the loop carries it
    zero_start = [0] * len(output_shape)
    if mask is not None:
        # Gathered as numbers: TFLite Micro's GATHER takes no booleans (and
        # its STRIDED_SLICE no step index). A select, which the converter
        # does not fold back into the boolean as it folds a cast.
        if not mask.dtype.is_floating:
            mask = tf.where(mask, tf.ones_like(mask, tf.float32), tf.zeros_like(mask, tf.float32))
    # Within `arithmetic_masks` the step blends by the mask's value.
    valid = (lambda m: m) if _ARITHMETIC.get() else (lambda m: m > 0.5)

    def step(x_t, mask_t, last, states):
        output, new_states = call_cell(layer, x_t, list(states))
        output = tf.cast(output, dtype)
        if mask_t is not None:
            held = tf.zeros_like(output) if layer.zero_output_for_mask else last
            output = where(mask_t, output, held)
            new_states = [where(mask_t, n, s) for n, s in zip(new_states, states)]
        return output, new_states

    if unroll and isinstance(steps, int):
        # One copy of the step per time step, no loop: for delegates that
        # cannot run a WHILE (GPU, NPU).
        outputs = []
        for t in range(steps):
            last, states = step(sequences[:, t], None if mask is None else valid(mask[:, t]), last, states)
            outputs.append(last)
        return _finish(layer, tf.stack(outputs, 1) if layer.return_sequences else last, states)

    def body(t, last, buffer, *states):
        mask_t = None if mask is None else valid(tf.gather(mask, t, axis=1))
        output, new_states = step(tf.gather(sequences, t, axis=1), mask_t, last, states)
        if layer.return_sequences:
            buffer = dynamic_update_slice(
                buffer, output[:, None], [0, t] + zero_start
            )
        return (t + 1, output, buffer, *new_states)

    loop_vars = (tf.constant(0), last, buffer, *states)
    _, last, buffer, *states = tf.while_loop(
        lambda t, *_: t < steps,
        body,
        loop_vars,
        shape_invariants=(
            tf.TensorShape([]),
            _invariant(last, sequences.shape[0]),
            _invariant(buffer, sequences.shape[0]) if layer.return_sequences else buffer.shape,
            *(_invariant(state, sequences.shape[0]) for state in states),
        ),
    )
    return _finish(layer, buffer if layer.return_sequences else last, states)


def _finish(layer, output, states):
    """What the layer returns: its output, and its final states with
    `return_state=True`."""
    if layer.return_state:
        packed = tree.pack_sequence_as(layer.get_initial_state(1), states)
        return [output] + list(packed)
    return output


def _invariant(value, batch):
    """The batch may vary across calls unless the signature fixes it; the
    loop keeps every other axis."""
    shape = value.shape.as_list()
    if shape:
        shape[0] = batch
    return tf.TensorShape(shape)


def _bidirectional_sequence(layer, sequences, mask, states, unroll):
    n_forward = len(initial_state(layer.forward_layer, 1))
    forward_states = backward_states = None
    if states is not None:
        forward_states, backward_states = states[:n_forward], states[n_forward:]
    forward = sequence(layer.forward_layer, sequences, mask, forward_states, unroll)
    backward = sequence(layer.backward_layer, sequences, mask, backward_states, unroll)
    if layer.return_state:
        forward, *forward_final = forward
        backward, *backward_final = backward
    if layer.return_sequences:
        backward = tf.reverse(backward, [1])
    merged = {
        "concat": lambda: tf.concat([forward, backward], -1),
        "sum": lambda: forward + backward,
        "ave": lambda: (forward + backward) / 2,
        "mul": lambda: forward * backward,
        None: lambda: [forward, backward],
    }[layer.merge_mode]()
    if layer.return_state:
        merged = merged if isinstance(merged, list) else [merged]
        return merged + forward_final + backward_final
    return merged


def streaming_refusal(layer):
    """Why a recurrent layer cannot stream frame by frame, or None."""
    if isinstance(layer, keras.layers.Bidirectional):
        return (
            f"layer '{layer.name}' is Bidirectional: its backward half needs the "
            "end of the sequence, so it cannot stream"
        )
    if layer.go_backwards:
        return (
            f"layer '{layer.name}' has go_backwards=True: it needs the end of the "
            "sequence, so it cannot stream"
        )
    if layer.return_state:
        return (
            f"layer '{layer.name}' has return_state=True; the streaming step returns "
            "the states itself, so export the model without it"
        )
    return None
