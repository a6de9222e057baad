"""LiteRT: builtins only for every layer; whole sequences with a dynamic
batch (and length, for a recurrent layer), and frame-by-frame (or chunk by
chunk) streaming for every recurrent or protocol layer, each equal to Keras.

`make test` exports the first entry of each family (one sequence file and
one streaming file per family); `make check` every entry. The files come
from the session's `exported` fixture (conftest.py), converted once and
read by these checks and by test_exported_files_on_device.py.
"""

import operator

import keras
import numpy as np
import pytest

from keras_relrec.export import export_tflite
from keras_relrec.export import plan_export
from keras_relrec.export import run_sequence
from keras_relrec.export import run_streaming
from tests.contract.conformance import ATOL
from tests.contract.conformance import SLOW_TO_EXPORT
from tests.contract.conformance import STEP_MODELS
from tests.contract.conformance import as_list
from tests.contract.conformance import assert_builtins_only
from tests.contract.conformance import assert_close
from tests.contract.conformance import each_input
from tests.contract.conformance import feed
from tests.contract.conformance import first_input
from tests.contract.conformance import float64_copy
from tests.contract.conformance import keras_outputs
from tests.contract.conformance import lite_outputs
from tests.contract.conformance import one_per_family
from tests.contract.conformance import padded_input
from tests.contract.registry import ENTRIES
from tests.contract.registry import PROTOCOL_ENTRIES
from tests.contract.registry import RECURRENT_ENTRIES

# The tests of the shared files run on the worker that converted them.
pytestmark = pytest.mark.xdist_group("exports")
STREAMING = one_per_family(RECURRENT_ENTRIES + PROTOCOL_ENTRIES)


# Never as a family's first the entries of SLOW_TO_EXPORT (conformance.py).
@pytest.mark.parametrize("entry", one_per_family(ENTRIES, slow=SLOW_TO_EXPORT))
def test_tflite_sequence_mode(entry, exported):
    """LiteRT gives Keras' outputs within 1e-5, or, where a long sequence
    makes float32 itself drift (Keras' float32 output against the same model
    in float64), within four times that drift: the export must be as exact
    as Keras' own float32 computation."""
    model, path, summary = exported(entry, "sequence")
    exact = float64_copy(entry, model, entry.recurrent)
    assert_builtins_only(summary)
    lengths = (1, 7, 500) if entry.recurrent else (None,)
    for length in lengths:
        # Keras' outputs once per length; the file runs the batch of three
        # and its first example alone.
        x = entry.make_input(batch=3, length=length)
        keras_out = keras_outputs(entry, model, x)
        exact_out = keras_outputs(entry, exact, each_input(entry, x, lambda v: v.astype("float64")))
        drift = max(np.abs(k - e).max() for k, e in zip(keras_out, exact_out))
        for batch in (1, 3):
            want = [k[:batch] for k in keras_out]
            rows = each_input(entry, x, operator.itemgetter(slice(batch)))
            got = lite_outputs(run_sequence(path, feed(entry, rows)), len(want))
            assert_close(got, want, atol=max(ATOL, 4 * drift),
                         err_msg=f"batch {batch}, length {length}, float32 drift {drift:.1e}")
    # Inputs that do not fit the file's signature are refused before LiteRT
    # runs, with the input's name and the expected shape or dtype.
    x = entry.make_input(batch=2)
    first = as_list(x)[0]
    wrong_size = np.zeros(first.shape[:-1] + (first.shape[-1] + 1,), entry.input_dtype)
    for bad, reason in [
        (first[..., None], "must have shape"),
        (wrong_size, "must have shape"),
        (first[:0], "empty axis"),
        (first[:, :0] if entry.recurrent else first[:, :-1],
         "empty axis" if entry.recurrent else "must have shape"),
        (first.astype("float64"), f"must have dtype {entry.input_dtype}"),
    ]:
        with pytest.raises(ValueError, match=f"Input 'sequence' {reason}|Input 'sequence' has shape"):
            run_sequence(path, feed(entry, first_input(entry, x, bad)))


