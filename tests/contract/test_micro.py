"""TensorFlow Lite for Microcontrollers, for every entry: exported with a
fixed batch and shapes in one subgraph, the file runs in the tflite-micro
interpreter and gives Keras' outputs, behind a mask where the layer reads
one, in float32 and fully integer int8 (`make check`; int8 for the first
entry of each family and the refusals there, every entry in `make
test-slow`: a calibrated conversion of each costs about four minutes in
all)."""

import keras
import numpy as np
import pytest

from keras_relrec.export import export_tflite
from keras_relrec.export import micro
from keras_relrec.export.export_error import ExportError
from keras_relrec.export.tflite import quantization
from tests.contract.conformance import ATOL
from tests.contract.conformance import as_list
from tests.contract.conformance import assert_close
from tests.contract.conformance import family
from tests.contract.conformance import feed
from tests.contract.conformance import firsts_of_families
from tests.contract.conformance import lite_outputs
from tests.contract.conformance import micro_model
from tests.contract.conformance import padded_input
from tests.contract.registry import ENTRIES
from tests.contract.registry import PROTOCOL_ENTRIES

pytestmark = pytest.mark.check

# Behind a mask where the layer reads one (the harder case), alone where it
# does not.
MICRO_CASES = [(e, e.recurrent or e.takes_mask or e in PROTOCOL_ENTRIES) for e in ENTRIES]


@pytest.mark.parametrize(("entry", "masked"), MICRO_CASES,
                         ids=[e.id + ("-masked" if m else "") for e, m in MICRO_CASES])
def test_tflite_micro(entry, masked, tmp_path):
    """Exported for microcontrollers (fixed batch and shapes, one subgraph),
    the file runs in the tflite-micro interpreter and gives Keras' outputs
    within 1e-5, behind a mask where the layer reads one: no entry needs
    an op or a type that TFLM lacks."""
    model = micro_model(entry, masked)
    streams = entry.recurrent or entry in PROTOCOL_ENTRIES
    path = tmp_path / "micro.tflite"
    summary = export_tflite(model, path, streaming=streams, target="micro", batch_size=2)
    assert summary["subgraphs"] == 1, summary["ops"]
    assert all(d > 0 for sides in summary["signatures"].values() for side in sides.values()
               for shape, _ in side.values() for d in shape), summary["signatures"]
    arena = 4 * summary["micro"]["arena_bytes"]
    if streams:
        chunk = getattr(entry.make_layer(), "streaming_chunk_length", None) or 1
        x = entry.make_input(batch=2, length=3 * chunk if chunk > 1 else 6)
        x = padded_input(entry, x) if masked else x
        got = [micro.MicroStreamer(path, arena_size=arena).run(x)["output"]]
    else:
        x = padded_input(entry, entry.make_input(batch=2)) if masked else entry.make_input(batch=2)
        outputs = micro.run_sequence(path, feed(entry, x), arena_size=arena)
        got = lite_outputs(outputs, len(outputs))
    assert_close(got, as_list(model(x)), atol=ATOL)


# Layers that also embed token ids (one that takes ids alone runs them in
# test_tflite_micro).
TOKEN_ENTRIES = [e for e in ENTRIES if e.vocabulary_size and e.input_dtype == "float32"]


@pytest.mark.parametrize("entry", TOKEN_ENTRIES, ids=lambda e: e.id)
def test_tflite_micro_token_ids(entry, tmp_path):
    """Token ids in: a stream of segments runs in TFLM and gives Keras'
    outputs (the embedding is a one-hot product there: Keras' lookup
    corrects negative ids with an int32 SELECT, which TFLM lacks)."""
    size = entry.vocabulary_size
    tokens = keras.Input((None,), dtype="int32", name="sequence")
    layer = entry.make_layer(vocabulary_size=size)
    model = keras.Model(tokens, layer(tokens))
    path = tmp_path / "tokens.tflite"
    summary = export_tflite(model, path, streaming=True, target="micro", batch_size=2)
    ids = np.random.default_rng(0).integers(0, size, size=(2, 3 * layer.streaming_chunk_length)).astype("int32")
    got = micro.MicroStreamer(path, arena_size=4 * summary["micro"]["arena_bytes"]).run(ids)["output"]
    assert_close([got], [model(ids)], atol=ATOL)


