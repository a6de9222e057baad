"""The LSTM-family cells against NumPy float64 computations of their papers'
equations, with non-zero initial states, in float32 and under the float64
policy (tests/layers/float64.py)."""

import keras
import numpy as np
import pytest

from keras_relrec.layers import CoupledLSTMCell
from keras_relrec.layers import PeepholeConvLSTM2D
from keras_relrec.layers import PeepholeLSTMCell

B, T, D, U = 3, 6, 5, 4
ATOL = 1e-5


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def randomize(layer, rng, dtype="float32"):
    """Random values for every weight (peepholes and biases included)."""
    layer.set_weights(
        [rng.uniform(-0.8, 0.8, w.shape).astype(dtype) for w in layer.get_weights()]
    )
    return [w.astype("float64") for w in layer.get_weights()]


def run_rnn(cell, x, h0, c0):
    rnn = keras.layers.RNN(cell, return_sequences=True, return_state=True)
    rnn(x, initial_state=[h0, c0])
    return rnn


def peephole_lstm_steps(x, h, c, project, p_i, p_f, p_o, clip=np.inf):
    """Gers & Schmidhuber's step, run over time: i and f see c_{t-1}, o sees
    c_t (clipped to ±clip); `project(x_t, h)` gives the pre-activations,
    blocks i, f, c, o on the last axis."""
    n = h.shape[-1]
    hs = []
    for t in range(x.shape[1]):
        z = project(x[:, t], h)
        zi, zf, zc, zo = (z[..., k * n:(k + 1) * n] for k in range(4))
        i = sigmoid(zi + p_i * c)
        f = sigmoid(zf + p_f * c)
        c = np.clip(f * c + i * np.tanh(zc), -clip, clip)
        o = sigmoid(zo + p_o * c)
        h = o * np.tanh(c)
        hs.append(h)
    return np.stack(hs, 1), h, c


def peephole_lstm_reference(x, h, c, W, U_, b, p_i, p_f, p_o, clip=np.inf):
    return peephole_lstm_steps(x, h, c, lambda x_t, h: x_t @ W + h @ U_ + b, p_i, p_f, p_o, clip)


def coupled_lstm_reference(x, h, c, W, U_, b, p_f=0.0, p_o=0.0, clip=np.inf):
    """CIFG: c_t = f ⊙ c_{t-1} + (1 − f) ⊙ tanh(z_c), clipped to ±clip.
    Blocks f, c, o."""
    n = h.shape[-1]
    hs = []
    for t in range(x.shape[1]):
        z = x[:, t] @ W + h @ U_ + b
        zf, zc, zo = (z[:, k * n:(k + 1) * n] for k in range(3))
        f = sigmoid(zf + p_f * c)
        c = np.clip(f * c + (1.0 - f) * np.tanh(zc), -clip, clip)
        o = sigmoid(zo + p_o * c)
        h = o * np.tanh(c)
        hs.append(h)
    return np.stack(hs, 1), h, c


@pytest.fixture
def data():
    rng = np.random.default_rng(7)
    x = rng.normal(size=(B, T, D)).astype("float32")
    h0 = rng.normal(scale=0.5, size=(B, U)).astype("float32")
    c0 = rng.normal(scale=0.5, size=(B, U)).astype("float32")
    return rng, x, h0, c0


@pytest.mark.parametrize(
    "make_cell, reference",
    [
        (lambda: PeepholeLSTMCell(U), peephole_lstm_reference),
        (lambda: CoupledLSTMCell(U), coupled_lstm_reference),
        (lambda: CoupledLSTMCell(U, use_peepholes=True), coupled_lstm_reference),
    ],
    ids=["peephole", "coupled", "coupled_peepholes"],
)
def test_cell_matches_equations(data, make_cell, reference, precision):
    rng, x, h0, c0 = (data[0], *map(precision.array, data[1:]))
    cell = make_cell()
    rnn = run_rnn(cell, x, h0, c0)
    weights = randomize(cell, rng, precision.dtype)
    got = rnn(x, initial_state=[h0, c0])
    want = reference(
        x.astype("float64"), h0.astype("float64"), c0.astype("float64"), *weights
    )
    for g, w in zip(got, want):
        precision.assert_close(g, w, atol=ATOL)


