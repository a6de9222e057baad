"""Running exported `.tflite` files in LiteRT.

Both runners check what they are given against the file's signature before
LiteRT sees it (LiteRT would reshape a wrong rank, broadcast a state of
another batch size, or fail deep inside its delegate): a mismatch raises
`ValueError` naming the input, the shape or dtype the file expects and what
was received. Both return a dict: `output` (or `output_<k>` for several)
and, for streaming, the final states by name.
"""

import errno
import pathlib

import numpy as np
from ai_edge_litert.interpreter import Interpreter

from keras_relrec.export.runtime import tflite_inspect
from keras_relrec.export.tflite import quantization
from keras_relrec.export.tflite.initial_state_file import read_initial_state
from keras_relrec.utils import validation


def _interpreter(path_or_content):
    if isinstance(path_or_content, Interpreter):
        return path_or_content
    content = isinstance(path_or_content, (bytes, bytearray))
    if not content and not pathlib.Path(path_or_content).is_file():
        raise FileNotFoundError(errno.ENOENT, "no such .tflite file", str(path_or_content))
    try:
        if content:
            return Interpreter(model_content=bytes(path_or_content))
        # By path: LiteRT maps the file, where reading it would hold it all.
        return Interpreter(model_path=str(pathlib.Path(path_or_content)))
    except ValueError as error:  # LiteRT's message names neither the file nor the fix
        what = "Argument `path_or_content` (bytes)" if content else str(path_or_content)
        raise tflite_inspect.unreadable(what, f"LiteRT says {' '.join(str(error).split())!r}") from None


def _shape_text(signature):
    return "(" + ", ".join("?" if d < 0 else str(d) for d in signature) + ")"


def _checked(name, value, detail, time_axis=False):
    """`value` as an array, after checking it against a signature input's
    detail; with `time_axis`, `value` holds a time axis the signature (of
    one frame) lacks."""
    array = np.asarray(value)
    signature = [int(d) for d in detail["shape_signature"]]
    if time_axis:
        signature = signature[:1] + [-1] + signature[1:]
    expected = _shape_text(signature)
    if array.dtype != detail["dtype"]:
        raise ValueError(
            f"Input '{name}' must have dtype {np.dtype(detail['dtype']).name}; received "
            f"{array.dtype.name} (cast it with .astype('{np.dtype(detail['dtype']).name}'))."
        )
    if array.ndim != len(signature) or any(d >= 0 and d != n for d, n in zip(signature, array.shape)):
        raise ValueError(f"Input '{name}' must have shape {expected}; received shape {array.shape}.")
    if 0 in array.shape:
        raise ValueError(
            f"Input '{name}' has shape {array.shape}, with an empty axis; the exported "
            f"model needs at least one example and one step ({expected})."
        )
    return array


def _named(inputs, names, what):
    """{name: value} from a dict, or from one array when there is one name."""
    if isinstance(inputs, dict):
        if set(inputs) != set(names):
            raise ValueError(f"The {what} are named {sorted(names)}; received {sorted(inputs)}.")
        return inputs
    if len(names) != 1:
        raise ValueError(f"The model has {len(names)} inputs {sorted(names)}; pass a dict by name.")
    return {names[0]: inputs}


def run_sequence(path_or_content, inputs):
    """Runs the `serve` signature on whole sequences.

    Args:
        path_or_content: A `.tflite` path, its bytes, or an `Interpreter` to
            reuse.
        inputs: (batch, time, ...) sequences, or {input name: array} for a
            model of several inputs.

    Returns:
        {"output": array} (`output_<k>` for a model of several outputs).
    """
    runner = _interpreter(path_or_content).get_signature_runner("serve")
    details = runner.get_input_details()
    feeds = _named(inputs, list(details), "inputs")
    return runner(**{name: _checked(name, value, details[name]) for name, value in feeds.items()})


def run_streaming(path_or_content, inputs, states=None):
    """Feeds `inputs` frame by frame (or chunk by chunk, for a step that
    takes a chunk of L frames: then the length must be a multiple of L)
    through the `step` signature.

    Args:
        path_or_content: A streaming `.tflite` path, its bytes, or an
            `Interpreter` to reuse.
        inputs: (batch, time, ...) sequences.
        states: The states to start from, {name: array}, e.g. those a
            previous call returned, to go on with a stream; default the
            file's `initial_state`.

    Returns:
        {"output": the step outputs stacked on axis 1 (batch, time, ...),
        and every final state by name}.
    """
    interpreter = _interpreter(path_or_content)
    step = interpreter.get_signature_runner("step")
    details = step.get_input_details()
    state_names = [n for n in details if n in step.get_output_details()]
    (frame_name,) = set(details) - set(state_names)
    signature = details[frame_name]["shape_signature"]
    chunk = None
    if "chunk_length" in interpreter.get_signature_list():
        chunk = int(interpreter.get_signature_runner("chunk_length")()["chunk_length"])
    if chunk is None:
        inputs = _checked(frame_name, inputs, details[frame_name], time_axis=True)
    else:
        inputs = _checked(frame_name, inputs, {**details[frame_name], "shape_signature": [-1, -1, *signature[2:]]})
        if inputs.shape[1] % chunk:
            raise ValueError(
                f"Input '{frame_name}' has {inputs.shape[1]} steps; the file steps by chunks of "
                f"{chunk}, so the length must be a multiple of {chunk} (pad and mask the rest)."
            )
    batch = inputs.shape[0]
    if states is None:
        states = interpreter.get_signature_runner("initial_state")(batch_size=np.array(batch, np.int32))
    states = _named(states, state_names, "states")
    states = {name: _checked(name, value, details[name]) for name, value in states.items()}
    for name, value in states.items():
        if value.shape[0] != batch:
            raise ValueError(
                f"State '{name}' has batch size {value.shape[0]}; input '{frame_name}' has "
                f"{batch}. Start from states of the input's batch size."
            )
    outputs = []
    for t in range(0, inputs.shape[1], chunk or 1):
        frame = inputs[:, t] if chunk is None else inputs[:, t : t + chunk]
        result = step(**{frame_name: frame}, **states)
        outputs.append(result["output"])
        states = {name: result[name] for name in states}
    return {"output": np.stack(outputs, 1) if chunk is None else np.concatenate(outputs, 1), **states}


