"""The contract every public layer and cell is held to.

Each check is parametrised over `registry.ENTRIES`; the cell-only checks over
`registry.RECURRENT_ENTRIES`. Tolerances are the issue's: 1e-5 for every
comparison of float32 outputs.
"""

import copy
import functools
import inspect
import itertools
import operator
import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_relrec.export import endpoints
from keras_relrec.export import export_tflite
from keras_relrec.export import micro
from keras_relrec.export import plan_export
from keras_relrec.export import run_sequence
from keras_relrec.export import run_streaming
from keras_relrec.export.export_error import ExportError
from keras_relrec.utils.registration import PUBLIC_LAYERS
from tests.contract.backend_worker import fit_one_step
from tests.contract.backend_worker import pack
from tests.contract.backend_worker import sgd_mse
from tests.contract.backend_worker import unpack
from tests.contract.backend_worker import zeros_step_finite
from tests.contract.registry import DROPOUT_ENTRIES
from tests.contract.registry import ENTRIES
from tests.contract.registry import MASK_ENTRIES
from tests.contract.registry import PROTOCOL_ENTRIES
from tests.contract.registry import RECURRENT_ENTRIES
from tests.export.saved_model_stream import ungated_state_reads
from tests.layers.float64 import float64_policy

ATOL = 1e-5
HERE = pathlib.Path(__file__).parent
ROOT = HERE.parent.parent

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


def test_every_public_layer_has_an_entry():
    assert {e.cls for e in ENTRIES} == set(PUBLIC_LAYERS.values())


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


# 1. Configuration round trip.
@entries
def test_config_round_trip(entry):
    layer = entry.make_layer()
    config = layer.get_config()
    # Keras' RNN.from_config consumes its argument, hence the copy.
    clone = layer.__class__.from_config(copy.deepcopy(config))
    assert clone.get_config() == config

    model = entry.make_model()
    clone = keras.Model.from_config(model.get_config())
    clone.set_weights(model.get_weights())
    x = entry.make_input()
    assert_close(clone(x), model(x))

    # The public class itself round-trips too (for a cell, not just the RNN).
    own = entry.cls(**entry.kwargs)
    assert entry.cls.from_config(own.get_config()).get_config() == own.get_config()


# 1b. Weights drawn at random start distinct: one initializer instance handed
# to several weights draws the same values for each (an unseeded Keras 3
# initializer returns the same values on every call).
@entries
def test_initial_weights_are_distinct(entry):
    model = entry.make_model()
    if not model.weights:
        # A layer without weights (LocalFeatures' windows) draws nothing.
        return
    values = [(w.path, np.asarray(w)) for w in model.weights]
    drawn = [(path, a) for path, a in values if a.size > 1 and not np.all(a == a.flat[0])]
    assert drawn, "the entry should draw some weights at random"
    for (path_a, a), (path_b, b) in itertools.combinations(drawn, 2):
        if a.shape == b.shape:
            assert not np.array_equal(a, b), f"{path_a} and {path_b} start equal"


# 2. `.keras` save and safe-mode load with no custom objects.
@entries
def test_keras_file_round_trip(entry, tmp_path):
    model = entry.make_model()
    x = entry.make_input()
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert_close(loaded(x), model(x), atol=0)


# 3. Symbolic and eager calls agree; compute_output_shape is the real shape.
@entries
def test_symbolic_eager_and_output_shape(entry):
    model = entry.make_model()
    layer = model.layers[-1]
    x = entry.make_input()
    eager = layer(x)
    assert_close(model(x), eager)
    assert_close(model.predict_on_batch(x), eager)
    shapes = layer.compute_output_shape(entry.structured([v.shape for v in as_list(x)]))
    if not isinstance(eager, (list, tuple)):
        shapes = [shapes]
    assert [tuple(s) for s in shapes] == [tuple(e.shape) for e in as_list(eager)]
    assert [tuple(o.shape) for o in as_list(model.output)] == [(None,) + tuple(e.shape[1:]) for e in as_list(eager)]
    if entry.is_cell:
        step_shape = (x.shape[0], x.shape[-1])
        out_shape, _ = layer.cell.compute_output_shape(step_shape)
        assert tuple(out_shape) == (x.shape[0], eager.shape[-1])


