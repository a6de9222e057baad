"""The ModelParallel example of docs/distribution.md, checked: the
relational memory's qkv, MLP and gate kernels sharded over a "model" axis
of two JAX host devices by a LayoutMap of their weight paths, with the
outputs and an SGD step of the unsharded model.

Usage: KERAS_BACKEND=jax XLA_FLAGS=--xla_force_host_platform_device_count=2 python model_parallel_worker.py
Prints "ok" and the sharded weights' paths.
"""

import re

import jax
import keras
import numpy as np

from keras_relrec.layers import RelationalMemoryCell

SHARDED = (r".*/block_\d+_qkv/kernel", r".*/mlp_\d+/kernel", r".*/gate_(input|memory)/kernel")


def model():
    inputs = keras.Input((5, 3))
    cell = RelationalMemoryCell(mem_slots=2, head_size=4, num_heads=2, num_blocks=2)
    h = keras.layers.RNN(cell, name="relational_memory")(inputs)
    return keras.Model(inputs, keras.layers.Dense(2, name="logits")(h))


def trained(network, x, y):
    network.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    network.train_on_batch(x, y)
    return [np.asarray(w) for w in network.get_weights()]


def main():
    # The weights from a fixed seed: unseeded, each run drew others, and the
    # sharded sums (in another order) sometimes landed just past 1e-5.
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 5, 3)).astype("float32")
    y = rng.normal(size=(4, 2)).astype("float32")
    reference = model()
    weights = reference.get_weights()
    outputs = np.asarray(reference.predict_on_batch(x))
    after_step = trained(reference, x, y)

    mesh = keras.distribution.DeviceMesh((1, 2), ("batch", "model"), jax.devices())
    layout_map = keras.distribution.LayoutMap(mesh)
    for path in SHARDED:
        layout_map[path] = (None, "model")
    keras.distribution.set_distribution(keras.distribution.ModelParallel(layout_map=layout_map,
                                                                          batch_dim_name="batch"))
    sharded = model()
    sharded.set_weights(weights)
    names = []
    for variable in sharded.weights:
        spec = tuple(variable.value.sharding.spec)
        if any(re.fullmatch(p, variable.path) for p in SHARDED):
            assert spec == (None, "model"), (variable.path, spec)
            shard = variable.value.addressable_shards[0].data
            assert shard.shape == (variable.shape[0], variable.shape[1] // 2), (variable.path, shard.shape)
            names.append(variable.path)
        else:
            assert all(axis is None for axis in spec), (variable.path, spec)
    assert len(names) == 2 + 2 + 2  # two blocks' qkv, two MLP layers, two gates
    np.testing.assert_allclose(np.asarray(sharded.predict_on_batch(x)), outputs, atol=1e-5)
    for got, want in zip(trained(sharded, x, y), after_step):
        np.testing.assert_allclose(got, want, atol=1e-5)
    print("ok", *names)


if __name__ == "__main__":
    main()
