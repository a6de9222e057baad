"""SavedModel export with sequence and streaming endpoints."""

from keras_relrec.export import endpoints
from keras_relrec.export import model_graph
from keras_relrec.export.export_error import ExportError


def export_saved_model(model, path, *, streaming="auto", dynamic_length=True):
    """Writes `model` as a TensorFlow SavedModel.

    The SavedModel has a `serve` endpoint that takes whole sequences, and,
    when the model can stream, `step` and `initial_state` endpoints (see
    `keras_relrec.export.endpoints` for their inputs and outputs). Recurrent
    layers run in a loop that converts to TFLite builtins.

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
    if streaming == "auto":
        try:
            model_graph.check_streamable(model)
            streaming = True
        except ExportError:
            streaming = False
    archive = endpoints.new_archive(model)
    endpoints.add_endpoints(
        archive, model, sequence=True, streaming=streaming, dynamic_length=dynamic_length
    )
    archive.write_out(str(path), verbose=False)
    return ["serve", "step", "initial_state"] if streaming else ["serve"]