@pytest.mark.parametrize(
    "make_cell, reference",
    [
        (lambda: PeepholeLSTMCell(U, cell_clip=0.3), peephole_lstm_reference),
        (lambda: CoupledLSTMCell(U, use_peepholes=True, cell_clip=0.3), coupled_lstm_reference),
    ],
    ids=["peephole", "coupled_peepholes"],
)
def test_cell_clip_bounds_the_cell_state(data, make_cell, reference, precision):
    """c_t is clipped before the output gate and tanh read it; the bound
    binds on these inputs (else the check could not fail)."""
    rng, x, h0, c0 = (data[0], *map(precision.array, data[1:]))
    x = x * 4  # cell states beyond the bound
    cell = make_cell()
    rnn = run_rnn(cell, x, h0, c0)
    weights = randomize(cell, rng, precision.dtype)
    got = rnn(x, initial_state=[h0, c0])
    args = (x.astype("float64"), h0.astype("float64"), c0.astype("float64"), *weights)
    want = reference(*args, clip=0.3)
    for g, w in zip(got, want):
        precision.assert_close(g, w, atol=ATOL)
    assert np.abs(np.asarray(got[2])).max() <= 0.3 + 1e-6
    assert np.abs(reference(*args)[2]).max() > 0.3


def test_peephole_lstm_output_gate_sees_new_cell_state(data):
    """With the i and f peepholes zero, only p_o acts; it must act on c_t, and
    the step must differ measurably from one where it acted on c_{t-1}."""
    rng, x, h0, c0 = data
    cell = PeepholeLSTMCell(U)
    rnn = run_rnn(cell, x[:, :1], h0, c0)
    W, U_, b, _, _, p_o = randomize(cell, rng)
    zeros = np.zeros(U)
    cell.set_weights([W, U_, b, zeros, zeros, p_o])
    _, h, _ = rnn(x[:, :1], initial_state=[h0, c0])

    z = x[:, 0].astype("float64") @ W + h0.astype("float64") @ U_ + b
    i, f = sigmoid(z[:, :U]), sigmoid(z[:, U:2 * U])
    c1 = f * c0 + i * np.tanh(z[:, 2 * U:3 * U])
    h_new = sigmoid(z[:, 3 * U:] + p_o * c1) * np.tanh(c1)
    h_old = sigmoid(z[:, 3 * U:] + p_o * c0) * np.tanh(c1)
    np.testing.assert_allclose(h, h_new, atol=ATOL)
    assert np.abs(h_new - h_old).max() > 1e-3


def test_unit_forget_bias_keeps_a_seeded_initializer_random():
    """The blocks other than f come from one draw of the initializer, so they
    differ from each other even with a seeded initializer."""
    cell = PeepholeLSTMCell(U, bias_initializer=keras.initializers.RandomNormal(seed=3))
    keras.layers.RNN(cell)(np.zeros((1, 2, D), "float32"))
    i, f, c, o = np.split(cell.bias.numpy(), 4)
    np.testing.assert_array_equal(f, np.ones(U))
    assert not np.allclose(i, c) and not np.allclose(c, o)


def test_coupled_lstm_has_three_gate_blocks():
    cell = CoupledLSTMCell(U, use_peepholes=True)
    keras.layers.RNN(cell)(np.zeros((1, 2, D), "float32"))
    shapes = {w.name: tuple(w.shape) for w in cell.weights}
    assert shapes == {
        "kernel": (D, 3 * U),
        "recurrent_kernel": (U, 3 * U),
        "bias": (3 * U,),
        "forget_gate_peephole_weights": (U,),
        "output_gate_peephole_weights": (U,),
    }
    # unit_forget_bias: the forget block (first) starts at one.
    np.testing.assert_array_equal(cell.bias.numpy()[:U], np.ones(U))
    np.testing.assert_array_equal(cell.bias.numpy()[U:], np.zeros(2 * U))


def test_peephole_lstm_weights_in_tf_addons_layout():
    """kernel, recurrent_kernel, bias (i, f, c, o), then the i, f, o peepholes,
    so a list saved from TF Addons' PeepholeLSTMCell loads by position."""
    cell = PeepholeLSTMCell(U)
    keras.layers.RNN(cell)(np.zeros((1, 2, D), "float32"))
    assert [(w.name, tuple(w.shape)) for w in cell.weights] == [
        ("kernel", (D, 4 * U)),
        ("recurrent_kernel", (U, 4 * U)),
        ("bias", (4 * U,)),
        ("input_gate_peephole_weights", (U,)),
        ("forget_gate_peephole_weights", (U,)),
        ("output_gate_peephole_weights", (U,)),
    ]
    bias = cell.bias.numpy()
    np.testing.assert_array_equal(bias[U:2 * U], np.ones(U))  # forget block


