"""Initializer copies, one per weight."""

import zlib

import keras
from keras import ops


def clone_initializer(initializer, salt):
    """A fresh copy of `initializer` for one weight.

    An unseeded Keras 3 initializer picks its seed when it is created and
    draws the same values on every call, so one instance handed to several
    weights of the same shape makes them start equal. Every weight gets its
    own copy instead (keras-hub's pattern): an unseeded copy picks a new seed;
    a seeded one gets its seed offset by a hash of `salt` (the weight's name),
    so a seeded layer is reproducible and its weights still differ.
    Strings and dicts are returned as they are.
    """
    if not isinstance(initializer, keras.initializers.Initializer):
        return initializer
    config = initializer.get_config()
    seed = config.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool):
        config = {**config, "seed": seed + zlib.crc32(salt.encode()) % 2**16}
    return initializer.__class__.from_config(config)


def dense(units, name, kernel_initializer, bias_initializer, dtype, **kwargs):
    """A `keras.layers.Dense` named `name` with its own initializer copies;
    `kwargs` go to the `Dense` (e.g. `use_bias=False`)."""
    return keras.layers.Dense(
        units,
        kernel_initializer=clone_initializer(kernel_initializer, name),
        bias_initializer=clone_initializer(bias_initializer, name),
        dtype=dtype,
        name=name,
        **kwargs,
    )


class Constant(keras.initializers.Constant):
    """Keras' `Constant`, made in the weight's dtype: Keras' own casts the
    Python number, which TensorFlow makes a float32 tensor first, so a
    float64 weight would start at float32's rounding of it."""

    def __call__(self, shape, dtype=None):
        return ops.full(shape, self.value, dtype=keras.backend.standardize_dtype(dtype))
