"""What the contract's property modules share: the parametrisations over
`registry.ENTRIES`, the models an entry is checked in, and the comparisons.

The contract is one module per property (as Sonnet's `src/conformance/`),
each over the one list of entries in `registry.py`:

- `test_keras.py`: configuration, symbolic and eager calls, gradients, XLA
  (one entry per family in `make test`, every entry in `make check`),
  float64 and mixed precision, state, dropout (`make test`);
- `test_masking.py`, `test_bad_input.py`: masks, and mistakes refused early
  (`make test`);
- `test_saving.py`: `.keras` files (`make test`) and SavedModel (`make check`);
- `test_export.py`: LiteRT, whole sequences and streaming (one entry per
  family in `make test`, every entry in `make check`);
- `test_exported_files_on_device.py`, `test_micro.py`: fresh interpreters
  as a device runs them, and TensorFlow Lite for Microcontrollers
  (`make check`);
- `test_backends.py`: outputs and a training step against golden arrays, on
  TensorFlow, on its portable kernels and on JAX (`make check`);
- `test_segment_lengths.py`: calls shorter or longer than a segment
  (`make test`, and on JAX in `make check`);
- `test_distribution.py`: training on two devices of one process (`make
  check`).

Tolerances are 1e-5 for every comparison of float32 outputs.
"""

import keras
import numpy as np
import pytest

from tests.contract.registry import DROPOUT_ENTRIES
from tests.contract.registry import ENTRIES
from tests.contract.registry import MASK_ENTRIES
from tests.contract.registry import PROTOCOL_ENTRIES
from tests.contract.registry import RECURRENT_ENTRIES
from tests.layers.float64 import float64_policy

ATOL = 1e-5


entries = pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.id)
recurrent_entries = pytest.mark.parametrize(
    "entry", RECURRENT_ENTRIES, ids=lambda e: e.id
)
dropout_entries = pytest.mark.parametrize("entry", DROPOUT_ENTRIES, ids=lambda e: e.id)
mask_entries = pytest.mark.parametrize("entry", MASK_ENTRIES, ids=lambda e: e.id)


# Everything that reads a mask: recurrent entries and mask-taking layers.
masking_entries = pytest.mark.parametrize(
    "entry", RECURRENT_ENTRIES + MASK_ENTRIES, ids=lambda e: e.id
)


def as_list(x):
    """A layer's inputs or outputs as a list (one entry for a single one)."""
    return list(x) if isinstance(x, (list, tuple)) else [x]


def assert_close(got, want, atol=ATOL, err_msg=""):
    """Outputs (one tensor or a list) equal within `atol`, one by one."""
    got, want = as_list(got), as_list(want)
    assert len(got) == len(want), (len(got), len(want))
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), atol=atol, err_msg=f"output {k} {err_msg}")


def each_input(entry, x, change):
    """`change` applied to every input of `x`."""
    return entry.structured([change(v) for v in as_list(x)])


def first_input(entry, x, value):
    """`x` with its first input replaced by `value`."""
    return entry.structured([value] + as_list(x)[1:])


def target_for(model, x, seed=1):
    rng = np.random.default_rng(seed)
    targets = [rng.normal(size=out.shape).astype("float32") for out in as_list(model(x))]
    return targets if isinstance(model.output, (list, tuple)) else targets[0]


def behind_a_dense(entry):
    """The layer behind a `Dense` per input, with weights before it to take
    gradients: with zero biases, all-zero inputs (blank pixels, silence)
    reach it as all-zero rows (`zeros_step_finite`)."""
    inputs = entry.make_inputs(names=False)
    # Token ids go in as they are.
    dense = [x if x.dtype == "int32" else keras.layers.Dense(shape[-1], kernel_initializer="glorot_uniform")(x)
             for x, shape in zip(inputs, entry.input_shapes)]
    return keras.Model(entry.structured(inputs), entry.make_layer()(entry.structured(dense)))


def sample_mask(x):
    """Sample 0's last two steps and sample 1's second are masked."""
    mask = np.ones(x.shape[:2], bool)
    mask[0, -2:] = False
    mask[1, 1] = False
    return mask


