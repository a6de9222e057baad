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
