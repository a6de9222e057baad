"""Running exported `.tflite` files in LiteRT."""

import pathlib

import numpy as np
from ai_edge_litert.interpreter import Interpreter


def _interpreter(path_or_content):
    if isinstance(path_or_content, Interpreter):
        return path_or_content
    if isinstance(path_or_content, (bytes, bytearray)):
        return Interpreter(model_content=bytes(path_or_content))
    return Interpreter(model_path=str(pathlib.Path(path_or_content)))


def run_sequence(path_or_content, inputs):
    """Runs the `serve` signature on whole sequences; returns its outputs
    (a dict, `output` for a single-output model). The model is a `.tflite`
    path, its bytes, or an `Interpreter` to reuse."""
    runner = _interpreter(path_or_content).get_signature_runner("serve")
    (name,) = runner.get_input_details()
    return runner(**{name: np.asarray(inputs)})


def run_streaming(path_or_content, inputs):
    """Feeds `inputs` (batch, time, ...) frame by frame through the `step`
    signature, starting from `initial_state`; returns the step outputs
    stacked on axis 1 (batch, time, ...) and the final states. The model is
    a `.tflite` path, its bytes, or an `Interpreter` to reuse."""
    interpreter = _interpreter(path_or_content)
    step = interpreter.get_signature_runner("step")
    inputs = np.asarray(inputs)
    states = interpreter.get_signature_runner("initial_state")(
        batch_size=np.array(inputs.shape[0], np.int32)
    )
    (frame_name,) = set(step.get_input_details()) - set(states)
    outputs = []
    for t in range(inputs.shape[1]):
        result = step(**{frame_name: inputs[:, t]}, **states)
        outputs.append(result["output"])
        states = {k: result[k] for k in states}
    return np.stack(outputs, 1), states