# Fully integer int8: the error of the file against Keras' float32, a root
# mean square relative to that of Keras' outputs, that each family's
# untrained layers stay within, about twice the largest measured here (an
# int8 tensor holds 1/256 of its range; attention, normalisations and
# regional sums add up more). A bound the checks hold, not a figure:
# benchmarks/RESULTS.md has those of trained models.
INT8_TOLERANCE = {
    "adaptive": 0.04,
    "bag_of_features": 0.05,
    "bilinear": 0.05,
    "scaling": 0.05,
    "recurrent": 0.15,
    "relational": 0.1,
    "transformer_xl": 0.25,
    "local_recurrence": 0.1,
    "relation_transformer": 0.35,
}
# What no fully integer file can hold, by entry: the log-scale of
# SeriesStatistics (TFLM's LOG takes float only, and an int8 input of one
# linear scale cannot hold amplitudes that span decades, which the feature
# is for).
INT8_REFUSALS = {"SeriesStatistics": "LOG", "SeriesStatistics-per-step": "LOG"}


def test_every_family_has_an_int8_tolerance():
    assert {family(e) for e in ENTRIES} <= set(INT8_TOLERANCE)


INT8_IN_CHECK = firsts_of_families(ENTRIES) + [e for e in ENTRIES if e.id in INT8_REFUSALS]


@pytest.mark.parametrize(("entry", "masked"), [
    pytest.param(e, m, id=e.id + ("-masked" if m else ""),
                 marks=() if any(e is f for f in INT8_IN_CHECK) else pytest.mark.slow)
    for e, m in MICRO_CASES])
def test_tflite_micro_int8(entry, masked, tmp_path):
    """Fully integer int8 (int8 inputs, outputs and states; a few index
    computations behind masks stay float inside), calibrated on other
    examples of the same kind, runs in TFLM
    and follows Keras' float32 within its family's tolerance; what cannot
    be integer is refused, naming the op and the layer."""
    model = micro_model(entry, masked)
    streams = entry.recurrent or entry in PROTOCOL_ENTRIES
    chunk = getattr(entry.make_layer(), "streaming_chunk_length", None) or 1
    length = (3 * chunk if chunk > 1 else 6) if streams else None
    x = entry.make_input(batch=2, length=length)
    x = padded_input(entry, x) if masked else x
    calibration = entry.make_input(batch=32, seed=1, length=length)
    path = tmp_path / "int8.tflite"

    def export():
        return export_tflite(model, path, streaming=streams, target="micro", batch_size=2, quantize="int8",
                             representative_data=calibration)

    if entry.id in INT8_REFUSALS:
        with pytest.raises(ExportError, match=rf"\({entry.cls.__name__}\) uses the op {INT8_REFUSALS[entry.id]} "):
            export()
        return
    summary = export()
    arena = 4 * summary["micro"]["arena_bytes"]
    if streams:
        streamer = micro.MicroStreamer(path, arena_size=arena)
        assert all(streamer.initial_state[name].dtype == np.int8 for name in streamer.initial_state)
        got = [streamer.run(x)["output"]]
    else:
        params = {side: {name: (q["scale"], q["zero_point"]) for name, q in tensors.items()}
                  for side, tensors in summary["quantization"]["serve"].items()}
        # Token ids stay int32 (no quantization parameters).
        feeds = {name: value if name == "sequence" and entry.input_dtype == "int32"
                 else quantization.quantize(value, params["inputs"][name])
                 for name, value in zip(entry.input_names, as_list(x))}
        outputs = micro.run_sequence(path, feeds if len(feeds) > 1 else feeds["sequence"], arena_size=arena)
        assert all(value.dtype == np.int8 for value in outputs.values())
        outputs = {name: quantization.dequantize(value, params["outputs"][name]) for name, value in outputs.items()}
        got = lite_outputs(outputs, len(outputs))
    for g, w in zip(got, as_list(model(x))):
        w = np.asarray(w, np.float64)
        error = np.sqrt(np.mean((np.asarray(g, np.float64) - w) ** 2) / (np.mean(w**2) or 1.0))
        assert error < INT8_TOLERANCE[family(entry)], error