def test_lecture_gru_is_keras_gru_reset_after_false(data):
    """The lecture's GRU (no biases; reset applied before the matmul):

        z = σ(W_z [h, x]),  r = σ(W_r [h, x]),
        h̃ = tanh(W [r ⊙ h, x]),  h_t = (1 − z) ⊙ h + z ⊙ h̃

    is `keras.layers.GRU(reset_after=False, use_bias=False)`. Keras writes
    h_t = z' ⊙ h + (1 − z') ⊙ h̃, so its update gate z' is the lecture's 1 − z:
    the lecture's W_z goes into Keras' z block negated (σ(−a) = 1 − σ(a)).
    """
    rng, x, h0, _ = data
    Wz, Wr, Wh = (rng.uniform(-0.8, 0.8, (U + D, U)) for _ in range(3))
    xd, h = x.astype("float64"), h0.astype("float64")
    ref = []
    for t in range(T):
        hx = np.concatenate([h, xd[:, t]], -1)
        z = sigmoid(hx @ Wz)
        r = sigmoid(hx @ Wr)
        h_tilde = np.tanh(np.concatenate([r * h, xd[:, t]], -1) @ Wh)
        h = (1.0 - z) * h + z * h_tilde
        ref.append(h)
    ref = np.stack(ref, 1)

    gru = keras.layers.GRU(U, reset_after=False, use_bias=False, return_sequences=True)
    gru(x, initial_state=[h0])
    # Keras blocks are z, r, h; [h, x] W splits into the recurrent rows (first
    # U) and the input rows (last D).
    kernel = np.concatenate([-Wz[U:], Wr[U:], Wh[U:]], -1)
    recurrent = np.concatenate([-Wz[:U], Wr[:U], Wh[:U]], -1)
    gru.set_weights([kernel, recurrent])
    np.testing.assert_allclose(gru(x, initial_state=[h0]), ref, atol=ATOL)


