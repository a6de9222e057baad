"""SavedModel export with sequence and streaming endpoints."""

import os
import pathlib

import tensorflow as tf

from keras_relrec.export.graph import endpoints
from keras_relrec.export.graph.export_plan import plan_export
from keras_relrec.utils import atomic_files


def export_saved_model(model, path, *, streaming="auto", dynamic_length=True):
    """Writes `model` as a TensorFlow SavedModel.

    The SavedModel has a `serve` endpoint that takes whole sequences, and,
    when the model can stream, `step` and `initial_state` endpoints (see
    `keras_relrec.export.graph.endpoints` for their inputs and outputs).
    Recurrent layers run in a loop that converts to TFLite builtins. The
    `step` endpoint refuses states whose batch differs from the frame's.

    Args:
        model: A functional or sequential Keras model.
        path: The folder to write (written beside it and swapped in
            whole: see `keras_relrec.utils.atomic_files`): a new folder,
            an empty one or an earlier SavedModel, which it replaces.
        streaming: `True` to require the streaming endpoints (raises
            `ExportError` naming the layer that prevents them), `False` for
            `serve` only, `"auto"` (default) to add them when possible.
        dynamic_length: Whether axis 1 of every input (time) is dynamic.

    Returns:
        The names of the endpoints written.
    """
    if streaming not in (True, False, "auto"):
        raise ValueError(f"Argument `streaming` must be True, False or 'auto'; received streaming={streaming!r}.")
    _check_replaceable(path)
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
        # A folder: written beside `path`, then swapped in whole.
        with atomic_files.replacing(path) as temp:
            archive.write_out(str(temp), verbose=False)
    # TensorFlow's file errors are no OSError; the swap's are.
    except (tf.errors.OpError, OSError) as error:
        raise OSError(f"cannot write the SavedModel to {path}: {getattr(error, 'message', None) or error}") from None
    return names


# What a SavedModel folder holds; a folder with anything else is not
# replaced (the swap would delete it).
_SAVED_MODEL_ENTRIES = {"saved_model.pb", "saved_model.pbtxt", "variables", "assets", "fingerprint.pb",
                        "keras_metadata.pb"}


def _check_replaceable(path):
    """Refuses, before anything is written, a `path` that the swap would
    replace although it is not a SavedModel: a file (or a link to one),
    the current folder or a folder that holds anything else."""
    folder = pathlib.Path(os.path.realpath(path))
    if folder.is_dir():
        others = sorted(entry.name for entry in folder.iterdir() if entry.name not in _SAVED_MODEL_ENTRIES)
        if not others and folder != pathlib.Path.cwd():
            return
        what = f"a folder that holds {others[:3]}" if others else "the current folder"
    elif folder.exists():
        what = "an existing file (a SavedModel is a folder)"
    else:
        return
    raise ValueError(
        f"Argument `path` must be a new folder, an empty one or an earlier SavedModel, which the export "
        f"replaces whole; received path={str(path)!r}, {what}. Give a folder of its own."
    )
