"""Transformer-XL against the paper's equations written out in float64
NumPy: every score from its distance M + i − j (no shift trick), the
sinusoid of each distance, the masks, the memory's update; then the
properties the paper's training relies on: causality across segments, a
long sequence equal to its segments fed in turn, memories without gradient,
padding that changes nothing. The equations hold in float32 and under the
float64 policy (tests/layers/float64.py)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_relrec.layers import RelativeMultiHeadAttention
from keras_relrec.layers import TransformerXL
from keras_relrec.layers import TransformerXLBlock
from tests.export.saved_model_stream import stream_saved_model
from tests.layers.transformer_xl.numpy_reference import attention_np
from tests.layers.transformer_xl.numpy_reference import backbone_call_np
from tests.layers.transformer_xl.numpy_reference import backbone_np
from tests.layers.transformer_xl.numpy_reference import block_np
from tests.layers.transformer_xl.numpy_reference import random_weights

ATOL = 1e-5
H, DH, D, DI = 2, 3, 6, 10


@pytest.mark.parametrize("options", [
    {},
    {"pre_lnorm": True},
    {"clamp_len": 2},
    {"same_length": True},
], ids=lambda o: "-".join(o) or "default")
def test_attention_matches_the_equations(options, precision):
    rng = np.random.default_rng(1)
    layer = RelativeMultiHeadAttention(H, DH, **options)
    h, memory = rng.normal(size=(3, 4, D)), rng.normal(size=(3, 5, D))
    valid = np.ones((3, 4), bool)
    valid[0, 3] = valid[2, 1] = False
    memory_valid = np.ones((3, 5), bool)
    memory_valid[1, :2] = False
    layer(precision.array(h), memory=precision.array(memory))
    random_weights(layer)
    got, new_memory = layer(precision.array(h), memory=precision.array(memory), mask=valid,
                            memory_mask=memory_valid)
    for b in range(3):
        want = attention_np(layer, h[b], memory[b], valid[b], memory_valid[b])
        precision.assert_close(got[b], want, atol=ATOL)
    # The new memory: the last M positions of [memory; h], padding as zeros.
    joined = np.concatenate([np.where(memory_valid[..., None], memory, 0), np.where(valid[..., None], h, 0)], 1)
    precision.assert_close(new_memory, joined[:, -5:], atol=ATOL)


def test_attention_without_memory_attends_within_the_segment():
    rng = np.random.default_rng(2)
    layer = RelativeMultiHeadAttention(H, DH)
    h = rng.normal(size=(2, 5, D))
    layer(h.astype("float32"))
    random_weights(layer, 3)
    got = layer(h.astype("float32"))
    for b in range(2):
        want = attention_np(layer, h[b], np.zeros((0, D)), np.ones(5, bool), np.zeros(0, bool))
        np.testing.assert_allclose(got[b], want, atol=ATOL)


@pytest.mark.parametrize("pre_lnorm", [False, True])
def test_block_matches_the_equations(pre_lnorm, precision):
    rng = np.random.default_rng(4)
    block = TransformerXLBlock(H, DH, DI, pre_lnorm=pre_lnorm)
    h, memory = rng.normal(size=(2, 4, D)), rng.normal(size=(2, 3, D))
    block(precision.array(h), memory=precision.array(memory))
    random_weights(block, 5)
    got, _ = block(precision.array(h), memory=precision.array(memory))
    for b in range(2):
        want = block_np(block, h[b], memory[b], np.ones(4, bool), np.ones(3, bool))
        precision.assert_close(got[b], want, atol=ATOL)


def make_backbone(**kwargs):
    options = {"num_layers": 2, "num_heads": H, "head_size": DH, "hidden_dim": D, "intermediate_dim": DI,
               "segment_len": 3, "mem_len": 4, **kwargs}
    model = TransformerXL(**options)
    model(np.zeros((1, 3), "int32") if model.vocabulary_size else np.zeros((1, 3, D), "float32"))
    random_weights(model, 6)
    return model


@pytest.mark.parametrize("options", [{}, {"tie_relative_biases": True, "pre_lnorm": True}, {"mem_len": 0},
                                     {"vocabulary_size": 11}],
                         ids=["untied", "tied-pre-ln", "no-memory", "tokens"])
def test_backbone_matches_the_segment_recurrence(options, precision):
    rng = np.random.default_rng(7)
    model = make_backbone(**options)
    valid = np.ones((3, 11), bool)  # 4 segments, the last one padded
    valid[0, 9:] = False  # padding at the end
    valid[1, 3:6] = False  # a whole segment of padding
    valid[2, 4] = False  # one position
    if model.vocabulary_size:
        # Token ids, embedded as E[x] · sqrt(d).
        inputs = rng.integers(0, 11, size=valid.shape)
        x = np.asarray(model.embedding.embeddings, "float64")[inputs] * np.sqrt(D)
    else:
        x = rng.normal(size=valid.shape + (D,))
        inputs = precision.array(x)
    precision.assert_close(model(inputs, mask=valid), backbone_np(model, x, valid), atol=ATOL)


def test_a_sequence_equals_its_segments_fed_in_turn():
    rng = np.random.default_rng(8)
    model = make_backbone(return_state=True)
    x = rng.normal(size=(2, 12, D)).astype("float32")
    whole, *final = model(x)
    states, outputs = None, []
    for start in (0, 3, 6, 9):
        output, *states = model(x[:, start : start + 3], initial_state=states)
        outputs.append(output)
    np.testing.assert_allclose(np.concatenate(outputs, 1), whole, atol=ATOL)
    for a, b in zip(states, final):
        np.testing.assert_allclose(a, b, atol=ATOL)
    # A functional model with any length (a loop over segments that only
    # the running graph knows the count of) computes the same.
    inputs = keras.Input((None, D))
    dynamic = keras.Model(inputs, model(inputs)[0])
    np.testing.assert_allclose(dynamic.predict(x[:, :11], verbose=0), whole[:, :11], atol=ATOL)
    np.testing.assert_allclose(tf.function(dynamic, jit_compile=True)(x)[:, :12], whole, atol=ATOL)


# How a stream of calls goes on: states fed back, a stateful layer, states
# fed back to a graph of unknown length (the loop over segments, which
# pads at run time; TensorFlow alone has such graphs).
STREAMS = ["fed_back", "stateful"] + (["unknown_length"] if keras.backend.backend() == "tensorflow" else [])


@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize("mem_len", [4, 3, 6])
def test_a_stream_of_calls_runs_each_call_in_its_own_segments(stream, mem_len, precision):
    """Each call is cut into segments of L from its start, the last one
    shorter (HuggingFace's TransfoXL runs each call so): the padding that
    fills a call's last segment never enters the memories, which after a
    call hold the last M positions of themselves and the call's, masked
    ones included as masked. Outputs and states after every call are the
    NumPy recurrence's on the same calls, with M below, equal to and above
    L."""
    rng = np.random.default_rng(12)
    model = make_backbone(segment_len=4, mem_len=mem_len, return_state=True)
    batch, calls = 2, (1, 3, 1, 5, 2)
    pieces = [rng.normal(size=(batch, steps, D)) for steps in calls]
    masks = [np.ones((batch, steps), bool) for steps in calls]
    masks[2][1] = False  # a call with no valid position leaves the memories
    masks[3][0, 1] = False  # masked positions keep their place ...
    masks[4][0, -1] = False  # ... the last one of a call too
    # In their own dtypes: the memories the layer's, the mask float32.
    states = [np.asarray(s) for s in model.get_initial_state(batch)]
    want_states = [s.astype("float64") for s in states]
    stateful = TransformerXL(**{**model.get_config(), "stateful": True, "name": "stateful"})
    stateful(keras.Input((None, D), batch_size=batch))
    stateful.set_weights(model.get_weights())

    def fed_back(x, mask, *states):
        return model(x, mask=mask, initial_state=list(states))

    if stream == "unknown_length":
        signature = [tf.TensorSpec((batch, None, D), model.compute_dtype), tf.TensorSpec((batch, None), "bool")]
        fed_back = tf.function(fed_back, input_signature=signature + [tf.TensorSpec(s.shape, s.dtype)
                                                                      for s in states])
    for k, (x, mask) in enumerate(zip(pieces, masks)):
        if stream == "stateful":
            got, *states = stateful(precision.array(x), mask=mask)
        else:
            got, *states = fed_back(precision.array(x), mask, *states)
        want, want_states = backbone_call_np(model, x, mask, want_states)
        message = f"call {k} of {calls[k]} steps"
        precision.assert_close(got, want, atol=ATOL, err_msg=message)
        # memory_mask: zeros and ones, exactly.
        np.testing.assert_array_equal(states[-1], want_states[-1], err_msg=message)
        for state, want_state in zip(states[:-1], want_states[:-1], strict=True):
            precision.assert_close(state, want_state, atol=ATOL, err_msg=message)


@pytest.mark.parametrize("options", [{}, {"mem_len": 0}], ids=["memory", "no-memory"])
def test_stateful_training_over_a_long_stream(options):
    """Truncated back-propagation over segments: the stateful layer carries
    the memories from call to call, gradients stop at them. Without memory
    it keeps no state and trains as a stateless layer."""
    rng = np.random.default_rng(9)
    reference = make_backbone(**options)
    x = rng.normal(size=(2, 12, D)).astype("float32")
    whole = reference(x)
    stateful = TransformerXL(**{**reference.get_config(), "stateful": True, "name": "stateful"})
    stateful(keras.Input((3, D), batch_size=2))
    stateful.set_weights(reference.get_weights())
    parts = [stateful(x[:, s : s + 3]) for s in (0, 3, 6, 9)]
    np.testing.assert_allclose(np.concatenate(parts, 1), whole, atol=ATOL)
    stateful.reset_state()
    np.testing.assert_allclose(stateful(x[:, :3]), whole[:, :3], atol=ATOL)
    inputs = keras.Input((3, D), batch_size=2)
    model = keras.Model(inputs, stateful(inputs))
    model.compile("sgd", "mse")
    model.fit(x[:, :3], x[:, :3], epochs=2, verbose=0)


def test_causal_across_segments_and_no_gradient_through_memory():
    rng = np.random.default_rng(10)
    model = make_backbone(mem_len=5)
    x = tf.constant(rng.normal(size=(1, 9, D)).astype("float32"))
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = model(x)
        rows = [tf.reduce_sum(y[:, t]) for t in range(9)]
    forward = keras.ops.convert_to_numpy(model(x))
    for t in range(9):
        g = np.abs(tape.gradient(rows[t], x).numpy()[0]).sum(-1)
        segment_start = t - t % 3
        # Nothing from later positions; within the segment, every earlier
        # position; across segments, no gradient (the memory is SG(·)).
        assert np.all(g[t + 1 :] == 0), t
        assert np.all(g[segment_start : t + 1] > 0), t
        assert np.all(g[:segment_start] == 0), t
    # Yet earlier segments do reach the outputs, through the memory.
    changed = x.numpy().copy()
    changed[0, 0] += 1.0
    later = keras.ops.convert_to_numpy(model(changed))
    assert not np.allclose(later[0, 3:], forward[0, 3:])
    np.testing.assert_allclose(later[0, :0], forward[0, :0])


def test_bad_arguments_name_themselves():
    # Bad constructor arguments: the registry's bad_kwargs (tests/contract).
    model = make_backbone(return_state=True)
    x = np.zeros((2, 6, D), "float32")
    with pytest.raises(ValueError, match="initial state 'memory_0' of shape"):
        model(x, initial_state=[np.zeros((2, 3, D))] * 2 + [np.zeros((2, 4))])
    with pytest.raises(ValueError, match="batch size"):
        model(x, initial_state=[np.zeros((1, 4, D), "float32")] * 2 + [np.zeros((1, 4), "float32")])
    attention = RelativeMultiHeadAttention(H, DH, same_length=True)
    with pytest.raises(ValueError, match="same_length"):
        attention(x)
    with pytest.raises(ValueError, match="even number of features"):
        RelativeMultiHeadAttention(H, DH)(np.zeros((1, 2, 5), "float32"))


# make check, with the other SavedModel exports: a SavedModel written and
# loaded costs more than make test's time limit.
@pytest.mark.check
def test_saved_model_and_quantized_streaming_by_segment(tmp_path):
    """SavedModel `serve` and `step` (with `chunk_length`), and a dynamic-
    range int8 TFLite step, fed segment by segment, give Keras' outputs."""
    from keras_relrec.export import export_saved_model
    from keras_relrec.export import export_tflite
    from keras_relrec.export import run_streaming

    model_layer = make_backbone()
    inputs = keras.Input((None, D), name="sequence")
    model = keras.Model(inputs, model_layer(inputs))
    x = np.random.default_rng(11).normal(size=(2, 9, D)).astype("float32")
    want = model.predict(x, verbose=0)
    assert export_saved_model(model, tmp_path / "sm") == ["serve", "step", "initial_state", "chunk_length"]
    loaded = tf.saved_model.load(str(tmp_path / "sm"))
    np.testing.assert_allclose(loaded.serve({"sequence": x})["output"], want, atol=ATOL)
    assert int(loaded.chunk_length()["chunk_length"]) == 3
    np.testing.assert_allclose(stream_saved_model(loaded, x), want, atol=ATOL)
    summary = export_tflite(model, tmp_path / "int8.tflite", streaming=True, quantize="dynamic_int8")
    assert not [op for op in summary["ops"] if op.startswith("CUSTOM")]
    # The bound of the package's other dynamic-range int8 exports.
    np.testing.assert_allclose(run_streaming(tmp_path / "int8.tflite", x)["output"], want, atol=0.1)
