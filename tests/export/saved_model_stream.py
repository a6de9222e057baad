"""Streams sequences through a loaded SavedModel's `step`, as a serving
client would: the test helper every SavedModel streaming test uses."""

import numpy as np


def stream_saved_model(loaded, x, input_name="sequence"):
    """Feeds `x` through `loaded.step` from `loaded.initial_state`: frame by
    frame, or chunk by chunk when the model exports `chunk_length`.

    Returns:
        The step outputs along the time axis, (batch, time, ...).
    """
    import tensorflow as tf

    chunk = int(loaded.chunk_length()["chunk_length"]) if hasattr(loaded, "chunk_length") else None
    if chunk is not None:
        assert x.shape[1] % chunk == 0, f"{x.shape[1]} steps are not a whole number of chunks of {chunk}"
    states = loaded.initial_state(tf.constant(x.shape[0]))
    outputs = []
    for t in range(0, x.shape[1], chunk or 1):
        result = loaded.step({input_name: x[:, t] if chunk is None else x[:, t : t + chunk], **states})
        outputs.append(result["output"])
        states = {k: result[k] for k in states}
    return np.stack(outputs, 1) if chunk is None else np.concatenate(outputs, 1)


def ungated_state_reads(function, state_names):
    """The ops of a traced or loaded `step` that read a state before its
    batch check has run.

    Graph ops without a dependency between them run in any order, so a
    state of the wrong batch could reach a concat (and fail with a message
    that names no state) before the check does. Every reader of a state
    must be the check's own `Shape` or wait on an `Assert`.

    Returns:
        The names of the ops that read a state unchecked.
    """
    graph = function.graph
    readers = [op for name in state_names for op in graph.get_operation_by_name(name).outputs[0].consumers()]
    return [op.name for op in readers
            if op.type != "Shape" and not any(c.type == "Assert" for c in op.control_inputs)]
