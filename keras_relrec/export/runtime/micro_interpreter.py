"""Running micro files (written with `export_tflite(..., target="micro")`)
in the tflite-micro interpreter (extra `[micro]`), the same C++ runtime that
runs on the chip: `MicroInterpreter` calls one signature, `MicroStreamer`
feeds a stream through `step`, `run_sequence` runs `serve` once.

TFLM addresses tensors by position, not by name: `io_order` gives the
positions of a signature's inputs and outputs.
"""

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from keras_relrec.export.export_error import ExportError
from keras_relrec.export.runtime import micro_probe
from keras_relrec.export.runtime import tflite_inspect
from keras_relrec.export.tflite import micro_check
from keras_relrec.export.tflite import quantization
from keras_relrec.export.tflite.initial_state_file import read_initial_state


def _interpreter(content, arena_size):
    """(interpreter, None) or (None, what TFLM said), in this process."""
    try:
        return micro_probe.interpreter(content, arena_size)
    except ImportError as error:
        raise ExportError(str(error)) from None


def io_order(content, signature="step"):
    """{"inputs": [names], "outputs": [names]}: the signature's tensors in
    the positions a runtime without signatures (TFLM's `set_input(data, k)`,
    `GetInput(k)` in C++) addresses them by."""
    model = schema.Model.GetRootAsModel(bytes(content), 0)
    for k in range(model.SignatureDefsLength()):
        definition = model.SignatureDefs(k)
        if definition.SignatureKey().decode() != signature:
            continue
        subgraph = model.Subgraphs(definition.SubgraphIndex())
        order = {}
        for side, count, item, positions, at in (
            ("inputs", definition.InputsLength(), definition.Inputs, subgraph.InputsLength(), subgraph.Inputs),
            ("outputs", definition.OutputsLength(), definition.Outputs, subgraph.OutputsLength(), subgraph.Outputs),
        ):
            # Names by tensor; one tensor may be two outputs (a step's output
            # that is also its first state), at two positions.
            by_tensor = {}
            for j in range(count):
                by_tensor.setdefault(item(j).TensorIndex(), []).append(item(j).Name().decode())
            order[side] = [by_tensor[at(j)].pop(0) for j in range(positions)]
        return order
    raise ValueError(f"The file has no signature '{signature}'.")


class MicroInterpreter:
    """A micro file loaded once in the tflite-micro interpreter, one of its
    signatures called by name: its tensors are allocated once and reused by
    every call (TFLM addresses them by position; `io_order` maps names).

    Args:
        path_or_content: The `.tflite` file (written with `target="micro"`)
            or its bytes.
        signature: "serve" or "step".
        arena_size: The tensor arena in bytes; default 4 × the smallest one
            (`micro_check.check`), at least 64 KiB.

    Raises:
        ValueError: not a TFLite flatbuffer (see `tflite_inspect.read_flatbuffer`),
            or no such signature.
        ExportError: the tflite-micro interpreter cannot run the file.
    """

    def __init__(self, path_or_content, signature, arena_size=None):
        content = tflite_inspect.read_flatbuffer(path_or_content)
        self.order = io_order(content, signature)
        if arena_size is None:
            arena_size = max(micro_probe.FIRST_ARENA, 4 * micro_check.check(content)["arena_bytes"])
        self._interpreter, message = _interpreter(content, arena_size)
        if self._interpreter is None:
            raise ExportError(f"the tflite-micro interpreter cannot run the file: {message}")
        self.input_details = {
            name: self._interpreter.get_input_details(k) for k, name in enumerate(self.order["inputs"])
        }
        self.output_details = {
            name: self._interpreter.get_output_details(k) for k, name in enumerate(self.order["outputs"])
        }

    def __call__(self, **inputs):
        """{output name: array} for {input name: array} of the file's shapes."""
        if set(inputs) != set(self.order["inputs"]):
            raise ValueError(f"The inputs are named {sorted(self.order['inputs'])}; received {sorted(inputs)}.")
        for position, name in enumerate(self.order["inputs"]):
            detail = self.input_details[name]
            value = np.asarray(inputs[name])
            if value.shape != tuple(detail["shape"]):
                raise ValueError(
                    f"Input '{name}' must have shape {tuple(int(d) for d in detail['shape'])}; received "
                    f"shape {value.shape}."
                )
            if np.issubdtype(detail["dtype"], np.integer) != np.issubdtype(value.dtype, np.integer):
                raise ValueError(
                    f"Input '{name}' must have dtype {np.dtype(detail['dtype']).name}; received "
                    f"{value.dtype.name} (an integer file's inputs are quantized: see `quantization`)."
                )
            self._interpreter.set_input(value.astype(detail["dtype"], copy=False), position)
        self._interpreter.invoke()
        return {name: self._interpreter.get_output(k) for k, name in enumerate(self.order["outputs"])}


