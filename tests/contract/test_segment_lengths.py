"""The contract of the layers that run in segments or chunks of L steps:
every registry entry whose layer has a segment or chunk length (one of
`SEGMENT_ATTRIBUTES`) takes calls of 1, L − 1, L + 1 and 2L + 3 steps,
fresh and continuing a stream, eagerly and under XLA, and on TensorFlow
in a graph of unknown length too (where the number of segments and the
padding of the last one are known only when the graph runs). The module
is backend-neutral: `make check` runs it again on JAX.

A stream continues eagerly with `stateful=True`, and under XLA and in the
graph with its states fed back (`initial_state` and `return_state` where
the layer's call takes them, else the streaming protocol's
`streaming_step`): on JAX, `predict` does not carry a state kept outside
the model's variables, as the stateful layers keep theirs
(`keras.layers.RNN` too).

The outputs must be finite, of the call's length, and equal (1e-5) to the
oracle of what the layer documents:

- `TransformerXL`: each call is cut into segments of L from its start,
  the last one shorter, and the padding that fills that last segment never
  enters the memories. The oracle is the NumPy float64 equations
  (tests/layers/transformer_xl/numpy_reference.py) run call by call so.
- the others: one eager call of a fresh layer on the
  stream's calls laid end to end, each padded at the end to whole segments
  with the padding masked. That is what the segment cache documents (a
  call is padded at the end, its padding enters the cache as masked
  positions, and the next call goes on after it), and for a layer whose
  chunks do not change what it computes (the chunked local recurrence,
  where a masked step is as if absent), the calls without padding.
"""

import inspect
import zlib

import keras
import numpy as np
import pytest

from keras_relrec import layers
from tests.contract.conformance import ATOL
from tests.contract.conformance import SLOW_TO_COMPILE
from tests.contract.registry import ENTRIES
from tests.layers.transformer_xl.numpy_reference import backbone_call_np

# Backend-neutral: `make check` runs it again on JAX.
pytestmark = pytest.mark.jax
BATCH = 2
# The names a layer gives the length of the segments or chunks it runs in.
SEGMENT_ATTRIBUTES = ("segment_len", "chunk_size", "streaming_chunk_length")
# On every backend; "graph" (unknown length) on TensorFlow alone.
MODES = ("eager", "xla") + (("graph",) if keras.backend.backend() == "tensorflow" else ())
# How each mode continues a stream.
STREAMS = {"eager": "stateful", "xla": "fed_back", "graph": "fed_back"}


def segment_length(entry):
    """L of the entry's layer, or None when it runs in no segments."""
    layer = entry.make_layer()
    return next((getattr(layer, name) for name in SEGMENT_ATTRIBUTES if getattr(layer, name, None)), None)


SEGMENT_ENTRIES = [(entry, length) for entry in ENTRIES if (length := segment_length(entry))]


def call_lengths(length):
    """The calls of the stream: 1, L − 1, L + 1, 2L + 3, then 1 again (so
    that each length both starts and continues a stream)."""
    return [n for n in (1, length - 1, length + 1, 2 * length + 3, 1) if n]


class StreamingStep(keras.layers.Layer):
    """[inputs, *states] → [outputs, *new states] by a layer's
    `streaming_step`: how states are fed back to a layer whose call takes
    none."""

    def __init__(self, layer, **kwargs):
        super().__init__(**kwargs)
        self.layer = layer

    def call(self, inputs, states):
        outputs, new_states = self.layer.streaming_step(inputs, list(states))
        return [outputs, *new_states]


def models(entry):
    """A model of the layer (fresh calls), one that takes and returns the
    states with the layer in it, and a stateful one."""
    features = tuple(entry.input_shape[1:])
    takes_states = "initial_state" in inspect.signature(entry.make_layer().call).parameters
    layer = entry.make_layer(**({"return_state": True} if takes_states else {}))
    layer.build((None, None) + features)
    x = keras.Input((None,) + features)
    states = [keras.Input(shape, dtype=dtype) for _, shape, dtype in layer.streaming_state_specs()]
    outputs = layer(x, initial_state=states) if takes_states else StreamingStep(layer)(x, states)
    stateful = keras.Input((None,) + features, batch_size=BATCH)
    return (entry.make_model(dynamic_length=True), (keras.Model([x, *states], outputs), layer),
            keras.Model(stateful, entry.make_layer(stateful=True)(stateful)))


