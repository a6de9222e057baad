"""TFLite export: builtins only, dynamic batch and length, streaming and
quantized variants."""

import pathlib
import tempfile

import numpy as np
import tensorflow as tf

from keras_relrec.export import endpoints
from keras_relrec.export import micro as micro_runtime
from keras_relrec.export import quantization
from keras_relrec.export import static_reshapes
from keras_relrec.export import tensor_names
from keras_relrec.export import tensorflow_internals
from keras_relrec.export import tflite_inspect
from keras_relrec.export.export_error import ExportError
from keras_relrec.export.export_plan import plan_export
from keras_relrec.export.targets import TARGETS

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
    target="litert",
    batch_size=None,
    length=None,
    integer_io=None,
    runtime=None,
):
    """Writes `model` as a `.tflite` file that uses builtin ops only.

    Sequence mode (default): one signature, `serve`, taking whole sequences
    with dynamic batch and (with `dynamic_length`) dynamic length. Streaming
    mode: signatures `step` (one time step and the states in, `output` and
    the new states out, by name) and `initial_state` (`batch_size` in).
    See `keras_relrec.export.endpoints` for the names.

    `target="micro"` writes a file for TensorFlow Lite for Microcontrollers:
    a fixed batch (`batch_size`, default 1) and, in sequence mode, a fixed
    length (`length`, or the model's own); in streaming mode `step` is the
    only signature, and the initial states go to `<name>.initial_state.npz`
    beside the file (`micro.initial_state_path`; as for "accelerator"). The file is run once in
    the installed tflite-micro interpreter (extra `[micro]`): an op it
    lacks fails the export, naming the op and the layer; the summary gains
    `micro` with the smallest tensor arena it runs in (`arena_bytes`).
    `target="accelerator"` writes a file a GPU or NPU delegate takes whole:
    a fixed batch and length, the recurrent loops unrolled (no WHILE), and
    with `quantize="int8"` integers throughout; a part that stays dynamic
    or keeps a loop fails the export, naming the layer; the summary gains
    `accelerator` (see `accelerator.compatibility`).

    Every file's signature tensors are named `<signature>/<name>` (for
    runtimes without signatures); the summary says which runtime version
    the file needs (`min_runtime`). Every RESHAPE whose target shape the
    converter left to be computed at run time, where one size alone is
    unknown, is given a constant shape with -1 for that size (see
    `static_reshapes`: such tensors met a LiteRT/XNNPACK defect inside
    loops); the summary's `reshapes_made_static` counts them.

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
        dynamic_length: Whether the time axis of the inputs is dynamic
            (target "litert" only).
        target: "litert" (default), "micro" or "accelerator".
        batch_size: A fixed batch size for every signature (default:
            dynamic for "litert", 1 for the other targets).
        length: The fixed length of `serve`'s sequences (with
            `dynamic_length=False` or targets "micro" and "accelerator");
            default the model's.
        integer_io: With `quantize="int8"`, whether inputs, outputs and
            states are int8 too and every op integer (fully integer; the
            scale and zero point of each are in the summary's
            `quantization`); default True for targets "micro" and
            "accelerator", False for "litert".
        runtime: The oldest TensorFlow Lite runtime the file must run in,
            e.g. "2.14": op versions newer than it are avoided where the
            converter can (per-tensor instead of per-channel weights in
            dense layers), and the export fails, naming the ops, where it
            cannot.

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
    if target not in TARGETS:
        raise ValueError(f"Argument `target` must be one of {tuple(TARGETS)}; received target={target!r}.")
    target = TARGETS[target]
    fixed = target.fixed
    if integer_io is None:
        integer_io = quantize == "int8" and fixed
    if integer_io and quantize != "int8":
        raise ValueError(f"Argument `integer_io` needs quantize='int8'; received quantize={quantize!r}.")
    if runtime is not None and not _is_version(runtime):
        raise ValueError(f"Argument `runtime` must be a version such as '2.14'; received runtime={runtime!r}.")
    if fixed and batch_size is None:
        batch_size = 1
    for name, value in (("batch_size", batch_size), ("length", length)):
        if value is not None and (not isinstance(value, (int, np.integer)) or value < 1):
            raise ValueError(f"Argument `{name}` must be a positive integer or None; received {name}={value!r}.")
    plan = plan_export(model)
    if streaming:
        plan.require_streaming()  # names the layer before anything is traced
    elif fixed:
        dynamic_length = False
        _require_fixed_length(plan, length, target.name)
    calibration = None
    if quantize == "int8":
        calibration = _calibration_data(plan, representative_data, streaming, batch_size, fixed)
    with tempfile.TemporaryDirectory() as folder:
        archive = endpoints.new_archive(model)
        keys = endpoints.add_endpoints(
            archive,
            plan,
            sequence=not streaming,
            streaming=streaming,
            dynamic_length=dynamic_length,
            batch_size=batch_size,
            length=length,
            step_only=fixed,
            unroll=target.unroll,
        )
        archive.write_out(folder, verbose=False)
        converter = tf.lite.TFLiteConverter.from_saved_model(folder, signature_keys=keys)
        converter.target_spec.supported_ops = [
            tf.lite.OpsSet.TFLITE_BUILTINS_INT8 if integer_io else tf.lite.OpsSet.TFLITE_BUILTINS
        ]
        if quantize is not None:
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if quantize == "float16":
            converter.target_spec.supported_types = [tf.float16]
        if calibration is not None:
            converter.representative_dataset = calibration
        if integer_io:
            converter.inference_input_type = converter.inference_output_type = tf.int8
        if runtime is not None:
            # Per-channel weights need FULLY_CONNECTED version 12 (2.17).
            tensorflow_internals.quantize_dense_weights_per_tensor(converter)
        try:
            content = converter.convert()
        except Exception as error:  # the converter raises several types
            raise ExportError(_conversion_reason(plan, error)) from None
    custom = tflite_inspect.custom_ops(content)
    if custom:
        raise ExportError(f"the converted model needs non-builtin ops {custom}")
    if runtime is not None and not tflite_inspect.runs_on(content, runtime):
        raise ExportError(
            f"the file needs TensorFlow Lite {tflite_inspect.min_runtime(content)}, newer than runtime={runtime!r}, "
            f"for one of its op versions ({tflite_inspect.later_op_versions(content)}); try another `quantize`"
        )
    # Before naming: the names of the shape constants it adds are the
    # RESHAPEs' own.
    content, made_static = static_reshapes.make_static(content)
    content = tensor_names.named(content)
    summary = tflite_inspect.summarize(content)
    summary["reshapes_made_static"] = made_static
    summary.update(target.check(content, plan, integer_io))
    path = pathlib.Path(path)
    path.write_bytes(content)
    if fixed and streaming:
        # The file has no `initial_state`: the states go beside it, as the
        # integers of an integer file.
        states = endpoints.initial_state_fn(plan)(tf.constant(batch_size))
        states = {name: value.numpy() for name, value in states.items()}
        params = summary["quantization"].get("step", {}).get("inputs", {})
        states = {name: quantization.quantize(value, (params[name]["scale"], params[name]["zero_point"]))
                  if name in params else value for name, value in states.items()}
        extra = {} if plan.chunk_length is None else {micro_runtime.CHUNK_LENGTH_KEY: plan.chunk_length}
        sidecar = micro_runtime.initial_state_path(path)
        np.savez(sidecar, **states, **extra)
        summary["initial_state"] = str(sidecar)
    return summary


def _is_version(text):
    return isinstance(text, str) and all(part.isdigit() for part in text.split(".")) and text.count(".") <= 2


def _require_fixed_length(plan, length, target):
    """A microcontroller or a delegate runs sequences of one length: `length`
    or the model's."""
    if length is not None:
        return
    unknown = [name for name, tensor in plan.inputs.items() if len(tensor.shape) >= 2 and tensor.shape[1] is None]
    if unknown:
        raise ValueError(
            f"target={target!r} in sequence mode needs a fixed length: input '{unknown[0]}' has none; pass "
            "length=... (or export streaming=True, which takes any length frame by frame)."
        )


def _calibration_examples(plan, representative_data, batch_size=None):
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


def _calibration_data(plan, representative_data, streaming, batch_size=None, step_only=False):
    """The converter's representative dataset: examples one at a time (or
    `batch_size` at a time), as whole sequences or (streaming) frame by
    frame; with `step_only`, the file has no `initial_state` to calibrate."""
    examples = _calibration_examples(plan, representative_data, batch_size)

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


def _conversion_reason(plan, error):
    """One line: what the converter rejected and the layer it belongs to.

    The converter reports ops by their TensorFlow name scope, which starts
    with the layer name (plus `_<n>` when traced more than once)."""
    text = str(error)
    lines = [line.strip() for line in text.splitlines() if "error:" in line]
    first = lines[0] if lines else (text.strip().splitlines() or [repr(error)])[0]
    first = first.rsplit("): ", 1)[-1]  # drop the location, keep the reason
    layer = plan.layer_in_scope(text)
    if layer is not None:
        return f"layer '{layer.name}' ({layer.__class__.__name__}) does not convert to TFLite builtins: {first}"
    return f"the model does not convert to TFLite builtins: {first}"
