"""TFLite export: builtins only, dynamic batch and length, streaming and
quantized variants.

`export_tflite` reads: validate the arguments → plan the model
(`graph.export_plan`) → trace its endpoints (`graph.endpoints`) → convert
(calibrated by `calibration` for int8) → the passes over the file
(`static_reshapes`, `subgraph_order`, `tensor_names`) → `target.check`
(`targets`) → write.
"""

import contextlib
import gc
import pathlib
import tempfile

import numpy as np
import tensorflow as tf

from keras_relrec.export import tensorflow_internals
from keras_relrec.export.export_error import ExportError
from keras_relrec.export.graph import endpoints
from keras_relrec.export.graph import recurrent_loop
from keras_relrec.export.graph.export_plan import plan_export
from keras_relrec.export.runtime import tflite_inspect
from keras_relrec.export.tflite import calibration
from keras_relrec.export.tflite import initial_state_file
from keras_relrec.export.tflite import quantization
from keras_relrec.export.tflite import static_reshapes
from keras_relrec.export.tflite import subgraph_order
from keras_relrec.export.tflite import tensor_names
from keras_relrec.export.tflite.targets import TARGETS
from keras_relrec.utils import atomic_files
from keras_relrec.utils import validation

QUANTIZE_MODES = (None, "float16", "dynamic_int8", "int8", "int16x8")
# The modes whose activation ranges are calibrated on representative data,
# and the integer type of their activations.
CALIBRATED = {"int8": tf.int8, "int16x8": tf.int16}


