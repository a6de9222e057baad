"""The pass that gives runtime-shaped RESHAPEs constant shapes, on the file
kept for the LiteRT defect it works around (tools/litert_runtime_reshape)."""

import pathlib

import numpy as np
from ai_edge_litert.interpreter import Interpreter
from ai_edge_litert.interpreter import OpResolverType

from keras_relrec.export import static_reshapes
from keras_relrec.export import tflite_inspect

REPRO = pathlib.Path(__file__).parents[2] / "tools" / "litert_runtime_reshape"


def serve(content, sequence, resolver=OpResolverType.AUTO):
    interpreter = Interpreter(model_content=content, experimental_op_resolver_type=resolver)
    return interpreter.get_signature_runner("serve")(sequence=sequence)["output"]


def test_runtime_shaped_reshapes_get_constant_shapes():
    content = (REPRO / "runtime_reshapes.tflite").read_bytes()
    found = static_reshapes.runtime_shaped(content)
    assert len(found) == 7 and all("while" in name for name in found), found
    fixed, count = static_reshapes.make_static(content)
    assert count == 7
    assert static_reshapes.runtime_shaped(fixed) == []
    assert tflite_inspect.summarize(fixed)["runtime_shaped_reshapes"] == 0
    assert tflite_inspect.summarize(content)["runtime_shaped_reshapes"] == 7
    # The shape arithmetic left unread is gone; the RESHAPEs stay.
    before, after = tflite_inspect.op_histogram(content), tflite_inspect.op_histogram(fixed)
    assert after["RESHAPE"] == before["RESHAPE"]
    assert after["PACK"] < before["PACK"]
    # The kept file is this pass's output, and a second pass changes nothing.
    assert fixed == (REPRO / "constant_reshapes.tflite").read_bytes()
    assert static_reshapes.make_static(fixed) == (fixed, 0)


def test_the_rewritten_file_gives_the_same_answers():
    data = np.load(REPRO / "io.npz")
    fixed, _ = static_reshapes.make_static((REPRO / "runtime_reshapes.tflite").read_bytes())
    for batch in (1, 3):
        sequence = np.repeat(data["sequence"], batch, axis=0)
        want = np.repeat(data["output"], batch, axis=0)
        for resolver in (OpResolverType.AUTO, OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES):
            for _ in range(20):
                np.testing.assert_allclose(serve(fixed, sequence, resolver), want, atol=1e-5)
