"""Every shipped `.tflite` file judged as a device runs it: no RESHAPE sized
at run time where a constant shape would do, and fresh interpreters with
LiteRT's default delegates (XNNPACK on), batch 1, answer as the file does
without them (where the defect those RESHAPEs met never struck). Each
model's own test compares its file with its `.keras` model."""

import pathlib

import numpy as np
import pytest
from ai_edge_litert.interpreter import Interpreter
from ai_edge_litert.interpreter import OpResolverType

from keras_relrec.export import run_sequence
from keras_relrec.export import run_streaming
from keras_relrec.export.tflite import static_reshapes

FOLDER = pathlib.Path(__file__).parents[2] / "savedmodels"
FILES = sorted(FOLDER.glob("*/*.tflite"))
FRESH_RUNS = 60
# The length where a file leaves it free (the DRRT classifier's regions
# take the 100 steps it was trained on).
LENGTH = 100


def random_input(shape, dtype, rng):
    """Small non-negative integers for integer inputs (token ids)."""
    return (rng.integers(0, 4, size=shape) if np.issubdtype(dtype, np.integer)
            else rng.normal(size=shape)).astype(dtype)


def test_every_shipped_file_is_checked():
    assert len(FILES) >= 8, FILES


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_shipped_file_on_fresh_interpreters(path):
    content = path.read_bytes()
    assert static_reshapes.runtime_shaped(content) == []
    plain = Interpreter(model_content=content,
                        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    rng = np.random.default_rng(0)
    if "step" in plain.get_signature_list():
        step = plain.get_signature_runner("step")
        (frame,) = [d for n, d in step.get_input_details().items() if n not in step.get_output_details()]
        shape = [int(d) for d in frame["shape_signature"]]
        if "chunk_length" in plain.get_signature_list():  # (batch, chunk, ...): two chunks
            shape = [1, 2 * shape[1]] + shape[2:]
        else:
            shape = [1, LENGTH] + shape[1:]
        x = random_input(shape, frame["dtype"], rng)

        def run(interpreter):
            return run_streaming(interpreter, x)["output"]
    else:
        x = {name: random_input([1] + [LENGTH if d < 0 else int(d) for d in detail["shape_signature"][1:]],
                                detail["dtype"], rng)
             for name, detail in plain.get_signature_runner("serve").get_input_details().items()}

        def run(interpreter):
            return run_sequence(interpreter, x)["output"]
    want = run(plain)
    assert want.size
    # XNNPACK's kernels round otherwise than LiteRT's own, and otherwise on
    # other CPUs: a loose tolerance; a wrong run is off by far more.
    wrong = sum(not np.allclose(run(Interpreter(model_content=content)), want, rtol=1e-4, atol=1e-4)
                for _ in range(FRESH_RUNS))
    assert wrong == 0, f"{wrong} of {FRESH_RUNS} fresh runs wrong"
