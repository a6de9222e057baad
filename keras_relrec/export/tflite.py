"""TFLite export: builtins only, dynamic batch and length, streaming and
quantized variants."""

import pathlib
import re
import tempfile

import numpy as np
import tensorflow as tf

from keras_relrec.export import endpoints
from keras_relrec.export import model_graph
from keras_relrec.export import tflite_inspect
from keras_relrec.export.export_error import ExportError

QUANTIZE_MODES = (None, "float16", "dynamic_int8", "int8")
# Enough calibration examples for int8 ranges; more only slows conversion.
MAX_CALIBRATION_EXAMPLES = 100


def export_tflite(
    model,
    path,
    *,
    streaming=False,
    quantize=None,
    representative_data=None,
    dynamic_length=True,
):
    """Writes `model` as a `.tflite` file that uses builtin ops only.

    Sequence mode (default): one signature, `serve`, taking whole sequences
    with dynamic batch and (with `dynamic_length`) dynamic length. Streaming
    mode: signatures `step` (one time step and the states in, `output` and
    the new states out, by name) and `initial_state` (`batch_size` in).
    See `keras_relrec.export.endpoints` for the names.

    Args:
        model: A functional or sequential Keras model.
        path: The `.tflite` file to write.
        streaming: Whether to export the streaming signatures.
        quantize: `None` (float32), `"float16"` (float16 weights),
            `"dynamic_int8"` (int8 weights, float activations) or `"int8"`
            (int8 weights and activations where the ops allow, calibrated on
            `representative_data`; other ops stay float).
        representative_data: For `"int8"`: an array of input sequences
            (examples, time, ...) or an iterable of such batches.
        dynamic_length: Whether the time axis of the inputs is dynamic.

    Returns:
        A summary of the file (see `tflite_inspect.summarize`).

    Raises:
        ExportError: the model cannot be exported as asked; the message names
            the layer at fault.
        ValueError: an invalid argument.
    """
    if quantize not in QUANTIZE_MODES:
        raise ValueError(
            f"Argument `quantize` must be one of {QUANTIZE_MODES}; received "
            f"quantize={quantize!r}."
        )
    if (quantize == "int8") != (representative_data is not None):
        raise ValueError(
            "Argument `representative_data` is needed for quantize='int8' and only "
            f"then; received quantize={quantize!r} and representative_data "
            f"{'given' if representative_data is not None else 'None'}."
        )
    # A model that cannot stream is refused by `endpoints.step_fn`, naming
    # the layer, before anything is traced.
    keys = ["step", "initial_state"] if streaming else ["serve"]
    with tempfile.TemporaryDirectory() as folder:
        archive = endpoints.new_archive(model)
        endpoints.add_endpoints(
            archive,
            model,
            sequence=not streaming,
            streaming=streaming,
            dynamic_length=dynamic_length,
        )
        archive.write_out(folder, verbose=False)
        converter = tf.lite.TFLiteConverter.from_saved_model(folder, signature_keys=keys)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        if quantize is not None:
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if quantize == "float16":
            converter.target_spec.supported_types = [tf.float16]
        if quantize == "int8":
            converter.representative_dataset = _calibration_data(
                model, representative_data, streaming
            )
        try:
            content = converter.convert()
        except Exception as error:  # the converter raises several types
            raise ExportError(_conversion_reason(model, error)) from None
    custom = tflite_inspect.custom_ops(content)
    if custom:
        raise ExportError(f"the converted model needs non-builtin ops {custom}")
    path = pathlib.Path(path)
    path.write_bytes(content)
    return tflite_inspect.summarize(content)


def _examples(representative_data):
    """Batches of one example from an array or an iterable of batches."""
    if isinstance(representative_data, np.ndarray):
        representative_data = [representative_data]
    count = 0
    for batch in representative_data:
        for example in np.asarray(batch):
            if count == MAX_CALIBRATION_EXAMPLES:
                return
            count += 1
            yield example[None]


def _calibration_data(model, representative_data, streaming):
    (name,) = endpoints.input_names(model)

    def sequences():
        for example in _examples(representative_data):
            yield ("serve", {name: example})

    def frames():
        # The states met while streaming real data set the state ranges.
        step = tf.function(endpoints.step_fn(model))
        initial_state = tf.function(endpoints.initial_state_fn(model))
        for example in _examples(representative_data):
            yield ("initial_state", {"batch_size": np.array(1, np.int32)})
            states = {k: v.numpy() for k, v in initial_state(tf.constant(1)).items()}
            for t in range(example.shape[1]):
                inputs = {name: example[:, t], **states}
                yield ("step", inputs)
                outputs = step(inputs)
                states = {k: outputs[k].numpy() for k in states}

    return frames if streaming else sequences


def _conversion_reason(model, error):
    """One line: what the converter rejected and the layer it belongs to.

    The converter reports ops by their TensorFlow name scope, which starts
    with the layer name (plus `_<n>` when traced more than once)."""
    text = str(error)
    lines = [line.strip() for line in text.splitlines() if "error:" in line]
    first = lines[0] if lines else (text.strip().splitlines() or [repr(error)])[0]
    first = first.rsplit("): ", 1)[-1]  # drop the location, keep the reason
    for layer in model_graph.layers_in_order(model):
        if re.search(rf"""(^|[/"'\s]){re.escape(layer.name)}(_\d+)?/""", text):
            return (
                f"layer '{layer.name}' ({layer.__class__.__name__}) does not convert "
                f"to TFLite builtins: {first}"
            )
    return f"the model does not convert to TFLite builtins: {first}"