# 4. Gradients reach every trainable weight (that a fit step changes every
# weight is checked with XLA, in 5).
@entries
def test_gradients_reach_every_weight(entry):
    model = entry.make_model()
    x = entry.make_input()
    y = target_for(model, x)
    with tf.GradientTape() as tape:
        loss = sum(tf.reduce_mean((out - want) ** 2) for out, want in zip(as_list(model(x, training=True)),
                                                                           as_list(y)))
    grads = tape.gradient(loss, model.trainable_weights)
    for w, g in zip(model.trainable_weights, grads):
        assert g is not None, w.path
        assert float(tf.reduce_max(tf.abs(g))) > 0.0, w.path


def behind_a_dense(entry):
    """The layer behind a `Dense` per input, with weights before it to take
    gradients: with zero biases, all-zero inputs (blank pixels, silence)
    reach it as all-zero rows (`zeros_step_finite`)."""
    inputs = entry.make_inputs(names=False)
    dense = [keras.layers.Dense(shape[-1], kernel_initializer="glorot_uniform")(x)
             for x, shape in zip(inputs, entry.input_shapes)]
    return keras.Model(entry.structured(inputs), entry.make_layer()(entry.structured(dense)))


# 5. XLA: predictions, and training steps that change every weight.
@entries
def test_jit_compile_matches_eager(entry):
    model = sgd_mse(entry.make_model(), jit_compile=True)
    x = entry.make_input(batch=4)
    # `fit` and `predict` feed batches of unknown size: XLA must compile
    # the steps with a dynamic batch dimension, as in real use. One
    # prediction function serves before and after the training step.
    assert_close(model.predict(x, batch_size=2, verbose=0), model(x))
    y = target_for(model, x)
    before = [w.copy() for w in model.get_weights()]
    model.fit(x, y, batch_size=2, epochs=1, verbose=0)
    # Every weight changes. (Graph training without XLA, Keras' default on
    # CPU, runs in the portable rerun, its weights compared with an eager
    # step's.)
    for w, (b, a) in zip(model.weights, zip(before, model.get_weights())):
        assert not np.array_equal(a, b), f"{w.path} did not change"
    assert_close(model.predict(x, batch_size=2, verbose=0), model(x))


# 6a. float64 all the way: under the float64 policy every weight, state and
# output is float64 (a float32 detour that shows in a dtype fails here for
# every layer; the families' NumPy tests hold the values to 1e-10).
@entries
def test_float64_policy_is_float64_all_the_way(entry):
    with float64_policy():
        model = entry.make_model()
        outputs = model(each_input(entry, entry.make_input(), lambda v: v.astype("float64")))
    assert all(w.dtype == "float64" for w in model.weights), [(w.path, w.dtype) for w in model.weights]
    for o in as_list(outputs):
        assert keras.backend.standardize_dtype(o.dtype) == "float64"


# 6. Mixed precision.
@entries
@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_mixed_precision(entry, policy):
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        model = entry.make_model()
        x = entry.make_input()
        out = model(x)
        compute = keras.config.dtype_policy().compute_dtype
        y = target_for(model, x)
        # Eagerly: dtypes are the question here, and tracing a graph for
        # one step costs more than the step (graph and XLA training are
        # checked in float32; the layers cast the same way in a graph).
        fit_one_step(model, x, y, run_eagerly=True)
    finally:
        keras.config.set_dtype_policy(previous)
    assert all(w.dtype == "float32" for w in model.weights)
    for o in as_list(out):
        assert keras.backend.standardize_dtype(o.dtype) == compute
        assert np.all(np.isfinite(np.asarray(tf.cast(o, tf.float32))))
    assert all(np.all(np.isfinite(w)) for w in model.get_weights())


