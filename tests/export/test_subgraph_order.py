"""The step leads its file, so that LiteRT's default delegate (XNNPACK)
takes it; and the step of a segment recurrence is static at a fixed batch
(`subgraph_order`)."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter

from keras_relrec.export import export_tflite
from keras_relrec.export import run_streaming
from keras_relrec.export.runtime import tflite_inspect
from keras_relrec.export.tflite import flatbuffer
from keras_relrec.export.tflite import subgraph_order
from keras_relrec.layers import SegmentCacheTransformer
from keras_relrec.layers import TransformerXL

WIDTH, SEGMENT = 8, 2


def backbone(kind):
    common = dict(num_layers=2, num_heads=2, head_size=4, hidden_dim=WIDTH, intermediate_dim=16,
                  segment_len=SEGMENT, name="backbone")
    if kind == "transformer_xl":
        return TransformerXL(mem_len=4, **common)
    return SegmentCacheTransformer(num_slots=3, top_k=2, **common)


def model_of(kind):
    keras.utils.set_random_seed(0)
    features = keras.Input((None, WIDTH), name="features")
    return keras.Model(features, keras.layers.Dense(3, name="head")(backbone(kind)(features)))


def delegate_nodes(content):
    """How many nodes of the file's first subgraph LiteRT's default delegate
    took, in a fresh interpreter with default options. The Python API shows
    the first (primary) subgraph's nodes only, through the wrapper's private
    `NumNodes`/`NodeName`: a delegated partition is a node named DELEGATE."""
    interpreter = Interpreter(model_content=content)
    interpreter.allocate_tensors()
    wrapper = interpreter._interpreter
    return sum(wrapper.NodeName(k) == "DELEGATE" for k in range(wrapper.NumNodes()))


def step_subgraph(content):
    model = flatbuffer.read(content)
    (index,) = [s.subgraphIndex for s in model.signatureDefs if s.signatureKey == b"step"]
    names = tflite_inspect.operator_names(schema.Model.GetRootAsModel(content, 0))
    subgraph = model.subgraphs[index]
    return [names[op.opcodeIndex] for op in subgraph.operators], subgraph.tensors


@pytest.mark.parametrize("kind", ["transformer_xl", "segment_cache"])
def test_the_step_of_a_chunked_layer_leads_its_file_and_litert_delegates_it(kind, tmp_path):
    """The converter puts `chunk_length` (no op) first; LiteRT then
    delegated no subgraph and the step ran on reference kernels (3-4 times
    slower for Transformer-XL at memory 2,048)."""
    model = model_of(kind)
    path = tmp_path / "step.tflite"
    export_tflite(model, path, streaming=True)
    content = path.read_bytes()
    assert subgraph_order.first_subgraph(content) == "step"
    assert sorted(Interpreter(model_content=content).get_signature_list()) == ["chunk_length", "initial_state",
                                                                                "step"]
    assert delegate_nodes(content) > 0
    # The renumbered signatures still run: the stream matches the model.
    x = np.random.default_rng(1).normal(size=(2, 3 * SEGMENT, WIDTH)).astype("float32")
    np.testing.assert_allclose(run_streaming(content, x)["output"], np.asarray(model(x)), atol=1e-5)


@pytest.mark.parametrize("kind", ["transformer_xl", "segment_cache"])
def test_the_step_at_batch_one_is_static(kind, tmp_path):
    """At a fixed batch the step computes no shape: no SHAPE, REDUCE_PROD or
    FILL, every tensor's size known before running (no -1), and a GATHER
    only where the segment cache picks each recalled position's distance
    score (data, not a shape)."""
    model = model_of(kind)
    path = tmp_path / "step.tflite"
    export_tflite(model, path, streaming=True, batch_size=1)
    content = path.read_bytes()
    ops, tensors = step_subgraph(content)
    assert not {"SHAPE", "REDUCE_PROD", "FILL", "WHILE"} & set(ops), sorted(set(ops))
    assert ops.count("GATHER") == (0 if kind == "transformer_xl" else 2), ops.count("GATHER")
    dynamic = [t.name.decode() for t in tensors
               if t.shapeSignature is not None and len(t.shapeSignature) and min(t.shapeSignature) < 0]
    assert dynamic == []
    assert delegate_nodes(content) > 0
    x = np.random.default_rng(2).normal(size=(1, 4 * SEGMENT, WIDTH)).astype("float32")
    np.testing.assert_allclose(run_streaming(content, x)["output"], np.asarray(model(x)), atol=1e-5)


class _Counter(tf.Module):
    """Two signatures, the first by name without an op, the second with a
    WHILE: the order the converter gives a chunked step's file."""

    @tf.function(input_signature=[])
    def chunk_length(self):
        return {"chunk_length": tf.constant(2, tf.int32)}

    @tf.function(input_signature=[tf.TensorSpec((1, 3), tf.float32, name="x")])
    def step(self, x):
        _, y = tf.while_loop(lambda k, y: k < 4, lambda k, y: (k + 1, y * 2.0 + 1.0), (tf.constant(0), x))
        return {"output": y}


def test_step_first_renumbers_the_signatures_and_the_loops(tmp_path):
    module = _Counter()
    tf.saved_model.save(module, str(tmp_path), signatures={"chunk_length": module.chunk_length,
                                                           "step": module.step})
    converter = tf.lite.TFLiteConverter.from_saved_model(str(tmp_path), signature_keys=["chunk_length", "step"])
    content = converter.convert()
    assert subgraph_order.first_subgraph(content) == "chunk_length"
    assert "WHILE" in tflite_inspect.op_histogram(content)
    moved = subgraph_order.step_first(content)
    assert subgraph_order.first_subgraph(moved) == "step"
    assert subgraph_order.step_first(moved) is moved  # already first: unchanged
    x = np.array([[0.0, 1.0, -1.0]], np.float32)
    for file in (content, moved):
        interpreter = Interpreter(model_content=file)
        np.testing.assert_allclose(interpreter.get_signature_runner("step")(x=x)["output"], x * 16 + 15)
        assert int(interpreter.get_signature_runner("chunk_length")()["chunk_length"]) == 2
