"""Exported files judged as a device runs them: every entry's file in every
mode it exports (whole sequences, the streaming step, the chunked step),
each run in a fresh LiteRT interpreter with its default delegates (XNNPACK
on), batch 1 and 3, and a structural check of every subgraph.

Why fresh interpreters, many times: a RESHAPE whose target shape is
computed at run time inside a loop body once made a fresh interpreter's
first invoke read a stale buffer in some runs (batch 1, XNNPACK on) and
answer wrong, the same wrong bytes each time; a reused interpreter, or a
second invoke, never showed it. `FRESH_RUNS` runs catch a 5% rate with a
chance of 95%.
"""

import math

import numpy as np
import pytest

from keras_relrec.export import run_sequence
from keras_relrec.export import run_streaming
from keras_relrec.export.tflite import static_reshapes
from tests.contract.conformance import ATOL
from tests.contract.conformance import each_input
from tests.contract.conformance import feed
from tests.contract.conformance import keras_outputs
from tests.contract.conformance import lite_outputs
from tests.contract.registry import ENTRIES
from tests.contract.registry import PROTOCOL_ENTRIES

# The files of test_export.py, converted once (conftest.py's `exported`).
pytestmark = [pytest.mark.check, pytest.mark.xdist_group("exports")]
FRESH_RUNS = 60
LENGTHS = (1, 2, 7, 50)
BATCHES = (1, 3)


def exported_modes(entry):
    """The modes an entry exports: "sequence" for every entry, "step" for a
    recurrent layer and a layer of the stateful protocol ("chunked step"
    where its step takes a chunk of frames)."""
    modes = ["sequence"]
    if entry.recurrent:
        modes.append("step")
    elif entry in PROTOCOL_ENTRIES:
        chunk = getattr(entry.make_layer(), "streaming_chunk_length", None) or 1
        modes.append("chunked step" if chunk > 1 else "step")
    return modes


CASES = [(entry, mode) for entry in ENTRIES for mode in exported_modes(entry)]


def lengths_for(entry, mode):
    """The sequence lengths a mode takes: every one of `LENGTHS` where the
    length is free, rounded up to whole chunks for a chunked step, the
    entry's own where the file fixes it."""
    if mode == "chunked step":
        chunk = entry.make_layer().streaming_chunk_length
        return sorted({chunk * math.ceil(n / chunk) for n in LENGTHS})
    if entry.recurrent or mode == "step":
        return LENGTHS
    return (None,)


@pytest.mark.parametrize(("entry", "mode"), CASES, ids=[f"{e.id}-{m.replace(' ', '-')}" for e, m in CASES])
def test_fresh_interpreters_give_keras_outputs(entry, mode, exported):
    streaming = mode != "sequence"
    model, path, summary = exported(entry, "step" if streaming else "sequence")
    content = path.read_bytes()
    # Structural: no RESHAPE is sized at run time where one size alone is
    # unknown, in any subgraph (loop bodies included).
    assert static_reshapes.runtime_shaped(content) == []
    assert summary["runtime_shaped_reshapes"] == 0
    for length in lengths_for(entry, mode):
        x = entry.make_input(batch=max(BATCHES), length=length)
        if streaming:
            want = [np.asarray(model(x))]
        else:
            want = keras_outputs(entry, model, x)
        for batch in BATCHES:
            rows = each_input(entry, x, lambda v, b=batch: v[:b])
            expected = [w[:batch] for w in want]
            errors = []
            for _ in range(FRESH_RUNS):
                # The bytes, not an interpreter: each run builds a fresh one.
                if streaming:
                    got = [run_streaming(content, rows)["output"]]
                else:
                    got = lite_outputs(run_sequence(content, feed(entry, rows)), len(expected))
                errors.append(max(float(np.abs(g - e).max()) for g, e in zip(got, expected)))
            wrong = sum(e > ATOL for e in errors)
            assert wrong == 0, (
                f"{wrong} of {FRESH_RUNS} fresh runs wrong (max error {max(errors):.3g}) at batch {batch}, "
                f"length {length}"
            )