# 7. SavedModel export.
@entries
def test_saved_model_export(entry, tmp_path):
    model = entry.make_model()
    x = entry.make_input()
    model.export(str(tmp_path / "sm"), format="tf_saved_model", verbose=False)
    reloaded = tf.saved_model.load(str(tmp_path / "sm"))
    assert_close(reloaded.serve(x), model(x))


# 8. Other backends and kernels, each in one subprocess for all entries: JAX,
# and TensorFlow with its portable CPU kernels (oneDNN off, as TensorFlow runs
# on CPUs it does not tune for, such as AMD's: some ops, like Conv2D in NCHW,
# exist only in oneDNN). A layer must run wherever TensorFlow runs. The
# fixture is computed once per process (session scope: a module fixture would
# be computed again each time a worker comes back to this module), and its
# tests form one xdist group: one worker computes it, not each.
WORKERS = {
    "jax": {"KERAS_BACKEND": "jax"},
    "portable": {"KERAS_BACKEND": "tensorflow", "TF_ENABLE_ONEDNN_OPTS": "0"},
}
# Every worker compares the outputs and a training step of the layer behind
# a `Dense` (gradients reach the layer's inputs too). JAX also compares them
# with masks, and takes a step on constant inputs (sqrt's gradient at 0),
# as TensorFlow does in this process; the portable rerun does neither: its
# question is whether every op has a kernel without oneDNN, and masking adds
# only selects, which every build has, while the gradient formulas are the
# same whatever the kernels. Dropout inside the loop (masks drawn inside
# `lax.scan`) runs on JAX only; the dropout tests cover TensorFlow.
JAX_ONLY = ["jax"]


@pytest.fixture(scope="session")
def backend_results(tmp_path_factory):
    # A session fixture is set up before the tests' own seeding: without
    # this the weights would depend on which test ran before it.
    keras.utils.set_random_seed(0)
    folder = tmp_path_factory.mktemp("backends")
    expected = {}
    for entry in ENTRIES:
        name = entry.id
        model = behind_a_dense(entry)
        x = entry.make_input(batch=4, seed=3)
        y = target_for(model, x)
        model.save(folder / f"{name}.keras")
        case = {**pack("x", x), **pack("y", y)}
        record = {"outputs": [np.asarray(o) for o in as_list(model(x))]}
        fresh = model.get_weights()
        # Eagerly: the same step as a traced one, for less than the trace.
        record["fit_weights"] = fit_one_step(model, x, y, run_eagerly=True)
        record["zeros_step_finite"] = zeros_step_finite(model, fresh, x, y)
        if entry.recurrent or entry.takes_mask:
            masked = masked_model(entry)
            x_masked = padded_input(entry, x)
            case.update(pack("x_masked", x_masked))
            # The outputs and a training step through the masked steps, every
            # output in the loss (flattened: Keras would weigh the loss by a
            # mask of another rank than the outputs' for feature maps).
            flat = [keras.layers.Reshape((-1,))(o) for o in as_list(masked.output)]
            flat = keras.Model(masked.input, flat[0] if len(flat) == 1 else keras.layers.Concatenate()(flat))
            flat.save(folder / f"{name}.masked.keras")
            record["masked_outputs"] = np.asarray(flat(x_masked))
            y_masked = target_for(flat, x_masked)
            case.update(pack("y_masked", y_masked))
            record["masked_fit_weights"] = fit_one_step(flat, x_masked, y_masked, run_eagerly=True)
            if entry.recurrent and entry.dropout_kwargs:
                entry.make_model(**entry.dropout_kwargs).save(
                    folder / f"{name}.dropout.keras"
                )
        np.savez(folder / f"{name}.tf.npz", **case)
        expected[name] = record
    got = {}
    for suffix, variables in WORKERS.items():
        env = {**os.environ, **variables, "PYTHONPATH": str(ROOT)}
        subprocess.run(
            [sys.executable, str(HERE / "backend_worker.py"), str(folder), suffix]
            + (["--jax-checks"] if suffix in JAX_ONLY else []),
            env=env,
            check=True,
        )
        got[suffix] = {e.id: dict(np.load(folder / f"{e.id}.{suffix}.npz")) for e in ENTRIES}
    return expected, got