# One test per file (a conversion each): the layer alone, behind a mask,
# and for a cell two of it stacked behind a mask (in make check for the
# entries of SLOW_TO_EXPORT).
STREAMED = [pytest.param(p.values[0], name, id=f"{p.id}-{name.replace(' ', '-')}",
                         marks=pytest.mark.check if p.values[0].id in SLOW_TO_EXPORT and name == "masked stack step"
                         else p.marks)
            for p in STREAMING if p.values[0].recurrent
            for name in (STEP_MODELS if p.values[0].is_cell else ["step", "masked step"])]


@pytest.mark.parametrize(("entry", "name"), STREAMED)
def test_tflite_streaming(entry, name, exported):
    """Fed frame by frame, the step gives what Keras gives on the whole
    sequence, padding included."""
    x = padded_input(entry, entry.make_input(batch=3, length=6))
    model, path, summary = exported(entry, name)
    assert_builtins_only(summary)
    result = run_streaming(path, x)
    np.testing.assert_allclose(result["output"], np.asarray(model(x)), atol=ATOL, err_msg=name)
    # States of another batch size, frames of the wrong rank or dtype, and no
    # frame at all are refused before LiteRT runs.
    states = {k: v for k, v in result.items() if k != "output"}
    with pytest.raises(ValueError, match="has batch size 3; input 'sequence' has 2"):
        run_streaming(path, x[:2], states=states)
    for bad, reason in [(x[:, 0], "must have shape"), (x[:, :0], "empty axis"),
                        (x.astype("float64"), "must have dtype")]:
        with pytest.raises(ValueError, match=f"Input 'sequence' ({reason}|has shape)"):
            run_streaming(path, bad)


@pytest.mark.parametrize(("entry", "name"), [
    pytest.param(p.values[0], name, id=f"{p.id}-{name.replace(' ', '-')}", marks=p.marks)
    for p in STREAMING if not p.values[0].recurrent for name in ("step", "masked step")])
def test_streaming_through_the_protocol(entry, name, exported):
    """A layer of the stateful protocol streams on its own, by frames or by
    its chunks, alone and behind a mask (a file each), and gives Keras'
    outputs; a length that is not a number of chunks is refused."""
    chunk = getattr(entry.make_layer(), "streaming_chunk_length", None) or 1
    x = padded_input(entry, entry.make_input(batch=3, length=3 * chunk))
    model, path, summary = exported(entry, name)
    assert_builtins_only(summary)
    np.testing.assert_allclose(run_streaming(path, x)["output"], np.asarray(model(x)), atol=ATOL, err_msg=name)
    if chunk > 1:
        with pytest.raises(ValueError, match=f"multiple of {chunk}"):
            run_streaming(path, x[:, :-1])


@pytest.mark.check
@pytest.mark.parametrize("entry", [e for e in ENTRIES if not e.recurrent and e not in PROTOCOL_ENTRIES],
                         ids=lambda e: e.id)
def test_streaming_in_front_of_a_recurrent_layer(entry, tmp_path):
    """A layer that acts on each step alone (`acts_per_step`) streams in
    front of a recurrent layer and gives Keras' outputs; any other layer
    makes the export refuse to stream, naming it."""
    layer = entry.make_layer()
    per_step = bool(getattr(layer, "acts_per_step", False))
    inputs = entry.structured(entry.make_inputs(dynamic_length=per_step))
    h = as_list(layer(inputs))
    h = [keras.layers.RNN(keras.layers.LSTMCell(3), return_sequences=True)(o) if len(o.shape) == 3 else o
         for o in h]
    model = keras.Model(inputs, h if len(h) > 1 else h[0])
    plan = plan_export(model)
    if not per_step:
        assert f"'{layer.name}'" in plan.streaming_refusal
        return
    assert plan.can_stream, plan.streaming_refusal
    path = tmp_path / "step.tflite"
    assert_builtins_only(export_tflite(model, path, streaming=True))
    x = entry.make_input(batch=2, length=5)
    np.testing.assert_allclose(run_streaming(path, x)["output"], np.asarray(model(x)), atol=ATOL)
