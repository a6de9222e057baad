"""Sonnet 1 RelationalMemory checkpoints load into RelationalMemoryCell and
compute the reference's step.

The test writes its own variables under the reference's names (see the
module docstring of keras_relrec.migrate.sonnet_relational_memory for the
creation order that gives them) and computes the step from them by name,
without going through the cell's weights."""

import keras
import numpy as np
import pytest

from keras_relrec.layers import RelationalMemoryCell
from keras_relrec.migrate import load_sonnet_checkpoint
from keras_relrec.migrate import load_sonnet_relational_memory
from keras_relrec.migrate import sonnet_variable_names
from tests.layers.relational.test_relational_memory_equations import identity_memory
from tests.layers.relational.test_relational_memory_equations import layer_norm
from tests.layers.relational.test_relational_memory_equations import sigmoid
from tests.migrate.weights import weights_bytes

S = "relational_memory"


def sonnet_variables(rng, features, mem_slots, head_size, num_heads, key_size, num_blocks,
                     mlp_layers, gate_width):
    d = num_heads * head_size
    qkv = num_heads * (2 * key_size + head_size)
    v = {}

    def linear(name, n_in, n_out):
        v[f"{S}/{name}/w"] = rng.normal(scale=0.4, size=(n_in, n_out))
        v[f"{S}/{name}/b"] = rng.normal(scale=0.1, size=(n_out,))

    def norm(index, width):
        name = "layer_norm" if index == 0 else f"layer_norm_{index}"
        v[f"{S}/{name}/gamma"] = 1 + rng.normal(scale=0.1, size=(width,))
        v[f"{S}/{name}/beta"] = rng.normal(scale=0.1, size=(width,))

    linear("linear", features, d)
    for b in range(num_blocks):
        linear(f"linear_{b + 1}", d, qkv)
        norm(3 * b, qkv)
        norm(3 * b + 1, d)
        norm(3 * b + 2, d)
    for k in range(mlp_layers):
        linear(f"mlp/linear_{k}", d, d)
    linear(f"linear_{num_blocks + 1}", d, 2 * gate_width)
    linear(f"linear_{num_blocks + 2}", d, 2 * gate_width)
    return v


def sonnet_step(x, memory, v, mem_slots, head_size, num_heads, key_size, num_blocks,
                mlp_layers, gate_width, forget_bias=1.0, input_bias=0.0):
    """The reference's _build, written against its variable names."""
    def lin(name, a):
        return a @ v[f"{S}/{name}/w"] + v[f"{S}/{name}/b"]

    def ln(index, a):
        name = "layer_norm" if index == 0 else f"layer_norm_{index}"
        return layer_norm(a, v[f"{S}/{name}/gamma"], v[f"{S}/{name}/beta"])

    x_hat = lin("linear", x)[:, None]
    z = np.concatenate([memory, x_hat], 1)
    B, R, _ = z.shape
    for b in range(num_blocks):
        qkv = ln(3 * b, lin(f"linear_{b + 1}", z))
        qkv = qkv.reshape(B, R, num_heads, -1).transpose(0, 2, 1, 3)
        q = qkv[..., :key_size] * key_size ** -0.5
        k, val = qkv[..., key_size:2 * key_size], qkv[..., 2 * key_size:]
        logits = q @ k.transpose(0, 1, 3, 2)
        w = np.exp(logits - logits.max(-1, keepdims=True))
        w /= w.sum(-1, keepdims=True)
        z = ln(3 * b + 1, z + (w @ val).transpose(0, 2, 1, 3).reshape(B, R, -1))
        h = z
        for m in range(mlp_layers):
            h = lin(f"mlp/linear_{m}", h)
            h = np.maximum(h, 0) if m < mlp_layers - 1 else h
        z = ln(3 * b + 2, h + z)
    candidate = z[:, :mem_slots]
    gates = lin(f"linear_{num_blocks + 2}", np.tanh(memory)) + lin(f"linear_{num_blocks + 1}", x_hat[:, 0])[:, None]
    i = sigmoid(gates[..., :gate_width] + input_bias)
    f = sigmoid(gates[..., gate_width:] + forget_bias)
    return i * np.tanh(candidate) + f * memory