@pytest.mark.xdist_group("other_backends")
@entries
@pytest.mark.parametrize("worker", list(WORKERS))
def test_other_backends_match_tensorflow(entry, worker, backend_results):
    expected, got = backend_results
    want, have = expected[entry.id], got[worker][entry.id]
    assert_close(unpack(have, "outputs"), want["outputs"])
    for i, w in enumerate(want["fit_weights"]):
        np.testing.assert_allclose(have[f"fit_weight_{i}"], w, atol=ATOL)


@pytest.mark.xdist_group("other_backends")
@entries
@pytest.mark.parametrize("worker", ["tensorflow"] + JAX_ONLY)
def test_other_backends_train_on_constant_inputs(entry, worker, backend_results):
    expected, got = backend_results
    assert bool((expected if worker == "tensorflow" else got[worker])[entry.id]["zeros_step_finite"])


@pytest.mark.xdist_group("other_backends")
@masking_entries
@pytest.mark.parametrize("worker", JAX_ONLY)
def test_other_backends_masking(entry, worker, backend_results):
    expected, got = backend_results
    want, have = expected[entry.id], got[worker][entry.id]
    assert_close(have["masked_outputs"], want["masked_outputs"])
    for i, w in enumerate(want["masked_fit_weights"]):
        np.testing.assert_allclose(have[f"masked_fit_weight_{i}"], w, atol=ATOL, err_msg=f"weight {i}")


@pytest.mark.xdist_group("other_backends")
@dropout_entries
@pytest.mark.parametrize("worker", JAX_ONLY)
def test_other_backends_dropout(entry, worker, backend_results):
    _, got = backend_results
    have = got[worker][entry.id]
    assert np.all(np.isfinite(have["dropout_train"]))
    assert not np.allclose(have["dropout_train"], have["dropout_infer"])


# 9. Invalid arguments and inputs.
@entries
def test_invalid_constructor_arguments(entry):
    for overrides, name in entry.bad_kwargs:
        with pytest.raises(ValueError, match=name):
            entry.cls(**{**entry.kwargs, **overrides})


@entries
def test_invalid_input_shapes(entry):
    shape = entry.input_shapes[0]
    # Wrong rank (batch, features) of the first input, when the layer is
    # first built.
    others = entry.make_inputs(names=False)[1:]
    with pytest.raises(ValueError, match=entry.bad_rank_match):
        entry.make_layer()(entry.structured([keras.Input(shape[-1:])] + others))
    # Wrong size of the axis the layer was built for (the features, unless
    # the entry says otherwise).
    layer = entry.make_layer()
    layer(entry.make_input())
    axis = entry.fixed_axis % (len(shape) + 1) - 1  # within one example
    wrong = list(shape)
    wrong[axis] += 1
    with pytest.raises(ValueError, match=f"expected axis .* to have value {shape[axis]}"):
        layer(first_input(entry, entry.make_input(batch=2), np.zeros((2,) + tuple(wrong), "float32")))


def assert_names_the_shape(error):
    assert "shape" in str(error) or "ndim" in str(error), str(error)


