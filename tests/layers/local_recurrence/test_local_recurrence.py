"""LocalRecurrence against a float64 NumPy computation that loops over the
windows one by one, as R-Transformer's LocalRNN defines them (M − 1 zeros on
the left, every window from the zero state, the last step kept), and its
masking, chunking, stateful and streaming behaviour. The equations hold in
float32 and under the float64 policy (tests/layers/float64.py)."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_relrec.export import export_saved_model
from keras_relrec.export import export_tflite
from keras_relrec.export import run_streaming
from keras_relrec.layers import LocalRecurrence
from keras_relrec.layers import PeepholeLSTMCell
from tests.export.saved_model_stream import stream_saved_model
from tests.layers.local_recurrence.gradient_memory import gradient_temporaries

ATOL = 1e-5


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def gru_np(weights, x, h):
    """Keras' GRU step (reset_after=True): gates z, r, candidate n."""
    kernel, recurrent, bias = (np.asarray(w, "float64") for w in weights)
    u = h.shape[-1]
    xs, hs = x @ kernel + bias[0], h @ recurrent + bias[1]
    z = sigmoid(xs[:, :u] + hs[:, :u])
    r = sigmoid(xs[:, u : 2 * u] + hs[:, u : 2 * u])
    n = np.tanh(xs[:, 2 * u :] + r * hs[:, 2 * u :])
    return z * h + (1 - z) * n


def lstm_np(weights, x, state):
    """Keras' LSTM step: gates i, f, c, o."""
    kernel, recurrent, bias = (np.asarray(w, "float64") for w in weights)
    h, c = state
    u = h.shape[-1]
    g = x @ kernel + h @ recurrent + bias
    i, f, o = sigmoid(g[:, :u]), sigmoid(g[:, u : 2 * u]), sigmoid(g[:, 3 * u :])
    c = f * c + i * np.tanh(g[:, 2 * u : 3 * u])
    return o * np.tanh(c), c


def simple_rnn_np(weights, x, h):
    kernel, recurrent, bias = (np.asarray(w, "float64") for w in weights)
    return np.tanh(x @ kernel + h @ recurrent + bias)


def local_recurrence_np(step, units, x, window, states=1):
    """y_t = the cell's output after x_{t−M+1} … x_t from zero states, with
    x_s = 0 before the start: an explicit loop over every window."""
    x = np.asarray(x, "float64")
    batch, steps, features = x.shape
    padded = np.concatenate([np.zeros((batch, window - 1, features)), x], axis=1)
    y = np.zeros((batch, steps, units))
    for t in range(steps):
        state = [np.zeros((batch, units)) for _ in range(states)]
        for k in range(window):
            out = step(padded[:, t + k], state[0] if states == 1 else state)
            state = [out] if states == 1 else list(out)
        y[:, t] = state[0]
    return y


CELLS = {
    "gru": (lambda: keras.layers.GRUCell(5, bias_initializer="random_normal"), gru_np, 1),
    "lstm": (lambda: keras.layers.LSTMCell(5, bias_initializer="random_normal"), lstm_np, 2),
    "simple_rnn": (lambda: keras.layers.SimpleRNNCell(5, bias_initializer="random_normal"), simple_rnn_np, 1),
}


def make(kind, window, **kwargs):
    cell, step, states = CELLS[kind]
    layer = LocalRecurrence(cell(), window, **kwargs)
    return layer, step, states


@pytest.mark.parametrize("kind", list(CELLS))
@pytest.mark.parametrize("window", [1, 3, 6])
def test_matches_an_explicit_loop_over_windows(kind, window, precision):
    x = precision.array(np.random.default_rng(0).normal(size=(3, 8, 4)))
    layer, step, states = make(kind, window)
    got = layer(x)
    weights = layer.cell.get_weights()
    want = local_recurrence_np(lambda xk, s: step(weights, xk, s), 5, x, window, states)
    precision.assert_close(got, want, atol=ATOL)


def test_a_window_longer_than_the_sequence_sees_zeros_before_it():
    """M > T: every window starts in the left zeros, which run through the
    cell (its biases make them count)."""
    x = np.random.default_rng(1).normal(size=(2, 3, 4)).astype("float32")
    layer, step, states = make("gru", 5)
    got = layer(x)
    weights = layer.cell.get_weights()
    want = local_recurrence_np(lambda xk, s: step(weights, xk, s), 5, x, 5, states)
    np.testing.assert_allclose(got, want, atol=ATOL)
    shorter = LocalRecurrence(layer.cell, 3)(x)
    assert np.abs(np.asarray(shorter) - want).max() > 1e-3