CONFIG = dict(mem_slots=3, head_size=4, num_heads=2, key_size=3, num_blocks=2)


@pytest.mark.parametrize("names", ["checkpoint", "tf_variable"])
def test_loaded_cell_computes_the_reference(names):
    rng = np.random.default_rng(0)
    v = sonnet_variables(rng, features=5, mlp_layers=2, gate_width=8, **CONFIG)
    given = v if names == "checkpoint" else {f"{k}:0": a for k, a in v.items()}
    given["other_module/linear/w"] = np.zeros(3)  # other modules are ignored
    cell = load_sonnet_relational_memory(RelationalMemoryCell(**CONFIG), given)
    x = rng.normal(size=(2, 4, 5)).astype("float32")
    got = keras.layers.RNN(cell, return_sequences=True)(x)
    memory = identity_memory(2, 3, 8)
    for t in range(4):
        memory = sonnet_step(x[:, t].astype("float64"), memory, v, mlp_layers=2, gate_width=8, **CONFIG)
        np.testing.assert_allclose(got[:, t], memory.reshape(2, -1), atol=1e-5)


def test_mismatched_checkpoints_are_refused():
    rng = np.random.default_rng(1)
    v = sonnet_variables(rng, features=5, mlp_layers=2, gate_width=8, **CONFIG)
    with pytest.raises(ValueError, match="missing .*layer_norm_8.*linear_5"):
        load_sonnet_relational_memory(RelationalMemoryCell(**{**CONFIG, "num_blocks": 3}), v)
    wrong = dict(v)
    wrong[f"{S}/linear_1/w"] = np.zeros((8, 7))
    with pytest.raises(ValueError, match=r"key 'relational_memory/linear_1/w' holds shape \(8, 7\)"):
        load_sonnet_relational_memory(RelationalMemoryCell(**CONFIG), wrong)


@pytest.mark.parametrize("bad, problem", [("a", "holds dtype <U1"), (np.nan, "holds 16 non-finite")])
def test_a_bad_last_array_is_refused_before_any_weight_is_written(bad, problem):
    """Strings or NaN in the last array read: a ValueError naming it, and
    not one of the 17 arrays before it written."""
    rng = np.random.default_rng(3)
    v = sonnet_variables(rng, features=5, mlp_layers=2, gate_width=8, **CONFIG)
    cell = load_sonnet_relational_memory(RelationalMemoryCell(**CONFIG), v)
    last = list(sonnet_variable_names(cell))[-1]
    assert last == f"{S}/linear_4/b"
    bad_variables = {**{k: a + 1 for k, a in v.items()}, last: np.full((16,), bad)}
    before = weights_bytes(cell)
    with pytest.raises(ValueError, match=f"key '{last}' {problem}"):
        load_sonnet_relational_memory(cell, bad_variables)
    assert weights_bytes(cell) == before


def test_reads_a_tf1_checkpoint_file(tmp_path):
    """A checkpoint written by TF1's Saver, as Sonnet 1 training wrote it."""
    import tensorflow as tf

    rng = np.random.default_rng(2)
    v = sonnet_variables(rng, features=5, mlp_layers=2, gate_width=8, **CONFIG)
    with tf.Graph().as_default():
        for name, value in v.items():
            tf.compat.v1.Variable(value.astype("float32"), name=name)
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            prefix = saver.save(session, str(tmp_path / "model.ckpt"))
    cell = load_sonnet_checkpoint(RelationalMemoryCell(**CONFIG), prefix)
    np.testing.assert_allclose(cell.input_projection.kernel.numpy(), v[f"{S}/linear/w"], rtol=1e-6)
    np.testing.assert_allclose(cell.gate_memory.bias.numpy(), v[f"{S}/linear_4/b"], rtol=1e-6)
    np.testing.assert_allclose(cell.blocks[1].mlp_norm.gamma.numpy(), v[f"{S}/layer_norm_5/gamma"], rtol=1e-6)
