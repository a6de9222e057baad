"""`build_training_state`: the first training step on TensorFlow traced
once, and training the same as without it."""

import keras
import keras_tuner
import numpy as np
import pytest

from keras_relrec.models import build_training_state
from tests.tuning.registry import ENTRIES


def lstm_model(optimizer=None, metrics=("mae",)):
    keras.utils.set_random_seed(0)
    inputs = keras.Input((6, 3))
    model = keras.Model(inputs, keras.layers.Dense(2)(keras.layers.LSTM(4)(inputs)))
    model.compile(optimizer=optimizer or keras.optimizers.Adam(0.01), loss="mse", metrics=list(metrics))
    return model


def counting_traces(model):
    """`model` with its train_step counting its traces (each trace of the
    train function calls it once); the count in a list."""
    traces, step = [], model.train_step

    def counted(data):
        traces.append(1)
        return step(data)

    model.train_step = counted
    return traces


@pytest.mark.parametrize("built", [False, True], ids=["as-keras-does", "built-first"])
def test_the_first_step_is_traced_once_and_trains_the_same(built):
    x = np.random.default_rng(0).normal(size=(8, 6, 3)).astype("float32")
    y = np.random.default_rng(1).normal(size=(8, 2)).astype("float32")
    reference = lstm_model()
    reference_history = reference.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0).history
    model = lstm_model()
    traces = counting_traces(model)
    if built:
        assert build_training_state(model, x[:4], y[:4]) is model
    history = model.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0).history
    # Keras' TensorFlow trainer makes the optimizer's and metrics' variables
    # inside the first trace, and TensorFlow then traces again.
    assert len(traces) == (1 if built else 2)
    np.testing.assert_allclose(history["loss"], reference_history["loss"], rtol=1e-6)
    np.testing.assert_allclose(history["mae"], reference_history["mae"], rtol=1e-6)
    for ours, theirs in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-7)


def test_a_step_that_makes_no_variables_is_traced_once_anyway():
    """Plain SGD has no slots and a loss alone no metric variables: nothing
    is made in the trace, so there is nothing to build first (the
    contract's training checks rely on this)."""
    x = np.zeros((4, 6, 3), "float32")
    model = lstm_model(keras.optimizers.SGD(0.1), metrics=())
    traces = counting_traces(model)
    model.train_on_batch(x, np.zeros((4, 2), "float32"))
    assert len(traces) == 1


def test_symbolic_shapes_and_a_second_call():
    model = lstm_model()
    build_training_state(model, keras.KerasTensor((None, 6, 3)), keras.KerasTensor((None, 2)))
    assert model.optimizer.built
    # Already built: nothing made, nothing changed.
    before = [v.numpy().copy() for v in model.optimizer.variables]
    build_training_state(model, np.zeros((2, 6, 3), "float32"), np.zeros((2, 2), "float32"))
    for old, new in zip(before, model.optimizer.variables):
        np.testing.assert_array_equal(old, new)


def test_an_uncompiled_model_or_another_object_is_refused():
    inputs = keras.Input((6, 3))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    with pytest.raises(ValueError, match=r"`model` must be compiled.*model\.compile"):
        build_training_state(model, np.zeros((2, 6, 3), "float32"))
    with pytest.raises(ValueError, match=r"`model` must be a keras.Model; received model='lstm'"):
        build_training_state("lstm", np.zeros((2, 6, 3), "float32"))


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.id in ("HyperTABL", "HyperTransformerXL")],
                         ids=lambda e: e.id)
def test_a_trial_model_comes_with_its_training_state(entry):
    """The HyperModels' trials are traced once too: `build` makes the state
    (labels of one a sequence, or one a step)."""
    model = entry.hypermodel().build(keras_tuner.HyperParameters())
    traces = counting_traces(model)
    x = np.zeros((2, *model.input_shape[1:]), model.inputs[0].dtype)
    model.fit(x, np.zeros((2, *model.output_shape[1:-1]), "int32"), verbose=0)
    assert len(traces) == 1
