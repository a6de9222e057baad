"""RelationalMemoryCell against a NumPy float64 implementation of the
reference's step (Sonnet 1 RelationalMemory, as written in REFERENCES.md),
in float32 and under the float64 policy (tests/layers/float64.py)."""

import keras
import numpy as np
import pytest

from keras_relrec.layers import RelationalMemoryCell
from keras_relrec.utils import keras_internals

ATOL = 1e-5


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def weights_of(cell):
    """The cell's weights by sublayer, float64."""
    w = {}
    for layer in keras_internals.sublayers(cell):
        w[layer.name] = [v.numpy().astype("float64") for v in layer.weights]
    return w


def reference_step(x, memory, w, cfg):
    """One step of the reference; x (B, F) or (B, r, F), memory (B, N, D)."""
    N, H, K, V = cfg["mem_slots"], cfg["num_heads"], cfg["key_size"], cfg["head_size"]
    kernel, bias = w["input_projection"]
    x_hat = x @ kernel + bias
    if x_hat.ndim == 2:
        x_hat = x_hat[:, None]
    z = np.concatenate([memory, x_hat], 1)
    for b in range(cfg["num_blocks"]):
        qkv = z @ w[f"block_{b}_qkv"][0] + w[f"block_{b}_qkv"][1]
        qkv = layer_norm(qkv, *w[f"block_{b}_qkv_norm"])
        B, R, _ = qkv.shape
        qkv = qkv.reshape(B, R, H, 2 * K + V).transpose(0, 2, 1, 3)
        q, k, v = qkv[..., :K] * K ** -0.5, qkv[..., K:2 * K], qkv[..., 2 * K:]
        logits = q @ k.transpose(0, 1, 3, 2)
        a = np.exp(logits - logits.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        attended = (a @ v).transpose(0, 2, 1, 3).reshape(B, R, H * V)
        z = layer_norm(z + attended, *w[f"block_{b}_attention_norm"])
        h = z
        for m in range(cfg["attention_mlp_layers"]):
            h = h @ w[f"mlp_{m}"][0] + w[f"mlp_{m}"][1]
            if m < cfg["attention_mlp_layers"] - 1:
                h = np.maximum(h, 0.0)
        z = layer_norm(z + h, *w[f"block_{b}_mlp_norm"])
    candidate = z[:, :N]
    if cfg["gate_style"] is None:
        return candidate
    g = cfg["gate_width"]
    gates = np.tanh(memory) @ w["gate_memory"][0] + w["gate_memory"][1]
    gates = gates + (x_hat.reshape(x_hat.shape[0], -1) @ w["gate_input"][0] + w["gate_input"][1])[:, None]
    i = sigmoid(gates[..., :g] + cfg["input_bias"])
    f = sigmoid(gates[..., g:] + cfg["forget_bias"])
    return i * np.tanh(candidate) + f * memory


def identity_memory(batch, n, d):
    eye = np.zeros((n, d))
    m = min(n, d)
    eye[np.arange(m), np.arange(m)] = 1.0
    return np.broadcast_to(eye, (batch, n, d)).copy()


CONFIGS = {
    "one_block_unit": dict(mem_slots=3, head_size=4, num_heads=2, num_blocks=1, gate_style="unit"),
    "two_blocks_memory": dict(mem_slots=3, head_size=4, num_heads=2, num_blocks=2, gate_style="memory"),
    "no_gates": dict(mem_slots=3, head_size=4, num_heads=2, num_blocks=2, gate_style=None),
    "key_size_differs": dict(mem_slots=2, head_size=3, num_heads=2, key_size=5, gate_style="unit"),
    "more_slots_than_width": dict(mem_slots=6, head_size=2, num_heads=2, num_blocks=2,
                                  attention_mlp_layers=3, gate_style="unit"),
    "input_rows": dict(mem_slots=3, head_size=4, num_heads=1, input_rows=2, gate_style="memory",
                       forget_bias=0.5, input_bias=-0.3),
}


def full_config(cfg):
    cfg = {"num_heads": 1, "num_blocks": 1, "forget_bias": 1.0, "input_bias": 0.0,
           "attention_mlp_layers": 2, "key_size": cfg["head_size"], **cfg}
    d = cfg["num_heads"] * cfg["head_size"]
    cfg["gate_width"] = {"unit": d, "memory": 1, None: 0}[cfg["gate_style"]]
    return cfg


def make(cfg, rng, batch=2, steps=4, features=5, dtype="float32"):
    cell = RelationalMemoryCell(**cfg, bias_initializer="random_normal")
    shape = (batch, steps, features) if "input_rows" not in cfg else (batch, steps, cfg["input_rows"], features)
    x = rng.normal(size=shape).astype(dtype)
    rnn = keras.layers.RNN(cell, return_sequences=True, return_state=True)
    rnn(x)
    return cell, rnn, x


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("start", ["identity", "given"])
def test_steps_match_the_reference(name, start, precision):
    rng = np.random.default_rng(0)
    cfg = full_config(CONFIGS[name])
    cell, rnn, x = make(CONFIGS[name], rng, dtype=precision.dtype)
    n, d = cfg["mem_slots"], cfg["num_heads"] * cfg["head_size"]
    if start == "identity":
        memory = identity_memory(len(x), n, d)
        seq, flat, started = rnn(x)
    else:
        memory = rng.normal(size=(len(x), n, d))
        initial = [precision.array(memory.reshape(len(x), -1)), precision.array(np.ones((len(x), 1)))]
        seq, flat, started = rnn(x, initial_state=initial)
    w = weights_of(cell)
    want = []
    for t in range(x.shape[1]):
        memory = reference_step(x[:, t].astype("float64"), memory, w, cfg)
        want.append(memory.reshape(len(x), -1))
    precision.assert_close(seq, np.stack(want, 1), atol=ATOL)
    precision.assert_close(flat, want[-1], atol=ATOL)
    np.testing.assert_array_equal(started, np.ones((len(x), 1)))


def test_initial_memory_is_padded_or_truncated_identity():
    wide = RelationalMemoryCell(mem_slots=2, head_size=3, num_heads=1)
    np.testing.assert_array_equal(wide.initial_memory(1)[0], [[1, 0, 0], [0, 1, 0]])
    narrow = RelationalMemoryCell(mem_slots=4, head_size=2, num_heads=1)
    np.testing.assert_array_equal(narrow.initial_memory(1)[0], [[1, 0], [0, 1], [0, 0], [0, 0]])


def test_saturated_gates_keep_the_memory():
    """forget_bias=+inf and input_bias=−inf: M_t = M_{t-1} exactly."""
    rng = np.random.default_rng(1)
    cell = RelationalMemoryCell(mem_slots=3, head_size=4, num_heads=2,
                                forget_bias=float("inf"), input_bias=float("-inf"))
    x = rng.normal(size=(2, 5, 6)).astype("float32")
    memory = rng.normal(size=(2, 24)).astype("float32")
    seq = keras.layers.RNN(cell, return_sequences=True)(x, initial_state=[memory, np.ones((2, 1), "float32")])
    for t in range(5):
        np.testing.assert_array_equal(seq[:, t], memory)


def test_permuting_memory_rows_permutes_the_next_memory():
    rng = np.random.default_rng(2)
    cell = RelationalMemoryCell(mem_slots=5, head_size=3, num_heads=2, num_blocks=2,
                                bias_initializer="random_normal")
    keras.layers.RNN(cell)(np.zeros((1, 1, 4), "float32"))
    x = rng.normal(size=(2, 4)).astype("float32")
    memory = rng.normal(size=(2, 5, 6)).astype("float32")
    perm = rng.permutation(5)
    ones = np.ones((2, 1), "float32")
    new, _, _ = cell.step(x, [memory.reshape(2, -1), ones])
    new_perm, _, _ = cell.step(x, [memory[:, perm].reshape(2, -1), ones])
    np.testing.assert_allclose(np.asarray(new_perm), np.asarray(new)[:, perm], atol=ATOL)


def test_stateful_reset_restores_the_identity_memory():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 3, 4)).astype("float32")
    cell = RelationalMemoryCell(mem_slots=3, head_size=2, num_heads=2)
    rnn = keras.layers.RNN(cell, stateful=True, return_sequences=True)
    first = np.asarray(rnn(x))
    rnn(x)  # the memory moves on
    rnn.reset_state()
    np.testing.assert_allclose(rnn(x), first, atol=ATOL)
    # and the first run started from the identity:
    w = weights_of(cell)
    cfg = full_config(dict(mem_slots=3, head_size=2, num_heads=2, gate_style="unit"))
    want = reference_step(x[:, 0].astype("float64"), identity_memory(2, 3, 4), w, cfg)
    np.testing.assert_allclose(first[:, 0], want.reshape(2, -1), atol=ATOL)
