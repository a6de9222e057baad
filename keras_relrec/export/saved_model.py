"""SavedModel export with sequence and streaming endpoints."""

import tensorflow as tf

from keras_relrec.export.graph import endpoints
from keras_relrec.export.graph.export_plan import plan_export


def export_saved_model(model, path, *, streaming="auto", dynamic_length=True):
    """Writes `model` as a TensorFlow SavedModel.

    The SavedModel has a `serve` endpoint that takes whole sequences, and,
    when the model can stream, `step` and `initial_state` endpoints (see
    `keras_relrec.export.graph.endpoints` for their inputs and outputs).
    Recurrent layers run in a loop that converts to TFLite builtins. The
    `step` endpoint refuses states whose batch differs from the frame's.

    Args:
        model: A functional or sequential Keras model.
        path: The folder to write.
        streaming: `True` to require the streaming endpoints (raises
            `ExportError` naming the layer that prevents them), `False` for
            `serve` only, `"auto"` (default) to add them when possible.
        dynamic_length: Whether axis 1 of every input (time) is dynamic.

    Returns:
        The names of the endpoints written.
    """
    if streaming not in (True, False, "auto"):
        raise ValueError(f"Argument `streaming` must be True, False or 'auto'; received streaming={streaming!r}.")
    plan = plan_export(model)
    if streaming == "auto":
        streaming = plan.can_stream
    elif streaming:
        plan.require_streaming()
    archive = endpoints.new_archive(model)
    names = endpoints.add_endpoints(
        archive, model, plan, sequence=True, streaming=streaming, dynamic_length=dynamic_length, check_batch=True
    )
    try:
        archive.write_out(str(path), verbose=False)
    except tf.errors.OpError as error:  # TensorFlow's file errors are no OSError
        raise OSError(f"cannot write the SavedModel to {path}: {error.message}") from None
    return names