@entries
def test_call_time_inputs(entry):
    """Eager calls with inputs of the wrong rank, an empty batch, no steps,
    integer values or initial states of another batch size: a clear
    `ValueError`, or the right answer, never a backend error or a silent
    broadcast."""
    x = entry.make_input(batch=2)
    first = as_list(x)[0]
    rank = first.ndim
    wrong_ranks = [first_input(entry, x, bad) for bad in (first[:, 0], first[..., None])
                   if bad.ndim not in entry.other_ranks]
    # The wrong rank (of the first input) at the first call: the layer's
    # own message.
    for bad in wrong_ranks:
        with pytest.raises(ValueError, match=entry.bad_rank_match):
            entry.make_layer()(bad)
    layer = entry.make_layer()
    want = [np.asarray(o) for o in as_list(layer(x))]
    # The wrong rank once built. Inside keras.layers.RNN a cell sees one step
    # at a time: Keras' RNN slices a sequence of one axis too few before the
    # cell can look at it, and fails in the backend (documented in README).
    for bad in wrong_ranks:
        if entry.is_cell and as_list(bad)[0].ndim < rank:
            with pytest.raises(Exception):  # noqa: B017
                layer(bad)
        else:
            with pytest.raises(ValueError) as info:
                layer(bad)
            assert_names_the_shape(info.value)
    # An empty batch.
    empty = as_list(layer(each_input(entry, x, lambda v: v[:0])))
    assert [tuple(e.shape) for e in empty] == [(0,) + w.shape[1:] for w in want]
    no_steps = each_input(entry, x, lambda v: v[:, :0])
    # No steps: refused by the layer, or (where the layer takes any length)
    # an output of the right shape. keras.layers.RNN itself fails on an
    # empty sequence, before a cell sees it.
    if entry.fixed_length:
        with pytest.raises(ValueError) as info:
            layer(no_steps)
        assert_names_the_shape(info.value)
        with pytest.raises(ValueError, match="at least one"):
            entry.make_layer()(no_steps)
    elif entry.is_cell:
        with pytest.raises(Exception):  # noqa: B017
            layer(no_steps)
    elif entry.recurrent:
        with pytest.raises(ValueError, match="at least one step"):
            layer(no_steps)
    else:
        none = as_list(layer(no_steps))
        shapes = layer.compute_output_shape(entry.structured([v.shape for v in as_list(no_steps)]))
        assert [tuple(n.shape) for n in none] == [tuple(s) for s in (shapes if len(none) > 1 else [shapes])]
        assert all(np.all(np.isfinite(n)) for n in none)
    # Integer inputs are features like any other.
    integers = each_input(entry, x, lambda v: np.round(v * 2))
    assert_close(layer(each_input(entry, integers, lambda v: v.astype("int32"))),
                 layer(each_input(entry, integers, lambda v: v.astype("float32"))))
    # Initial states of another batch size are refused, not broadcast.
    if entry.recurrent:
        states = [np.ones((1,) + tuple(s.shape[1:]), "float32") for s in layer.get_initial_state(1)]
        with pytest.raises(ValueError, match="batch size"):
            layer(x, initial_state=states)


@mask_entries
def test_masked_steps_change_nothing(entry):
    """What a masked step holds does not reach any valid output, and the
    mask is passed on (or consumed, for a pooled output)."""
    layer = entry.make_layer()
    x = entry.make_input(batch=3)
    mask = each_input(entry, x, sample_mask)
    rng = np.random.default_rng(5)

    def noisy(v, m):
        v = v.copy()
        v[~m] = rng.normal(size=v[~m].shape) * 10
        return v

    out = layer(x, mask=mask)
    out_noisy = layer(entry.structured([noisy(v, m) for v, m in zip(as_list(x), as_list(mask))]), mask=mask)
    if not isinstance(x, list):
        if len(out.shape) == len(x.shape) and not entry.consumes_mask:
            np.testing.assert_allclose(np.asarray(out)[mask], np.asarray(out_noisy)[mask], atol=ATOL)
            passed = layer.compute_mask(x, mask)
            np.testing.assert_array_equal(np.asarray(passed), mask)
        else:
            np.testing.assert_allclose(out, out_noisy, atol=ATOL)
            assert layer.compute_mask(x, mask) is None
        return
    # Several inputs: an output that passes a mask on is compared at its
    # valid steps, any other in full.
    for got, want, passed in zip(as_list(out_noisy), as_list(out), as_list(layer.compute_mask(x, mask))):
        if passed is None:
            np.testing.assert_allclose(got, want, atol=ATOL)
        else:
            passed = np.asarray(passed)
            assert any(np.array_equal(passed, m) for m in mask)
            np.testing.assert_allclose(np.asarray(got)[passed], np.asarray(want)[passed], atol=ATOL)