def masked_model(entry):
    """The entry's layer behind a `Masking` of zeros on every input (every
    step of a recurrent layer's output)."""
    inputs = entry.make_inputs(names=False)
    masked = entry.structured([keras.layers.Masking(0.0)(x) for x in inputs])
    overrides = {"return_sequences": True} if entry.recurrent else {}
    return keras.Model(entry.structured(inputs), entry.make_layer(**overrides)(masked))


def padded_input(entry, x, pad=2):
    """Sample 0 ends with `pad` padded steps, sample 1 has one in the middle
    (in every input)."""
    def padded(x):
        x = x.copy()
        x[0, -pad:] = 0.0
        x[1, 1] = 0.0
        return x
    return each_input(entry, x, padded)


# By the config, not the signature: a preset passes `stateful` on in its
# **kwargs.
STATEFUL_ENTRIES = RECURRENT_ENTRIES + [e for e in PROTOCOL_ENTRIES if "stateful" in e.make_layer().get_config()]


# TFLite: builtins only for every layer; sequence mode with dynamic batch and
# length, and frame-by-frame streaming, for every recurrent one.
def assert_builtins_only(summary):
    assert not [op for op in summary["ops"] if op.startswith("CUSTOM")], summary["ops"]


def float64_copy(entry, model, dynamic_length):
    """The same model computed in float64, for the float32 noise floor."""
    with float64_policy():
        copy = entry.make_model(dynamic_length=dynamic_length)
    copy.set_weights(model.get_weights())
    return copy


def keras_outputs(entry, model, x):
    """The model's outputs for `x`, as arrays: a recurrent layer's through
    `predict` (one trace serves every length, where an eager loop over 500
    steps takes seconds), any other's eagerly (cheaper than a trace)."""
    outputs = model.predict(x, verbose=0) if entry.recurrent else model(x)
    return [np.asarray(o) for o in as_list(outputs)]


def feed(entry, x):
    """What the runners take: the array, or a dict by input name."""
    return dict(zip(entry.input_names, x)) if isinstance(x, list) else x


def lite_outputs(result, count):
    """The runners' outputs in the model's order."""
    return [result["output"]] if count == 1 else [result[f"output_{k}"] for k in range(count)]


def streaming_models(entry):
    """The models every recurrent entry must stream: the layer alone, behind
    a mask, and (for a cell) two of it stacked behind a mask, whose output is
    the second cell's and not the first state."""
    models = {"alone": entry.make_model(dynamic_length=True, return_sequences=True)}
    shape = (None,) + entry.input_shape[1:]
    inputs = keras.Input(shape, name="sequence")
    masked = keras.layers.Masking(0.0)(inputs)
    models["masked"] = keras.Model(inputs, entry.make_layer(return_sequences=True)(masked))
    if entry.is_cell:
        cells = [entry.cls(**entry.kwargs), entry.cls(**entry.kwargs)]
        stack = keras.layers.RNN(cells, return_sequences=True)
        models["masked stack"] = keras.Model(inputs, stack(masked))
    return models


def protocol_model(entry, masked):
    """The layer of a protocol entry alone, behind a mask if `masked`."""
    inputs = keras.Input((None,) + entry.input_shape[1:], name="sequence")
    h = keras.layers.Masking(0.0)(inputs) if masked else inputs
    return keras.Model(inputs, entry.make_layer()(h))


# The files the export checks share (the `exported` fixture of conftest.py):
# whole sequences, and a recurrent or protocol layer's step, alone, behind a
# mask, and (for a cell) two of it stacked behind a mask.
STEP_MODELS = {"step": "alone", "masked step": "masked", "masked stack step": "masked stack"}


def exported_model(entry, kind):
    """The model of an exported file of `kind` ("sequence" or a key of
    `STEP_MODELS`) and `export_tflite`'s options for it."""
    if kind == "sequence":
        return entry.make_model(dynamic_length=entry.recurrent), {"dynamic_length": entry.recurrent}
    if entry.recurrent:
        return streaming_models(entry)[STEP_MODELS[kind]], {"streaming": True}
    return protocol_model(entry, masked=kind != "step"), {"streaming": True}


def family(entry):
    """The folder of keras_relrec.layers the entry's class lives in."""
    return entry.cls.__module__.split(".")[2]