class Streamer:
    """Feeds a streaming `.tflite` file's `step` one frame (or chunk) at a
    time in LiteRT, keeping the states between calls, as a device does.

    Faster than `run_streaming` per frame: the step's tensors are sized and
    allocated once for `batch_size` streams, and each call only copies the
    frame and the states in and the outputs out (the signature runner
    resizes and re-allocates on every call). For a fully integer file
    (`quantize="int8"` with `integer_io`) the states stay int8 from step to
    step, and with `real_values` (default) the frames are quantized and the
    outputs dequantized with the file's parameters.

    Args:
        path_or_content: A file exported with `streaming=True` (any
            target; one without an `initial_state` signature reads its
            initial states from `micro.initial_state_path(path)`).
        batch_size: The number of streams fed together (a file of a fixed
            batch takes only its own).
        real_values: For an integer file, whether frames and outputs are
            real values (else the file's integers).

    Example:

    ```python
    streamer = Streamer("step.tflite")
    for frame in frames:            # (1, features) each
        probabilities = streamer(frame)
    streamer.reset()                # a new stream
    ```
    """

    def __init__(self, path_or_content, batch_size=1, real_values=True):
        batch_size = validation.check_positive_int("batch_size", batch_size)
        self._interpreter = _interpreter(path_or_content)
        runner = self._interpreter.get_signature_runner("step")
        inputs, outputs = runner.get_input_details(), runner.get_output_details()
        self.state_names = [name for name in inputs if name in outputs]
        (self.frame_name,) = [name for name in inputs if name not in self.state_names]
        self.batch_size = batch_size
        # The runner's own wrapper and indices: LiteRT's public per-tensor
        # API reaches subgraph 0 only, and `step` need not be it.
        self._wrapper, self._subgraph = runner._interpreter_wrapper, runner._subgraph_index
        for detail in inputs.values():
            fixed = int(detail["shape_signature"][0])
            if fixed > 0 and fixed != batch_size:
                raise ValueError(f"The file's batch is fixed at {fixed}; received batch_size={batch_size}.")
            shape = np.array([batch_size, *detail["shape"][1:]], np.int32)
            self._wrapper.ResizeInputTensor(detail["index"], shape, False, self._subgraph)
        self._wrapper.AllocateTensors(self._subgraph)
        self._inputs = runner.get_input_details()
        self._outputs = {name: detail["index"] for name, detail in runner.get_output_details().items()}
        self._params = {side: {name: quantization.parameters(detail) for name, detail in details.items()}
                        for side, details in (("inputs", self._inputs), ("outputs", outputs))}
        self._real_values = real_values
        self._initial, self.chunk_length = self._initial_state(path_or_content)
        self.reset()

    def _initial_state(self, path_or_content):
        """(the initial states at `batch_size`, the chunk length or None)."""
        signatures = self._interpreter.get_signature_list()
        if "initial_state" in signatures:
            states = self._interpreter.get_signature_runner("initial_state")(
                batch_size=np.array(self.batch_size, np.int32))
            chunk = None
            if "chunk_length" in signatures:
                chunk = int(self._interpreter.get_signature_runner("chunk_length")()["chunk_length"])
            return states, chunk
        if isinstance(path_or_content, (str, pathlib.Path)):
            # A fixed-batch file: its batch_size was checked against the file's.
            return read_initial_state(path_or_content, names=self.state_names)
        raise ValueError("A file without an `initial_state` signature is read by path (its states lie beside it).")

    def reset(self, states=None):
        """Starts a new stream, from `states` (default the initial states)."""
        self.states = {name: np.array(value) for name, value in (states or self._initial).items()}

    def __call__(self, frame):
        """One frame (batch, ...) (or one chunk (batch, L, ...)) in, the
        step's output out; the states move on."""
        frame = np.asarray(frame)
        detail = self._inputs[self.frame_name]
        frame_params = self._params["inputs"][self.frame_name]
        if frame_params and self._real_values:
            frame = quantization.quantize(frame, frame_params, detail["dtype"])
        frame = _checked(self.frame_name, frame, {**detail, "shape_signature": detail["shape"]})
        self._wrapper.SetTensor(detail["index"], frame, self._subgraph)
        for name in self.state_names:
            self._wrapper.SetTensor(self._inputs[name]["index"], self.states[name], self._subgraph)
        self._wrapper.Invoke(self._subgraph)
        for name in self.state_names:
            value = self._wrapper.GetTensor(self._outputs[name], self._subgraph)
            self.states[name] = quantization.carried(value, self._params["outputs"][name],
                                                     self._params["inputs"][name], self._inputs[name]["dtype"])
        output = self._wrapper.GetTensor(self._outputs["output"], self._subgraph)
        output_params = self._params["outputs"]["output"]
        return quantization.dequantize(output, output_params) if output_params and self._real_values else output

    def run(self, inputs):
        """(batch, time, ...) through the step from the current states:
        the outputs stacked on the time axis."""
        step = self.chunk_length or 1
        outputs = [self(inputs[:, t] if self.chunk_length is None else inputs[:, t : t + step])
                   for t in range(0, inputs.shape[1], step)]
        return np.stack(outputs, 1) if self.chunk_length is None else np.concatenate(outputs, 1)