def sample_mask(x):
    """Sample 0's last two steps and sample 1's second are masked."""
    mask = np.ones(x.shape[:2], bool)
    mask[0, -2:] = False
    mask[1, 1] = False
    return mask


@masking_entries
def test_non_finite_values_in_masked_steps_never_reach_an_output(entry):
    """NaN and inf in masked steps leave every output finite and equal to
    the output with zeros there: masked values are selected away, never
    multiplied by zero (NaN · 0 is NaN). Weight gradients stay finite too,
    except for cells inside `keras.layers.RNN`, whose loop runs the cell on
    masked steps and selects afterwards (Keras' own LSTM does the same)."""
    layer = entry.make_layer(**({"return_sequences": True} if entry.recurrent else {}))
    x = entry.make_input(batch=3)
    mask = each_input(entry, x, sample_mask)

    def zeros(v):
        v = v.copy()
        v[~sample_mask(v)] = 0.0
        return v

    def bad(v):
        v = v.copy()
        v[0, -2], v[0, -1], v[1, 1] = np.nan, np.inf, -np.inf
        return v

    want = layer(each_input(entry, x, zeros), mask=mask)
    got = layer(each_input(entry, x, bad), mask=mask)
    assert all(np.all(np.isfinite(g)) for g in as_list(got))
    assert_close(got, want)
    if entry.is_cell:
        return
    with tf.GradientTape() as tape:
        loss = sum(tf.reduce_sum(o ** 2) for o in as_list(layer(each_input(entry, x, bad), mask=mask)))
    for w, g in zip(layer.trainable_weights, tape.gradient(loss, layer.trainable_weights)):
        assert np.all(np.isfinite(g)), w.path


# Recurrent checks: masking, stateful, return_state, go_backwards, dropout.
def masked_model(entry):
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


@recurrent_entries
def test_masked_steps_leave_the_state_untouched(entry):
    layer = entry.make_layer(return_sequences=True, return_state=True)
    x = entry.make_input(batch=3)
    inputs = keras.Input(entry.input_shape)
    model = keras.Model(inputs, layer(keras.layers.Masking(0.0)(inputs)))
    xp = padded_input(entry, x)
    seq, *states = model(xp)
    # Sample 0: the final state is the state after its last real step.
    _, *unpadded = layer(x[:1, :-2])
    for s, u in zip(states, unpadded):
        np.testing.assert_allclose(s[:1], u, atol=ATOL)
    # Padded steps repeat the previous output.
    np.testing.assert_allclose(seq[0, -1], seq[0, -3], atol=ATOL)
    np.testing.assert_allclose(seq[1, 1], seq[1, 0], atol=ATOL)
    # Sample 1: skipping the masked step equals deleting it.
    _, *skipped = layer(np.delete(x[1:2], 1, axis=1))
    for s, u in zip(states, skipped):
        np.testing.assert_allclose(s[1:2], u, atol=ATOL)


@recurrent_entries
def test_return_state(entry):
    layer = entry.make_layer(return_sequences=True, return_state=True)
    x = entry.make_input()
    seq, *states = layer(x)
    assert len(states) == len(layer.get_initial_state(x.shape[0]))
    np.testing.assert_allclose(states[0], seq[:, -1], atol=ATOL)
    shapes = layer.compute_output_shape(x.shape)
    assert [tuple(s) for s in shapes] == [tuple(t.shape) for t in [seq, *states]]