def conv2d(x, w, stride=1, padding="same"):
    """Cross-correlation of x (B, H, W, C) with w (kh, kw, C, F), with
    TensorFlow's "same" padding (extra row/column at the end) or "valid"."""
    kh, kw = w.shape[:2]
    if padding == "same":
        pads = []
        for n, k in zip(x.shape[1:3], (kh, kw)):
            total = max((-(-n // stride) - 1) * stride + k - n, 0)
            pads.append((total // 2, total - total // 2))
        x = np.pad(x, ((0, 0), pads[0], pads[1], (0, 0)))
    rows = (x.shape[1] - kh) // stride + 1
    cols = (x.shape[2] - kw) // stride + 1
    out = np.zeros((x.shape[0], rows, cols, w.shape[-1]))
    for a in range(kh):
        for b in range(kw):
            patch = x[:, a:a + stride * (rows - 1) + 1:stride, b:b + stride * (cols - 1) + 1:stride]
            out += patch @ w[a, b]
    return out


def conv_lstm_reference(x, h, c, Wx, Wh, b=0.0, p_i=0.0, p_f=0.0, p_o=0.0, stride=1, padding="same"):
    """Shi et al. 2015, eq. (3): convolutions and Hadamard peepholes; the
    recurrent convolution is "same" with stride 1, as in Keras."""
    return peephole_lstm_steps(
        x, h, c, lambda x_t, h: conv2d(x_t, Wx, stride, padding) + conv2d(h, Wh) + b,
        p_i, p_f, p_o,
    )


@pytest.mark.parametrize(
    "config",
    [
        {"padding": "same"},
        {"padding": "same", "use_peepholes": False},
        {"padding": "valid", "strides": 2},
        {"padding": "same", "strides": 2, "use_bias": False},
        {"padding": "valid", "data_format": "channels_first", "unit_forget_bias": False},
    ],
    ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()),
)
def test_peephole_conv_lstm_matches_equations(config, precision):
    rng = np.random.default_rng(3)
    stride = config.get("strides", 1)
    x = rng.normal(size=(2, 4, 7, 6, 2))
    probe = PeepholeConvLSTM2D(3, 3, **config)
    first = config.get("data_format") == "channels_first"
    to_layer = (lambda a: np.moveaxis(a, -1, -3)) if first else (lambda a: a)
    state_shape = probe.compute_output_shape((2, 4) + to_layer(x[0, 0]).shape)[1:]
    h0 = rng.normal(scale=0.5, size=(2,) + state_shape)
    c0 = rng.normal(scale=0.5, size=(2,) + state_shape)
    layer = PeepholeConvLSTM2D(3, 3, return_sequences=True, return_state=True, **config)
    x_layer = precision.array(to_layer(x))
    layer(x_layer, initial_state=[precision.array(h0), precision.array(c0)])
    weights = randomize(layer, rng, precision.dtype)
    got = layer(x_layer, initial_state=[precision.array(h0), precision.array(c0)])

    # The reference works channels-last: move states and peepholes there.
    to_last = (lambda a: np.moveaxis(a, -3, -1)) if first else (lambda a: a)
    Wx, Wh, *rest = weights
    b = rest.pop(0) if config.get("use_bias", True) else 0.0
    peepholes = [to_last(p) for p in rest]
    want = conv_lstm_reference(
        x, to_last(h0), to_last(c0), Wx, Wh, b, *peepholes, stride=stride,
        padding=config["padding"],
    )
    for g, w in zip(got, want):
        precision.assert_close(to_last(keras.ops.convert_to_numpy(g)), w, atol=ATOL)


def test_peephole_conv_lstm_without_peepholes_is_keras_conv_lstm2d():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 3, 7, 7, 2)).astype("float32")
    ours = PeepholeConvLSTM2D(4, 3, strides=2, use_peepholes=False, return_sequences=True)
    theirs = keras.layers.ConvLSTM2D(4, 3, strides=2, return_sequences=True)
    ours(x), theirs(x)
    theirs.set_weights(randomize(ours, rng))
    np.testing.assert_allclose(ours(x), theirs(x), atol=ATOL)


def test_fresh_peephole_conv_lstm_computes_conv_lstm2d():
    """Zero-initialised peepholes: a new layer starts as ConvLSTM2D."""
    x = np.random.default_rng(1).normal(size=(2, 3, 6, 6, 2)).astype("float32")
    ours = PeepholeConvLSTM2D(4, 3, padding="same")
    theirs = keras.layers.ConvLSTM2D(4, 3, padding="same")
    ours(x), theirs(x)
    theirs.set_weights(ours.get_weights()[:3])
    assert len(ours.get_weights()) == 6
    np.testing.assert_allclose(ours(x), theirs(x), atol=ATOL)


def test_peephole_lstm_loads_a_tf_addons_weights_file(tmp_path, data):
    """A Keras 2 `save_weights` H5 file of `RNN(tfa.rnn.PeepholeLSTMCell)`,
    written here in that layout (TF Addons is not installable with Keras 3),
    loads into our cell by position and computes the peephole equations."""
    import h5py

    rng, x, h0, c0 = data
    names = ["kernel", "recurrent_kernel", "bias", "input_gate_peephole_weights",
             "forget_gate_peephole_weights", "output_gate_peephole_weights"]
    shapes = [(D, 4 * U), (U, 4 * U), (4 * U,), (U,), (U,), (U,)]
    values = [rng.uniform(-0.8, 0.8, s).astype("float32") for s in shapes]
    path = tmp_path / "tfa_peephole.h5"
    with h5py.File(path, "w") as f:
        f.attrs["layer_names"] = [b"rnn"]
        f.attrs["backend"] = b"tensorflow"
        f.attrs["keras_version"] = b"2.13.1"
        group = f.create_group("rnn")
        full = [f"rnn/peephole_lstm_cell/{n}:0" for n in names]
        group.attrs["weight_names"] = [n.encode() for n in full]
        for name, value in zip(full, values):
            group.create_dataset(name, data=value)

    inputs = keras.Input((T, D))
    rnn = keras.layers.RNN(PeepholeLSTMCell(U), return_sequences=True, return_state=True)
    model = keras.Model(inputs, rnn(inputs))
    model.load_weights(path)
    got = rnn(x, initial_state=[h0, c0])
    want = peephole_lstm_reference(
        x.astype("float64"), h0.astype("float64"), c0.astype("float64"),
        *[v.astype("float64") for v in values],
    )
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=ATOL)


def test_conv_lstm_initial_state_before_build_is_a_clear_error():
    layer = PeepholeConvLSTM2D(2, 3)
    with pytest.raises(ValueError, match="before it is built"):
        layer.get_initial_state(1)
    layer.build((None, 3, 5, 5, 1))
    assert [tuple(s.shape) for s in layer.get_initial_state(2)] == [(2, 3, 3, 2)] * 2