@contextlib.contextmanager
def _collecting_new_objects_only():
    """The converter runs a full `gc.collect()`, which walks every object of
    the process (a third of a second once TensorFlow is imported, more in a
    large program): what existed before is frozen for the conversion, so
    the collection walks only the conversion's own objects. Not where the
    program froze objects itself (`unfreeze` would thaw them too)."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def export_tflite(
    model,
    path,
    *,
    streaming=False,
    quantize=None,
    representative_data=None,
    dynamic_length=None,
    target="litert",
    batch_size=None,
    length=None,
    integer_io=None,
    runtime=None,
):
    """Writes `model` as a `.tflite` file that uses builtin ops only.

    Sequence mode (default): one signature, `serve`, taking whole sequences
    with dynamic batch and (unless `length` is given or `dynamic_length` is
    False) dynamic length. Streaming mode: signatures `step` (one time step
    and the states in, `output` and the new states out, by name) and
    `initial_state` (`batch_size` in).
    See `keras_relrec.export.graph.endpoints` for the names.

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
    The subgraph of `step` (else `serve`) is the file's first
    (`subgraph_order`): LiteRT delegated no subgraph of a streaming file
    that started with `chunk_length`, the converter's order.

    Args:
        model: A functional or sequential Keras model.
        path: The `.tflite` file to write.
        streaming: Whether to export the streaming signatures.
        quantize: `None` (float32), `"float16"` (float16 weights),
            `"dynamic_int8"` (int8 weights, float activations), `"int8"`
            (int8 weights and activations where the ops allow, calibrated on
            `representative_data`; other ops stay float) or `"int16x8"`
            (TFLite's 16x8 mode: int8 weights, int16 activations and
            states, calibrated likewise; 256 times finer activations than
            int8, for recurrent states that must not drift).
        representative_data: For `"int8"` and `"int16x8"`: input
            sequences (examples, time, ...) as an array, or an iterable of
            such batches; for a
            model of several inputs, a dict {input name: array} or a list of
            arrays in the order of the model's inputs.
        dynamic_length: Whether the time axis of `serve`'s inputs is
            dynamic (target "litert" only); default: dynamic unless
            `length` is given. False needs a length: `length` or the
            model's.
        target: "litert" (default), "micro" or "accelerator".
        batch_size: A fixed batch size for every signature (default:
            dynamic for "litert", 1 for the other targets).
        length: The fixed length of `serve`'s sequences (sequence mode
            only; it makes the length fixed for target "litert" too);
            default the model's where the length is fixed.
        integer_io: With `quantize="int8"` (`"int16x8"`), whether inputs,
            outputs and states are int8 (int16) too and the ops integer
            where the quantizer allows (fully integer; the scale and zero
            point of each input, output and state are in the summary's
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
    if (quantize in CALIBRATED) != (representative_data is not None):
        raise ValueError(
            "Argument `representative_data` is needed for quantize='int8' or 'int16x8' and only "
            f"then; received quantize={quantize!r} and representative_data "
            f"{'given' if representative_data is not None else 'None'}."
        )
    if target not in TARGETS:
        raise ValueError(f"Argument `target` must be one of {tuple(TARGETS)}; received target={target!r}.")
    target = TARGETS[target]
    fixed = target.fixed
    streaming = validation.check_bool("streaming", streaming)
    dynamic_length, integer_io = (None if value is None else validation.check_bool(name, value)
                                  for name, value in (("dynamic_length", dynamic_length), ("integer_io", integer_io)))
    if integer_io is None:
        integer_io = quantize in CALIBRATED and fixed
    if integer_io and quantize not in CALIBRATED:
        raise ValueError(f"Argument `integer_io` needs quantize='int8' or 'int16x8'; received quantize={quantize!r}.")
    if runtime is not None and not _is_version(runtime):
        raise ValueError(f"Argument `runtime` must be a version such as '2.14'; received runtime={runtime!r}.")
    if fixed and batch_size is None:
        batch_size = 1
    for name, value in (("batch_size", batch_size), ("length", length)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1):
            raise ValueError(f"Argument `{name}` must be a positive integer or None; received {name}={value!r}.")
    if streaming and length is not None:
        raise ValueError(
            f"Argument `length` fixes the length of `serve`, which streaming=True does not export (`step` takes "
            f"one frame at a time); received length={length!r}. Leave `length` out, or export streaming=False."
        )
    # Streaming exports no `serve`, whose length this is about.
    if dynamic_length and not streaming and (fixed or length is not None):
        given = f"target={target.name!r}, whose files have a fixed length" if fixed else f"length={length!r}"
        raise ValueError(
            f"Argument `dynamic_length` cannot be True with {given}; received dynamic_length=True. Leave "
            "`dynamic_length` out (a given length makes the length fixed), or leave `length` out."
        )
    if dynamic_length is None:
        dynamic_length = not fixed and length is None
    plan = plan_export(model)
    if streaming:
        plan.require_streaming()  # names the layer before anything is traced
    elif not dynamic_length:
        _require_fixed_length(plan, length, f"target={target.name!r}" if fixed else "dynamic_length=False")
    dataset = None
    if quantize in CALIBRATED:
        dataset = calibration.representative_dataset(model, plan, representative_data, streaming, batch_size, fixed,
                                                     fixed_length=not dynamic_length, length=length)
    # 16x8 quantizes no comparison: masks as numbers.
    masks = recurrent_loop.arithmetic_masks() if quantize == "int16x8" else contextlib.nullcontext()
    with tempfile.TemporaryDirectory() as folder, target.tracing(), masks:
        archive = endpoints.new_archive(model)
        keys = endpoints.add_endpoints(
            archive,
            model,
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
        integer_ops = (tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8
                       if quantize == "int16x8" else tf.lite.OpsSet.TFLITE_BUILTINS_INT8)
        converter.target_spec.supported_ops = (
            [integer_ops] if integer_io
            # 16x8 where the ops allow, float elsewhere.
            else [integer_ops, tf.lite.OpsSet.TFLITE_BUILTINS] if quantize == "int16x8"
            else [tf.lite.OpsSet.TFLITE_BUILTINS]
        )
        if quantize is not None:
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if quantize == "float16":
            converter.target_spec.supported_types = [tf.float16]
        if dataset is not None:
            converter.representative_dataset = dataset
        if integer_io:
            converter.inference_input_type = converter.inference_output_type = CALIBRATED[quantize]
        if runtime is not None:
            # Per-channel weights need FULLY_CONNECTED version 12 (2.17).
            tensorflow_internals.quantize_dense_weights_per_tensor(converter)
        try:
            with _collecting_new_objects_only():
                content = converter.convert()
        except Exception as error:  # the converter raises several types
            reason = _conversion_reason(plan, error)
            if quantize == "int16x8" and "recorded during calibration" in str(error):
                reason += ("; the 16x8 calibrator records no ranges inside a recurrent loop (WHILE): export "
                           "streaming=True, whose step has no loop")
            raise ExportError(reason) from None
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
    # LiteRT delegates no subgraph of a file that starts with `chunk_length`.
    content = subgraph_order.step_first(content)
    content = tensor_names.named(content)
    summary = tflite_inspect.summarize(content)
    summary["reshapes_made_static"] = made_static
    summary.update(target.check(content, plan, integer_io))
    path = pathlib.Path(path)
    if not (fixed and streaming):
        atomic_files.write_bytes(path, content)
    else:
        # The file has no `initial_state`: the states go beside it, as the
        # integers of an integer file.
        states = endpoints.initial_state_fn(plan)(tf.constant(batch_size))
        states = {name: value.numpy() for name, value in states.items()}
        params = summary["quantization"].get("step", {}).get("inputs", {})
        step_inputs = summary["signatures"]["step"]["inputs"]
        states = {name: quantization.quantize(value, (params[name]["scale"], params[name]["zero_point"]),
                                              np.dtype(step_inputs[name][1]))
                  if name in params else value for name, value in states.items()}
        sidecar = initial_state_file.write_initial_state(path, content, states, plan.chunk_length)
        summary["initial_state"] = str(sidecar)
    return summary


def _is_version(text):
    return isinstance(text, str) and all(part.isdigit() for part in text.split(".")) and text.count(".") <= 2


def _require_fixed_length(plan, length, why):
    """A file of a fixed length (a microcontroller's, a delegate's, or with
    `dynamic_length=False`) takes sequences of one length: `length` or the
    model's. `why` says which, for the message."""
    if length is not None:
        return
    unknown = [name for name, tensor in plan.inputs.items() if len(tensor.shape) >= 2 and tensor.shape[1] is None]
    if unknown:
        shape = tuple(plan.inputs[unknown[0]].shape)
        raise ValueError(
            f"Argument `length` is needed with {why} in sequence mode: input '{unknown[0]}' has no fixed length "
            f"(shape {shape}); received length=None. Pass length=..., or export streaming=True, which takes any "
            "length frame by frame."
        )


def _conversion_reason(plan, error):
    """One line: what the converter rejected and the layer it belongs to.

    The converter reports ops by their TensorFlow name scope, which starts
    with the layer name (plus `_<n>` when traced more than once)."""
    text = str(error)
    lines = [line.strip() for line in text.splitlines() if "error:" in line]
    first = lines[0] if lines else (text.strip().splitlines() or [repr(error)])[0]
    first = first.rsplit("): ", 1)[-1]  # drop the location, keep the reason
    return f"{plan.culprit(text)} does not convert to TFLite builtins: {first}"