class MicroStreamer:
    """Feeds frames (or chunks) through a micro file's `step` in the
    tflite-micro interpreter, allocating once.

    For a fully integer file the states stay int8 from step to step (they
    are requantized only where a state's output and input parameters
    differ), and with `real_values` the frames are quantized and the
    outputs dequantized with the file's parameters.

    Args:
        path: The `.tflite` file written with `target="micro"` and
            `streaming=True`; its initial states are read from
            `initial_state_path(path)`.
        arena_size: As `MicroInterpreter`'s.
        real_values: For an integer file, whether frames and outputs are
            real values (else the file's integers).
    """

    def __init__(self, path, arena_size=None, real_values=True):
        # Read once: the states are checked against the bytes that run.
        content = tflite_inspect.read_flatbuffer(path)
        self.step = MicroInterpreter(content, "step", arena_size)
        order = self.step.order
        self.state_names = [name for name in order["inputs"] if name in order["outputs"]]
        (self.frame_name,) = [name for name in order["inputs"] if name not in self.state_names]
        self.initial_state, self.chunk_length = read_initial_state(path, content, names=self.state_names)
        self.real_values = real_values
        self.params = {side: {name: quantization.parameters(detail) for name, detail in details.items()}
                       for side, details in (("in", self.step.input_details), ("out", self.step.output_details))}

    def run(self, inputs, states=None):
        """`inputs` (batch, time, ...) through the step from `states` (default
        the initial states): {"output": (batch, time, ...), final states}."""
        state_names, frame_name = self.state_names, self.frame_name
        states = dict(self.initial_state if states is None else states)
        inputs = np.asarray(inputs)
        step = self.chunk_length or 1
        if inputs.ndim < 2 or inputs.shape[1] % step:
            raise ValueError(
                f"Input '{frame_name}' must have a time axis (axis 1) of a multiple of {step} steps; "
                f"received shape {inputs.shape}."
            )
        frame_shape = tuple(int(d) for d in self.step.input_details[frame_name]["shape"])
        per_step = frame_shape[1:] if self.chunk_length is None else frame_shape[2:]
        if inputs.shape[0] != frame_shape[0] or inputs.shape[2:] != per_step:
            expected = ", ".join(str(d) for d in (frame_shape[0], "time", *per_step))
            fix = (f"; feed {frame_shape[0]} stream(s) at a time, or export with batch_size={inputs.shape[0]}"
                   if inputs.shape[0] != frame_shape[0] else "")
            raise ValueError(
                f"Input '{frame_name}' must have shape ({expected}): the file's step takes a batch of "
                f"{frame_shape[0]} and frames of shape {per_step}; received shape {inputs.shape}{fix}."
            )
        params = self.params
        if params["in"][frame_name] and self.real_values:
            dtype = self.step.input_details[frame_name]["dtype"]
            inputs = quantization.quantize(inputs, params["in"][frame_name], dtype)
        outputs = []
        for t in range(0, inputs.shape[1], step):
            frame = inputs[:, t] if self.chunk_length is None else inputs[:, t : t + step]
            result = self.step(**{frame_name: frame}, **states)
            outputs.append(result["output"])
            states = {
                name: quantization.carried(result[name], params["out"][name], params["in"][name],
                                           self.step.input_details[name]["dtype"])
                for name in state_names
            }
        output = np.stack(outputs, 1) if self.chunk_length is None else np.concatenate(outputs, 1)
        if params["out"]["output"] and self.real_values:
            output = quantization.dequantize(output, params["out"]["output"])
        return {"output": output, **states}


def run_sequence(path_or_content, inputs, arena_size=None):
    """Runs a micro file's `serve` once on whole sequences of its fixed batch
    and length in the tflite-micro interpreter: {"output": array} (to call
    it many times, keep a `MicroInterpreter(path, "serve")`)."""
    runner = MicroInterpreter(path_or_content, "serve", arena_size)
    feeds = inputs if isinstance(inputs, dict) else {runner.order["inputs"][0]: inputs}
    return runner(**feeds)
