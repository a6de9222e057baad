"""Running exported `.tflite` files in LiteRT.

Both runners check what they are given against the file's signature before
LiteRT sees it (LiteRT would reshape a wrong rank, broadcast a state of
another batch size, or fail deep inside its delegate): a mismatch raises
`ValueError` naming the input, the shape or dtype the file expects and what
was received. Both return a dict: `output` (or `output_<k>` for several)
and, for streaming, the final states by name.
"""

import pathlib

import numpy as np
from ai_edge_litert.interpreter import Interpreter


def _interpreter(path_or_content):
    if isinstance(path_or_content, Interpreter):
        return path_or_content
    if isinstance(path_or_content, (bytes, bytearray)):
        return Interpreter(model_content=bytes(path_or_content))
    return Interpreter(model_path=str(pathlib.Path(path_or_content)))


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