# The entries whose XLA programs compile for longer than make test's time
# limit on two workers (the segment cache's recall and summaries, the
# relational memory's attention over slots in a loop): their compiled
# training and calls of several lengths are in make check, their XLA
# predictions in make test; TransformerXL's entry holds the segment
# recurrence to the same properties in make test, but for XLA training.
SLOW_TO_COMPILE = {"RelationalMemoryCell", "SegmentRecurrence", "SegmentCacheTransformer",
                   "SegmentCacheTransformer-standard-bilstm"}
# XLA training of the Transformer-XL, the R-Transformer block and the
# interaction transformer too: XLA's compile of their unrolled segments or
# windows, forward and backward, alone takes about the limit on the
# development machine (10-16 s in a make test of two workers), though their
# graph training and XLA predictions are quick.
SLOW_TO_TRAIN_COMPILED = SLOW_TO_COMPILE | {"TransformerXL", "RTransformerBlock", "InteractionTransformer"}
# XLA predictions of the segment cache whose summaries are a BiLSTM (11.7 s
# there); the plain segment cache's keep the family's in make test.
SLOW_TO_PREDICT_COMPILED = {"SegmentCacheTransformer-standard-bilstm"}
# LiteRT files of the relational memory's whole sequence and of its
# two-cell stack: a conversion and two traces of its attention over slots
# each (10.6-12 s); its one-cell steps keep the family's in make test.
SLOW_TO_EXPORT = {"RelationalMemoryCell"}


def firsts_of_families(candidates):
    """The first entry of each family among `candidates`."""
    firsts = {}
    for entry in candidates:
        firsts.setdefault(family(entry), entry)
    return list(firsts.values())


def one_per_family(candidates, others=pytest.mark.check, slow=frozenset()):
    """`candidates` as pytest parameters, the first of each family as they
    are, the others marked `others`: `check` (run by `make check`) for a
    test of `make test`, `slow` (`make test-slow`) for one of `make check`
    whose every entry costs minutes in all. An entry whose id is in `slow`
    is never its family's first."""
    firsts = firsts_of_families([e for e in candidates if e.id not in slow])
    return [pytest.param(e, id=e.id, marks=() if any(e is f for f in firsts) else others) for e in candidates]


def micro_model(entry, masked):
    """What a microcontroller runs of the entry, behind a mask if `masked`:
    a stateful layer's step, any other layer's whole sequence."""
    if entry.recurrent:
        return streaming_models(entry)["masked" if masked else "alone"]
    if entry in PROTOCOL_ENTRIES:
        return protocol_model(entry, masked)
    inputs = entry.make_inputs()
    masked_inputs = [keras.layers.Masking(0.0)(x) for x in inputs] if masked else inputs
    return keras.Model(entry.structured(inputs), entry.make_layer()(entry.structured(masked_inputs)))


def sgd_mse(model, **compile_kwargs):
    """`model`, compiled for SGD (learning rate 0.1) on the MSE. Plain SGD
    and a loss without metrics make no variables in the first step's trace,
    so that step is traced once without `build_training_state` (which would
    cost a symbolic pass over the model for nothing)."""
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse", **compile_kwargs)
    return model


def fit_one_step(model, x, y, **compile_kwargs):
    """The weights after one step of `sgd_mse`."""
    sgd_mse(model, **compile_kwargs).train_on_batch(x, y)
    return model.get_weights()


def zeros_step_finite(model, weights, x, y):
    """Whether a step on all-zero inputs (blank pixels, silence) leaves the
    weights finite, for a model that `fit_one_step` compiled, from its
    fresh `weights`: the `Dense` in front (`behind_a_dense`) has zero
    biases, so that the layer sees all-zero rows, and the layer's own zero-initialised weights (biases, norms'
    offsets) are still zero, so that rows inside it are constant too. No
    sqrt or norm of a constant row may give 0/0 (JAX's sqrt gradient at 0
    times 0 is NaN where TensorFlow's is not). Same shapes, so the compiled
    step is reused."""
    model.set_weights(weights)
    model.train_on_batch(keras.tree.map_structure(np.zeros_like, x), y)
    return all(np.all(np.isfinite(w)) for w in model.get_weights())