def run_calls(entry, weights, pieces, mode):
    """{"fresh": the outputs of each piece but the last alone, then those
    of the pieces as one stream}. `eager`: direct calls, fresh from the
    layer's own initial state, the stream by a stateful layer. `xla`:
    compiled `predict_on_batch` with the states fed back, fresh from
    `streaming_initial_state`; `graph`: the same through a `tf.function`
    whose inputs have an unknown length."""
    plain, (fed_back, layer), stateful = models(entry)
    numpy = keras.ops.convert_to_numpy
    if mode == "eager":
        for model in (plain, stateful):
            model.set_weights(weights)
        return {"fresh": [numpy(plain(x)) for x in pieces[:-1]], "stateful": [numpy(stateful(x)) for x in pieces]}
    fed_back.set_weights(weights)
    initial = [numpy(s) for s in layer.streaming_initial_state(BATCH)]
    if mode == "xla":
        fed_back.compile(jit_compile=True)

        def step(x, states):
            y, *states = fed_back.predict_on_batch([x, *states])
            return y, states
    else:
        import tensorflow as tf  # the graph mode's alone: TensorFlow's

        signature = [tf.TensorSpec((BATCH, None) + pieces[0].shape[2:], pieces[0].dtype)]
        graph = tf.function(lambda x, *states: fed_back([x, *states]),
                            input_signature=signature + [tf.TensorSpec(s.shape, s.dtype) for s in initial])

        def step(x, states):
            y, *states = (numpy(t) for t in graph(x, *states))
            return y, states

    outputs = {"fresh": [step(x, initial)[0] for x in pieces[:-1]], "fed_back": []}
    states = initial
    for x in pieces:
        y, states = step(x, states)
        outputs["fed_back"].append(y)
    return outputs


def transformer_xl_oracle(entry, weights, pieces, length):
    """Per piece, the NumPy equations of Transformer-XL on the stream call
    by call: each piece cut into segments of `length` (the layer's) from
    its start, the last one short, from empty memories."""
    layer = entry.make_layer()
    layer(pieces[0])
    layer.set_weights(weights)
    states = [np.asarray(s, "float64") for s in layer.get_initial_state(BATCH)]
    outputs = []
    for x in pieces:
        y, states = backbone_call_np(layer, x.astype("float64"), np.ones(x.shape[:2], bool), states)
        outputs.append(y)
    return outputs


def padded_oracle(entry, weights, pieces, length):
    """Per piece, the valid outputs of one fresh call on the pieces laid end
    to end, each padded at the end to whole segments and masked there."""
    padded = [np.pad(x, [(0, 0), (0, -x.shape[1] % length)] + [(0, 0)] * (x.ndim - 2)) for x in pieces]
    valid = np.concatenate([np.arange(p.shape[1]) < x.shape[1] for p, x in zip(padded, pieces)])
    layer = entry.make_layer()
    layer(padded[0])
    layer.set_weights(weights)
    outputs = np.asarray(layer(np.concatenate(padded, 1), mask=np.broadcast_to(valid, (BATCH, valid.size))))
    return np.split(outputs[:, valid], np.cumsum([x.shape[1] for x in pieces])[:-1], axis=1)


@pytest.fixture(scope="module")
def cases():
    """Per entry id, prepared when a test first asks: the weights, the
    pieces of the stream and the oracle's outputs for each piece alone and
    for the stream. Each entry has a seed of its own, so that its weights
    do not depend on which test asked first."""
    class Cases(dict):
        def __missing__(self, entry_id):
            entry, length = next((e, n) for e, n in SEGMENT_ENTRIES if e.id == entry_id)
            keras.utils.set_random_seed(zlib.crc32(entry_id.encode()))
            weights = entry.make_model(dynamic_length=True).get_weights()
            pieces = [entry.make_input(batch=BATCH, seed=k, length=n) for k, n in enumerate(call_lengths(length))]
            oracle = transformer_xl_oracle if entry.cls is layers.TransformerXL else padded_oracle
            fresh = [oracle(entry, weights, [x], length)[0] for x in pieces[:-1]]
            self[entry_id] = weights, pieces, fresh, oracle(entry, weights, pieces, length)
            return self[entry_id]

    return Cases()


def check(entry, mode, got, cases):
    """`got` (from `run_calls`) against the oracle."""
    _, pieces, want_fresh, want_stream = cases[entry.id]
    assert set(got) == {"fresh", STREAMS[mode]}
    for kind, outputs in got.items():
        for k, (g, w) in enumerate(zip(outputs, want_fresh if kind == "fresh" else want_stream, strict=True)):
            message = f"{kind}: call {k} of {pieces[k].shape[1]} steps"
            assert g.shape == w.shape, message
            assert np.all(np.isfinite(g)), message
            np.testing.assert_allclose(g, w, atol=ATOL, err_msg=message)


def test_the_segment_layers_are_selected():
    """The selection by attribute finds the known segment layers (a rename
    would otherwise drop them silently)."""
    ids = {entry.id for entry, _ in SEGMENT_ENTRIES}
    assert {"TransformerXL", "SegmentCacheTransformer", "LocalRecurrence-chunked-peephole"} <= ids, ids


segment_entries = pytest.mark.parametrize("entry", [entry for entry, _ in SEGMENT_ENTRIES], ids=lambda e: e.id)


# Compiled calls of the entries of SLOW_TO_COMPILE in make check (a compile
# per length).
@pytest.mark.parametrize(("entry", "mode"), [
    pytest.param(entry, mode, id=f"{mode}-{entry.id}",
                 marks=pytest.mark.check if mode != "eager" and entry.id in SLOW_TO_COMPILE else ())
    for mode in MODES for entry, _ in SEGMENT_ENTRIES])
def test_calls(entry, mode, cases):
    weights, pieces, _, _ = cases[entry.id]
    check(entry, mode, run_calls(entry, weights, pieces, mode), cases)