@recurrent_entries
def test_stateful(entry):
    x = entry.make_input(batch=2)
    full = entry.make_layer(return_sequences=True)
    whole = full(x)
    stateful = entry.make_layer(return_sequences=True, stateful=True)
    stateful(x[:, :1])
    stateful.set_weights(full.get_weights())
    stateful.reset_state()
    half = x.shape[1] // 2
    first, second = stateful(x[:, :half]), stateful(x[:, half:])
    np.testing.assert_allclose(np.concatenate([first, second], 1), whole, atol=ATOL)
    stateful.reset_state()
    np.testing.assert_allclose(stateful(x[:, :half]), whole[:, :half], atol=ATOL)


STATEFUL_ENTRIES = RECURRENT_ENTRIES + [e for e in PROTOCOL_ENTRIES
                                        if "stateful" in inspect.signature(e.cls.__init__).parameters]


@pytest.mark.parametrize("entry", STATEFUL_ENTRIES, ids=lambda e: e.id)
def test_a_stateful_layer_refuses_another_batch(entry):
    """States kept for one batch size are never broadcast to or cut for
    another (as each replica's share of a batch under tf.distribute): a
    `ValueError` that names both sizes."""
    chunk = getattr(entry.make_layer(), "streaming_chunk_length", None) or 1
    x = entry.make_input(batch=4, length=2 * chunk)
    layer = entry.make_layer(stateful=True)
    layer(x)
    with pytest.raises(ValueError, match=r"batch size.*\b4\b|\b4\b.*batch size") as info:
        layer(x[:2])
    assert "2" in str(info.value)


@recurrent_entries
def test_go_backwards(entry):
    x = entry.make_input()
    forward = entry.make_layer(return_sequences=False)
    backward = entry.make_layer(return_sequences=False, go_backwards=True)
    forward(x), backward(x)
    backward.set_weights(forward.get_weights())
    np.testing.assert_allclose(backward(x), forward(x[:, ::-1]), atol=ATOL)


@dropout_entries
def test_input_dropout(entry):
    kwargs = {**entry.dropout_kwargs, "recurrent_dropout": 0.0}
    layer = entry.make_layer(**kwargs)
    x = entry.make_input()
    inference = layer(x, training=False)
    np.testing.assert_allclose(layer(x, training=False), inference, atol=ATOL)
    train_a, train_b = layer(x, training=True), layer(x, training=True)
    # Input dropout changes the very first step already.
    assert not np.allclose(train_a[:, 0], inference[:, 0])
    assert not np.allclose(train_a, train_b)
    model = entry.make_model(**kwargs)
    sgd_mse(model, jit_compile=True).train_on_batch(x, target_for(model, x))


@dropout_entries
def test_recurrent_dropout(entry):
    kwargs = {**entry.dropout_kwargs, "dropout": 0.0}
    layer = entry.make_layer(**kwargs)
    x = entry.make_input()
    inference = layer(x, training=False)
    train = layer(x, training=True)
    # From a zero state, dropping parts of h_0 = 0 changes nothing at step 0;
    # the masks act from step 1 on.
    np.testing.assert_allclose(train[:, 0], inference[:, 0], atol=ATOL)
    assert not np.allclose(train[:, 1:], inference[:, 1:])
    model = entry.make_model(**kwargs)
    sgd_mse(model, jit_compile=True).train_on_batch(x, target_for(model, x))


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


