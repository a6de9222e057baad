"""Trains the contract suite's models on two devices and on one, in a
process of its own (the devices must be set up before the backend starts).

Usage: KERAS_BACKEND=tensorflow python distribution_worker.py DIR
       KERAS_BACKEND=jax XLA_FLAGS=--xla_force_host_platform_device_count=2 python distribution_worker.py DIR

TensorFlow: `tf.distribute.MirroredStrategy` over two logical CPU devices
(the recipe of Keras' own tests); JAX: `keras.distribution.DataParallel`
over the two host devices XLA makes. For every `<id>.case.npz` in DIR (x,
y) with its `<id>.keras`, writes `<id>.<backend>.npz`: the weights after
the same steps of SGD with the same global batch on one device
(`single_<k>`) and on two (`parallel_<k>`), the number of devices used and
on how many each weight is placed. A stateful model (`<id>.stateful`) that
the backend refuses to train data-parallel writes the `refusal` instead.
"""

import os
import pathlib
import sys

import keras
import numpy as np

import keras_relrec  # noqa: F401  (registers the layers)
from tests.contract.npz import unpack

GLOBAL_BATCH = 4


def train(load):
    model = load()
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    return model


def fit(model, x, y):
    model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=1, shuffle=False, verbose=0)
    return [np.asarray(w) for w in model.get_weights()]


def placed_on(variable):
    """How many devices hold a copy or a shard of `variable`."""
    value = variable.value
    if keras.backend.backend() == "tensorflow":
        return len(getattr(value, "values", [value]))
    return len(value.sharding.device_set)


def parallel_scope():
    """A context in which models load onto two devices, and their count."""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        strategy = tf.distribute.MirroredStrategy(["CPU:0", "CPU:1"])
        return strategy.scope, strategy.num_replicas_in_sync
    import contextlib

    import jax

    devices = jax.devices()

    @contextlib.contextmanager
    def scope():
        keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
        try:
            yield
        finally:
            keras.distribution.set_distribution(None)

    return scope, len(devices)


def main(folder):
    folder = pathlib.Path(folder)
    scope, devices = parallel_scope()
    for case in sorted(folder.glob("*.case.npz")):
        name = case.name[: -len(".case.npz")]
        data = dict(np.load(case))
        x, y = unpack(data, "x"), unpack(data, "y")

        def load(name=name):
            return keras.saving.load_model(folder / f"{name}.keras", safe_mode=True)

        out = {"devices": np.array(devices)}
        out.update({f"single_{k}": w for k, w in enumerate(fit(train(load), x, y))})
        with scope():
            model = train(load)
            try:
                out.update({f"parallel_{k}": w for k, w in enumerate(fit(model, x, y))})
            except ValueError as error:
                if not name.endswith(".stateful"):
                    raise
                out["refusal"] = np.array(str(error))
            out["placed_on"] = np.array([placed_on(v) for v in model.weights])
        np.savez(folder / f"{name}.{keras.backend.backend()}.npz", **out)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    main(sys.argv[1])
