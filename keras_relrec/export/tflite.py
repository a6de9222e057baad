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
from keras_relrec.export.export_plan import plan_export

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
        representative_data: For `"int8"`: input sequences (examples,
            time, ...) as an array, or an iterable of such batches; for a
            model of several inputs, a dict {input name: array} or a list of
            arrays in the order of the model's inputs.
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
    plan = plan_export(model)
    if streaming:
        plan.require_streaming()  # names the layer before anything is traced
    calibration = None
    if quantize == "int8":
        calibration = _calibration_data(plan, representative_data, streaming)
    with tempfile.TemporaryDirectory() as folder:
        archive = endpoints.new_archive(model)
        keys = endpoints.add_endpoints(
            archive,
            plan,
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
        if calibration is not None:
            converter.representative_dataset = calibration
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


def _calibration_examples(plan, representative_data):
    """Up to `MAX_CALIBRATION_EXAMPLES` examples, each {input name: array
    with a batch of one}."""
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
        counts = {len(array) for array in arrays.values()}
        if len(counts) != 1:
            raise ValueError(
                "Argument `representative_data` must hold as many examples for every "
                f"input; received {[len(a) for a in arrays.values()]}."
            )
        for k in range(counts.pop()):
            examples.append({name: array[k : k + 1] for name, array in arrays.items()})
            if len(examples) == MAX_CALIBRATION_EXAMPLES:
                return examples
    if not examples:
        raise ValueError("Argument `representative_data` holds no example.")
    return examples


def _calibration_data(plan, representative_data, streaming):
    """The converter's representative dataset: examples one at a time, as
    whole sequences or (streaming) frame by frame."""
    examples = _calibration_examples(plan, representative_data)

    def sequences():
        for example in examples:
            yield ("serve", example)

    def frames():
        # The states met while streaming real data set the state ranges.
        step = tf.function(endpoints.step_fn(plan))
        initial_state = tf.function(endpoints.initial_state_fn(plan))
        chunk = plan.chunk_length
        for example in examples:
            ((name, sequence),) = example.items()
            yield ("initial_state", {"batch_size": np.array(1, np.int32)})
            states = {key: v.numpy() for key, v in initial_state(tf.constant(1)).items()}
            for t in range(0, sequence.shape[1] - (chunk or 1) + 1, chunk or 1):
                inputs = {name: sequence[:, t] if chunk is None else sequence[:, t : t + chunk], **states}
                yield ("step", inputs)
                outputs = step(inputs)
                states = {key: outputs[key].numpy() for key in states}

    return frames if streaming else sequences


def _conversion_reason(model, error):
    """One line: what the converter rejected and the layer it belongs to.

    The converter reports ops by their TensorFlow name scope, which starts
    with the layer name (plus `_<n>` when traced more than once)."""
    text = str(error)
    lines = [line.strip() for line in text.splitlines() if "error:" in line]
    first = lines[0] if lines else (text.strip().splitlines() or [repr(error)])[0]
    first = first.rsplit("): ", 1)[-1]  # drop the location, keep the reason
    for layer in (item.operation for item in model_graph.walk(model)):
        if re.search(rf"""(^|[/"'\s]){re.escape(layer.name)}(_\d+)?/""", text):
            return (
                f"layer '{layer.name}' ({layer.__class__.__name__}) does not convert "
                f"to TFLite builtins: {first}"
            )
    return f"the model does not convert to TFLite builtins: {first}"
