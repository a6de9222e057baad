"""The pass that gives runtime-shaped RESHAPEs constant shapes, on the file
kept for the LiteRT defect it works around (tools/litert_runtime_reshape)."""

import pathlib

import numpy as np
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter
from ai_edge_litert.interpreter import OpResolverType

from keras_relrec.export.runtime import tflite_inspect
from keras_relrec.export.tflite import flatbuffer
from keras_relrec.export.tflite import static_reshapes

REPRO = pathlib.Path(__file__).parents[2] / "tools" / "litert_runtime_reshape"


def runtime_shape_inputs(content):
    """How many RESHAPEs take a shape input that is not a constant."""
    model = flatbuffer.read(content)
    names = tflite_inspect.operator_names(schema.Model.GetRootAsModel(content, 0))
    return sum(names[op.opcodeIndex] == "RESHAPE" and len(op.inputs) > 1
               and not static_reshapes.is_constant(model, subgraph.tensors[op.inputs[1]])
               for subgraph in model.subgraphs for op in subgraph.operators)


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


def test_a_tensordot_flattening_is_made_static():
    """Keras' Dense on a sequence converts to a tensordot, whose flattening
    RESHAPE takes (batch · steps, features) from SHAPE → GATHER →
    REDUCE_PROD → PACK: the converter annotates both sizes unknown, the
    shape arithmetic says one is."""
    import keras
    import tensorflow as tf

    inputs = keras.Input((10, 4))
    model = keras.Model(inputs, keras.layers.Dense(3)(inputs))
    raw = tf.lite.TFLiteConverter.from_keras_model(model).convert()
    assert static_reshapes.runtime_shaped(raw)
    fixed, count = static_reshapes.make_static(raw)
    assert count == len(static_reshapes.runtime_shaped(raw)) and static_reshapes.runtime_shaped(fixed) == []
    # Every RESHAPE here has one unknown size: none is left with a shape
    # computed at run time, the flattening one included.
    assert runtime_shape_inputs(raw) == 2 and runtime_shape_inputs(fixed) == 0
    x = np.random.default_rng(0).normal(size=(2, 10, 4)).astype("float32")
    for content in (raw, fixed):
        interpreter = Interpreter(model_content=content)
        runner = interpreter.get_signature_runner()
        (name,) = runner.get_input_details()
        (got,) = runner(**{name: x}).values()
        np.testing.assert_allclose(got, np.asarray(model(x)), atol=1e-5)
