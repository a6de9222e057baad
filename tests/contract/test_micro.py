"""TensorFlow Lite for Microcontrollers, for every entry: exported with a
fixed batch and shapes in one subgraph, the file runs in the tflite-micro
interpreter and gives Keras' outputs, alone and behind a mask; what TFLM
cannot run is refused at export, naming the op and the layer (`make
check`)."""

import functools

import pytest

from keras_relrec.export import export_tflite
from keras_relrec.export import micro
from keras_relrec.export.export_error import ExportError
from tests.contract.conformance import ATOL
from tests.contract.conformance import as_list
from tests.contract.conformance import assert_close
from tests.contract.conformance import feed
from tests.contract.conformance import lite_outputs
from tests.contract.conformance import micro_model
from tests.contract.conformance import padded_input
from tests.contract.registry import ENTRIES
from tests.contract.registry import PROTOCOL_ENTRIES

pytestmark = pytest.mark.check

# What TensorFlow Lite for Microcontrollers cannot run, and the op it lacks,
# which the export names with the layer: the segment cache's recall (a
# top-k), and behind a mask, the valid steps a local recurrence moves to the
# front of each window (an argsort, a top-k in TFLite).
MICRO_REFUSALS = {
    "SegmentCacheTransformer": ("TOPK_V2", "TOPK_V2"),
    "SegmentCacheTransformer-standard-bilstm": ("TOPK_V2", "TOPK_V2"),
    "SegmentRecurrence": ("TOPK_V2", "TOPK_V2"),
    "LocalRecurrence": (None, "TOPK_V2"),
    "LocalRecurrence-chunked-peephole": (None, "TOPK_V2"),
    "RTransformerBlock": (None, "TOPK_V2"),
    "InteractionTransformer": (None, "TOPK_V2"),
}


# Behind a mask where the layer reads one (the harder case), alone where it
# does not, and alone too where TFLM cannot run it behind a mask.
MICRO_CASES = [(e, e.recurrent or e.takes_mask or e in PROTOCOL_ENTRIES) for e in ENTRIES] + [
    (e, False) for e in ENTRIES if MICRO_REFUSALS.get(e.id, (None, None)) == (None, "TOPK_V2")
]


@pytest.mark.parametrize(("entry", "masked"), MICRO_CASES,
                         ids=[e.id + ("-masked" if m else "") for e, m in MICRO_CASES])
def test_tflite_micro(entry, masked, tmp_path):
    """Exported for microcontrollers (fixed batch and shapes, one subgraph),
    the file runs in the tflite-micro interpreter and gives Keras' outputs
    within 1e-5, alone and behind a mask; what TFLM cannot run is refused at
    export, with the op it lacks and the layer named."""
    model = micro_model(entry, masked)
    streams = entry.recurrent or entry in PROTOCOL_ENTRIES
    path = tmp_path / "micro.tflite"
    export = functools.partial(export_tflite, model, path, streaming=streams, target="micro", batch_size=2)
    lacked = MICRO_REFUSALS.get(entry.id, (None, None))[int(masked)]
    if lacked is not None:
        lacks = f"needs the op {lacked}, which TensorFlow Lite for Microcontrollers lacks"
        # And what to change: the recall's top-k goes with a FIFO memory,
        # the sort behind a mask with the mask.
        fix = "memory=FifoMemory" if MICRO_REFUSALS[entry.id][0] else "give it no mask"
        with pytest.raises(ExportError,
                           match=rf"layer '{model.layers[-1].name}' \({entry.cls.__name__}\) {lacks}; .*{fix}"):
            export()
        return
    summary = export()
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