@entries
def test_tflite_sequence_mode(entry, tmp_path):
    """LiteRT gives Keras' outputs within 1e-5, or, where a long sequence
    makes float32 itself drift (Keras' float32 output against the same model
    in float64), within four times that drift: the export must be as exact
    as Keras' own float32 computation."""
    path = tmp_path / "model.tflite"
    model = entry.make_model(dynamic_length=entry.recurrent)
    exact = float64_copy(entry, model, entry.recurrent)
    summary = export_tflite(model, path, dynamic_length=entry.recurrent)
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
    wrong_size = np.zeros(first.shape[:-1] + (first.shape[-1] + 1,), "float32")
    for bad, reason in [
        (first[..., None], "must have shape"),
        (wrong_size, "must have shape"),
        (first[:0], "empty axis"),
        (first[:, :0] if entry.recurrent else first[:, :-1],
         "empty axis" if entry.recurrent else "must have shape"),
        (first.astype("float64"), "must have dtype float32"),
    ]:
        with pytest.raises(ValueError, match=f"Input 'sequence' {reason}|Input 'sequence' has shape"):
            run_sequence(path, feed(entry, first_input(entry, x, bad)))


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


@recurrent_entries
def test_tflite_streaming(entry, tmp_path):
    """Fed frame by frame, the step gives what Keras gives on the whole
    sequence, padding included."""
    x = padded_input(entry, entry.make_input(batch=3, length=6))
    for name, model in streaming_models(entry).items():
        path = tmp_path / f"{name}.tflite"
        assert_builtins_only(export_tflite(model, path, streaming=True))
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


@pytest.mark.parametrize("entry", RECURRENT_ENTRIES + PROTOCOL_ENTRIES, ids=lambda e: e.id)
def test_saved_model_step_checks_state_batches_first(entry):
    """The SavedModel's `step` reads no state before checking its batch, so
    a wrong batch is refused by name whatever order the runtime picks."""
    models = streaming_models(entry) if entry.recurrent else {"alone": protocol_model(entry, masked=False)}
    for name, model in models.items():
        plan = plan_export(model)
        specs = {**plan.frame_specs(), **plan.state_specs()}
        step = tf.function(endpoints.step_fn(plan, check_batch=True)).get_concrete_function(specs)
        assert ungated_state_reads(step, list(plan.state_specs())) == [], name


def protocol_model(entry, masked):
    """The layer of a protocol entry alone, behind a mask if `masked`."""
    inputs = keras.Input((None,) + entry.input_shape[1:], name="sequence")
    h = keras.layers.Masking(0.0)(inputs) if masked else inputs
    return keras.Model(inputs, entry.make_layer()(h))


@pytest.mark.parametrize("entry", PROTOCOL_ENTRIES, ids=lambda e: e.id)
def test_streaming_through_the_protocol(entry, tmp_path):
    """A layer of the stateful protocol streams on its own, by frames or by
    its chunks, alone and behind a mask, and gives Keras' outputs; a length
    that is not a number of chunks is refused."""
    chunk = getattr(entry.make_layer(), "streaming_chunk_length", None) or 1
    x = padded_input(entry, entry.make_input(batch=3, length=3 * chunk))
    for name in ("alone", "masked"):
        model = protocol_model(entry, masked=name == "masked")
        path = tmp_path / f"{name}.tflite"
        assert_builtins_only(export_tflite(model, path, streaming=True))
        np.testing.assert_allclose(run_streaming(path, x)["output"], np.asarray(model(x)), atol=ATOL, err_msg=name)
    if chunk > 1:
        with pytest.raises(ValueError, match=f"multiple of {chunk}"):
            run_streaming(path, x[:, :-1])


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


# What TensorFlow Lite for Microcontrollers cannot run, and the op it lacks,
# which the export names with the layer: the segment cache's recall (a
# top-k), and behind a mask, the valid steps a local recurrence moves to the
# front of each window (an argsort, a top-k in TFLite).
MICRO_REFUSALS = {
    "SegmentCacheTransformer": ("TOPK_V2", "TOPK_V2"),
    "SegmentCacheTransformer-standard-bilstm": ("TOPK_V2", "TOPK_V2"),
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
        with pytest.raises(ExportError, match=rf"layer '{model.layers[-1].name}' \({entry.cls.__name__}\) {lacks}"):
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
