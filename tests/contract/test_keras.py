"""The Keras contract of every entry: configuration round trips, distinct
initial weights, symbolic and eager calls and `compute_output_shape`,
gradients, XLA training, float64 and mixed precision, and for recurrent
entries `return_state`, `stateful`, `go_backwards` and dropout."""

import copy
import itertools

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_relrec.utils.registration import PUBLIC_LAYERS
from tests.contract.conformance import ATOL
from tests.contract.conformance import SLOW_TO_PREDICT_COMPILED
from tests.contract.conformance import SLOW_TO_TRAIN_COMPILED
from tests.contract.conformance import as_list
from tests.contract.conformance import assert_close
from tests.contract.conformance import dropout_entries
from tests.contract.conformance import each_input
from tests.contract.conformance import entries
from tests.contract.conformance import fit_one_step
from tests.contract.conformance import one_per_family
from tests.contract.conformance import recurrent_entries
from tests.contract.conformance import sgd_mse
from tests.contract.conformance import target_for
from tests.contract.registry import ENTRIES
from tests.layers.float64 import float64_policy


def test_every_public_layer_has_an_entry():
    assert {e.cls for e in ENTRIES} == set(PUBLIC_LAYERS.values())


# Configuration round trip.
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


# Weights drawn at random start distinct: one initializer instance handed
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


# Symbolic and eager calls agree; compute_output_shape is the real shape.
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


# A layer whose first call is inside a traced function (a custom training
# loop's `tf.function`, a subclassed model built by its first step) keeps
# nothing of that trace: eagerly and in another trace it gives the same
# outputs (a tensor made in `build` belongs to the graph it was built in).
# One entry per family in make test, every entry in make check.
@pytest.mark.parametrize("entry", one_per_family(ENTRIES))
def test_first_built_inside_a_traced_function(entry):
    layer = entry.make_layer()
    x = entry.make_input()
    traced = tf.function(lambda v: layer(v))(x)
    assert_close(layer(x), traced)
    assert_close(tf.function(lambda v: layer(v))(x), traced)


# Gradients reach every trainable weight (that a fit step changes every
# weight is checked with XLA, below).
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


# XLA: predictions, and training steps that change every weight. Two
# tests, each compiling one function: `fit` and `predict` feed batches of
# unknown size, so XLA must compile the steps with a dynamic batch
# dimension, as in real use. One entry per family in make test (an XLA
# compile is most of each test, and the two took over half of this
# module's time in make test), every entry in make check; never as a
# family's first the entries of SLOW_TO_PREDICT_COMPILED (conformance.py).
@pytest.mark.parametrize("entry", one_per_family(ENTRIES, slow=SLOW_TO_PREDICT_COMPILED))
def test_jit_compile_predicts_as_eager(entry):
    model = sgd_mse(entry.make_model(), jit_compile=True)
    x = entry.make_input(batch=4)
    assert_close(model.predict(x, batch_size=2, verbose=0), model(x))


# As above; never as a family's first the entries of SLOW_TO_TRAIN_COMPILED.
@pytest.mark.parametrize("entry", one_per_family(ENTRIES, slow=SLOW_TO_TRAIN_COMPILED))
def test_jit_compile_trains_every_weight(entry):
    model = entry.make_model()
    x = entry.make_input(batch=4)
    y = target_for(model, x)
    sgd_mse(model, jit_compile=True)
    before = [w.copy() for w in model.get_weights()]
    model.fit(x, y, batch_size=2, epochs=1, verbose=0)
    # Every weight changes. (Graph training without XLA, Keras' default on
    # CPU, is compared with an eager step's weights in test_backends.py.)
    for w, (b, a) in zip(model.weights, zip(before, model.get_weights())):
        assert not np.array_equal(a, b), f"{w.path} did not change"


# float64 all the way: under the float64 policy every weight, state and
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


# Mixed precision.
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
    y = target_for(model, x)
    sgd_mse(model, jit_compile=True).train_on_batch(x, y)


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
    y = target_for(model, x)
    sgd_mse(model, jit_compile=True).train_on_batch(x, y)
