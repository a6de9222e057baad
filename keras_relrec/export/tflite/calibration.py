"""The representative dataset that calibrates an int8 export
(`export_tflite(..., quantize="int8", representative_data=...)`): the
converter's int8 ranges come from the examples run through the signatures
the file will have, whole sequences or (streaming) frame by frame.
"""

import numpy as np
import tensorflow as tf

from keras_relrec.export.graph import endpoints
from keras_relrec.utils import validation

# Enough calibration examples for int8 ranges; more only slows conversion.
MAX_CALIBRATION_EXAMPLES = 100


def _examples(plan, representative_data, batch_size=None):
    """Up to `MAX_CALIBRATION_EXAMPLES` examples, each {input name: array
    with a batch of one, or of `batch_size`}."""
    names = list(plan.inputs)
    if isinstance(representative_data, dict):
        if set(representative_data) != set(names):
            raise ValueError(
                f"Argument `representative_data` must have one array per model input "
                f"{names}; received arrays for {sorted(representative_data)}."
            )
        batches = [representative_data]
    elif len(names) > 1:
        if not isinstance(representative_data, (list, tuple)) or len(representative_data) != len(names):
            raise ValueError(
                f"Argument `representative_data` must hold one array per model input "
                f"{names}, as a dict by name or a list in that order; received "
                f"{type(representative_data).__name__}."
            )
        batches = [dict(zip(names, representative_data))]
    elif isinstance(representative_data, np.ndarray):
        batches = [{names[0]: representative_data}]
    else:  # an iterable of batches, read only as far as needed
        batches = ({names[0]: batch} for batch in representative_data)
    examples = []
    for batch in batches:
        arrays = {name: np.asarray(batch[name]) for name in names}
        for name, array in arrays.items():
            # Ranges from NaN or inf are NaN: the file would be written, then fail to run.
            if np.issubdtype(array.dtype, np.inexact) and not np.isfinite(array).all():
                raise ValueError(
                    f"Argument `representative_data` must hold finite values; input '{name}' has "
                    f"{array.size - np.isfinite(array).sum()} NaN or infinite values of {array.size}. Replace "
                    "them (padding with the model's mask value, e.g. np.nan_to_num(x)) or drop those examples."
                )
        for name, array in arrays.items():
            # The converter's own message names neither the data nor the input.
            expected = tuple(plan.inputs[name].shape)
            if array.ndim != len(expected) or not validation.shapes_agree(array.shape[2:], expected[2:]):
                raise ValueError(
                    f"Argument `representative_data` must hold arrays of the model's input shape for input "
                    f"'{name}', (examples, {', '.join('?' if d is None else str(d) for d in expected[1:])}); "
                    f"received an array of shape {array.shape}."
                )
        counts = {len(array) for array in arrays.values()}
        if len(counts) != 1:
            raise ValueError(
                "Argument `representative_data` must hold as many examples for every "
                f"input; received {[len(a) for a in arrays.values()]}."
            )
        rows = batch_size or 1
        for k in range(0, counts.pop() - rows + 1, rows):
            examples.append({name: array[k : k + rows] for name, array in arrays.items()})
            if len(examples) == MAX_CALIBRATION_EXAMPLES:
                return examples
    if not examples:
        raise ValueError("Argument `representative_data` holds no example.")
    return examples


def _check_lengths(plan, examples, length):
    """Sequences of another length than a fixed-length file's would fail
    inside the converter, without a word of the data."""
    for example in examples:
        for name, array in example.items():
            want = length if length is not None else plan.inputs[name].shape[1]
            if array.ndim >= 2 and want is not None and array.shape[1] != want:
                raise ValueError(
                    f"Argument `representative_data` must hold sequences of the file's length, {want} steps, for "
                    f"input '{name}'; received sequences of {array.shape[1]}. Calibrate on sequences of that "
                    "length, or export without a fixed length."
                )


def representative_dataset(model, plan, representative_data, streaming, batch_size=None, step_only=False,
                           fixed_length=False, length=None):
    """The converter's representative dataset: examples one at a time (or
    `batch_size` at a time), as whole sequences or (streaming) frame by
    frame; with `step_only`, the file has no `initial_state` to calibrate;
    with `fixed_length`, whole sequences must have `serve`'s length
    (`length`, or the model's)."""
    examples = _examples(plan, representative_data, batch_size)
    if fixed_length and not streaming:
        _check_lengths(plan, examples, length)

    def sequences():
        for example in examples:
            yield ("serve", example)

    def frames():
        # The states met while streaming real data set the state ranges.
        step = tf.function(endpoints.step_fn(model, plan))
        initial_state = tf.function(endpoints.initial_state_fn(plan))
        chunk = plan.chunk_length
        for example in examples:
            ((name, sequence),) = example.items()
            rows = len(sequence)
            if not step_only:
                yield ("initial_state", {"batch_size": np.array(rows, np.int32)})
            states = {key: v.numpy() for key, v in initial_state(tf.constant(rows)).items()}
            for t in range(0, sequence.shape[1] - (chunk or 1) + 1, chunk or 1):
                inputs = {name: sequence[:, t] if chunk is None else sequence[:, t : t + chunk], **states}
                yield ("step", inputs)
                outputs = step(inputs)
                states = {key: outputs[key].numpy() for key in states}

    return frames if streaming else sequences