def test_the_seed_equations_1_and_2(precision):
    """h_t = σ_h(U A_t + V h_{t−1} + b) over each window, then
    A'_t = σ(W h_t + b'): a SimpleRNNCell in the wrapper, then a Dense."""
    x = precision.array(np.random.default_rng(2).normal(size=(2, 6, 4)))
    local = LocalRecurrence(keras.layers.SimpleRNNCell(5, activation="tanh", bias_initializer="random_normal"), 3)
    project = keras.layers.Dense(5, activation="sigmoid", bias_initializer="random_normal")
    got = project(local(x))
    u, v, b = (np.asarray(w, "float64") for w in local.cell.get_weights())
    w, b_out = (np.asarray(p, "float64") for p in project.get_weights())
    padded = np.concatenate([np.zeros((2, 2, 4)), x.astype("float64")], axis=1)
    for t in range(6):
        h = np.zeros((2, 5))
        for k in range(3):
            h = np.tanh(padded[:, t + k] @ u + h @ v + b)
        precision.assert_close(got[:, t], sigmoid(h @ w + b_out), atol=ATOL)


def test_masked_steps_are_as_if_absent(precision):
    """Padding before, inside and after: the valid steps give what the
    sequence without padding gives, the padded ones zeros, and what the
    padding holds (NaN included) changes nothing."""
    rng = np.random.default_rng(3)
    x = precision.array(rng.normal(size=(3, 9, 4)))
    mask = np.ones((3, 9), bool)
    mask[0, :3] = False
    mask[1, 4] = mask[1, 6] = False
    mask[2, -2:] = False
    x[~mask] = np.nan
    layer, step, states = make("lstm", 3)
    got = keras.ops.convert_to_numpy(layer(x, mask=mask))
    weights = layer.cell.get_weights()
    for row in range(3):
        kept = x[row : row + 1, mask[row]]
        want = local_recurrence_np(lambda xk, s: step(weights, xk, s), 5, kept, 3, states)
        precision.assert_close(got[row, mask[row]], want[0], atol=ATOL)
    np.testing.assert_array_equal(got[~mask], 0.0)
    np.testing.assert_array_equal(layer.compute_mask(x, mask), mask)


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 11, 40])
def test_chunked_equals_unchunked(chunk):
    """Any chunk size, dividing the length or not, longer than it or not,
    with and without a mask."""
    x = np.random.default_rng(4).normal(size=(2, 11, 3)).astype("float32")
    mask = np.ones((2, 11), bool)
    mask[1, 2:4] = False
    whole = LocalRecurrence(PeepholeLSTMCell(4), 4)
    want, want_masked = whole(x), whole(x, mask=mask)
    chunked = LocalRecurrence.from_config({**whole.get_config(), "chunk_size": chunk})
    chunked.build(x.shape)
    chunked.set_weights(whole.get_weights())
    np.testing.assert_allclose(chunked(x), want, atol=ATOL)
    np.testing.assert_allclose(chunked(x, mask=mask), want_masked, atol=ATOL)


def test_any_length_and_batch_under_xla():
    """One compiled model, dynamic batch and length, chunked and not; a
    length far beyond the reference's 3,000-step cap."""
    inputs = keras.Input((None, 3))
    whole = LocalRecurrence(keras.layers.GRUCell(4), 5)
    chunked = LocalRecurrence(whole.cell, 5, chunk_size=512)
    model = keras.Model(inputs, [whole(inputs), chunked(inputs)])
    # Traced once with an unknown length: the chunks run in a loop.
    compiled = tf.function(model, jit_compile=True, input_signature=[tf.TensorSpec((None, None, 3))])
    for batch, steps in [(1, 7), (3, 2), (2, 5000)]:
        x = np.random.default_rng(steps).normal(size=(batch, steps, 3)).astype("float32")
        a, b = compiled(x)
        assert a.shape == (batch, steps, 4)
        np.testing.assert_allclose(a, model(x)[0], atol=ATOL)
        np.testing.assert_allclose(b, a, atol=ATOL)


# A test per mask: each compiles its own XLA program (3 s).
@pytest.mark.parametrize("masked", [False, True], ids=["no-mask", "mask"])
@pytest.mark.parametrize("chunk", [1, 4, 40])
def test_chunked_layer_trains_as_the_unchunked_one(chunk, masked):
    """In training the chunks run in a loop whose gradient recomputes them
    (`keras.remat`): the same outputs and gradients, with and without a
    mask, eagerly and under XLA."""
    x = tf.constant(np.random.default_rng(5).normal(size=(2, 10, 3)).astype("float32"))
    mask = np.ones((2, 10), bool)
    mask[1, 3:5] = False
    whole = LocalRecurrence(keras.layers.LSTMCell(4), 3)
    whole(x)
    chunked = LocalRecurrence(whole.cell, 3, chunk_size=chunk)

    def step(layer, m):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, mask=m, training=True)
            loss = tf.reduce_sum(y**2)
        return [y] + tape.gradient(loss, [x] + whole.cell.trainable_weights)

    m = mask if masked else None
    want = step(whole, m)
    for run in (step, tf.function(step, jit_compile=True)):
        for a, b in zip(want, run(chunked, m)):
            np.testing.assert_allclose(a, b, atol=ATOL)


# make check: a JAX process of its own, its import and two compiles at a
# length where the memory shows (above make test's time limit).
@pytest.mark.check
def test_chunked_training_keeps_one_chunk_of_activations():
    """The XLA program of a training step (JAX) needs a fraction of the
    temporary memory with chunks: the gradient recomputes each chunk's
    steps instead of keeping them all."""
    whole, chunked = gradient_temporaries("LocalRecurrence", "keras.layers.GRUCell(16), 7", (4, 2000, 16), 100)
    assert chunked < 0.2 * whole, (whole, chunked)


def test_a_keras_rnn_gives_its_cell_and_the_arguments_are_checked():
    rnn = keras.layers.RNN(keras.layers.GRUCell(3))
    assert LocalRecurrence(rnn, 2).cell is rnn.cell
    with pytest.raises(ValueError, match="go_backwards"):
        LocalRecurrence(keras.layers.GRU(3, go_backwards=True), 2)
    with pytest.raises(ValueError, match="Bidirectional"):
        LocalRecurrence(keras.layers.Bidirectional(keras.layers.GRU(3)), 2)
    with pytest.raises(ValueError, match="stateful=True.*batch size"):
        LocalRecurrence(keras.layers.GRUCell(3), 2, stateful=True)(keras.Input((None, 3)))


def test_dropout_of_the_cell_applies_in_training_only():
    x = np.random.default_rng(6).normal(size=(2, 6, 3)).astype("float32")
    layer = LocalRecurrence(keras.layers.GRUCell(4, dropout=0.5, recurrent_dropout=0.5, seed=1), 3, chunk_size=4)
    inference = layer(x)
    np.testing.assert_allclose(layer(x), inference, atol=0)
    trained = layer(x, training=True)
    assert np.all(np.isfinite(trained)) and not np.allclose(trained, inference)


def test_stateful_calls_continue_the_stream():
    x = np.random.default_rng(7).normal(size=(2, 9, 3)).astype("float32")
    whole = LocalRecurrence(keras.layers.GRUCell(4), 4)
    want = whole(x)
    stateful = LocalRecurrence(whole.cell, 4, stateful=True)
    inputs = keras.Input((None, 3), batch_size=2)
    model = keras.Model(inputs, stateful(inputs))
    got = np.concatenate([model(x[:, :2]), model(x[:, 2:7]), model(x[:, 7:])], axis=1)
    np.testing.assert_allclose(got, want, atol=ATOL)
    stateful.reset_state()
    np.testing.assert_allclose(model(x), want, atol=ATOL)


def test_streams_through_saved_model_and_litert(tmp_path):
    """The step's state is the last M − 1 inputs; SavedModel `step` and the
    builtins-only TFLite step, fed frame by frame behind a mask, give the
    sequence's outputs."""
    inputs = keras.Input((None, 3), name="sequence")
    local = LocalRecurrence(keras.layers.LSTMCell(4, bias_initializer="random_normal"), 5)
    model = keras.Model(inputs, keras.layers.Dense(2)(local(keras.layers.Masking(0.0)(inputs))))
    x = np.random.default_rng(8).normal(size=(3, 12, 3)).astype("float32")
    x[0, :2] = 0.0  # pre-padding
    x[1, 5] = 0.0
    want = model.predict(x, verbose=0)
    export_saved_model(model, tmp_path / "sm")
    loaded = tf.saved_model.load(str(tmp_path / "sm"))
    np.testing.assert_allclose(stream_saved_model(loaded, x), want, atol=ATOL)
    summary = export_tflite(model, tmp_path / "step.tflite", streaming=True)
    assert not [op for op in summary["ops"] if op.startswith("CUSTOM") or op == "WHILE"], summary["ops"]
    result = run_streaming(tmp_path / "step.tflite", x)
    np.testing.assert_allclose(result["output"], want, atol=ATOL)
    assert result[f"{local.name}_inputs"].shape == (3, 4, 3)


@pytest.mark.parametrize("shape", [(2, 5), (2, 4, 1), (3, 4), (1, 4)], ids=["length", "rank", "batch", "batch-of-one"])
def test_a_mask_of_another_shape_is_refused(shape):
    """A mask that is not (batch, steps) of the inputs: a `ValueError` naming
    it, in a call and in a streaming step, never a backend error or a
    broadcast."""
    layer = LocalRecurrence(keras.layers.SimpleRNNCell(4), 2)
    x = np.ones((2, 4, 3), "float32")
    received = re.escape(str(shape))
    with pytest.raises(ValueError, match=r"`mask` of shape \(batch, steps\) = \(2, 4\).*mask of shape " + received):
        layer(x, mask=np.ones(shape, bool))
    with pytest.raises(ValueError, match=r"`mask` of shape \(batch, steps\)"):
        layer.streaming_step(x, layer.streaming_initial_state(2), mask=np.ones(shape, bool))
