"""asinh, written with TF Lite builtins, against NumPy float64."""

import numpy as np
import tensorflow as tf
from keras import ops

from keras_relrec.ops import asinh


def test_asinh_matches_numpy_on_both_sides_and_far_out():
    x = np.concatenate([np.linspace(-5, 5, 101), [0.0, 1e-7, -1e-7, 1.0, -1.0, 1e4, -1e4, 3e30, -3e30]])
    np.testing.assert_allclose(ops.convert_to_numpy(asinh(x.astype("float32"))), np.arcsinh(x),
                               rtol=2e-6, atol=1e-7)


def test_asinh_gradient_is_one_over_the_hypotenuse():
    x = tf.constant([-1e3, -2.0, -1.0, 0.0, 0.5, 1.0, 30.0])
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = asinh(x)
    np.testing.assert_allclose(tape.gradient(y, x), 1.0 / np.sqrt(x.numpy().astype("float64") ** 2 + 1.0),
                               rtol=1e-5)


def test_asinh_in_float16_does_not_overflow():
    """x² overflows float16 beyond 256; asinh itself is under 12 there."""
    x = np.array([-6e4, -300.0, -1.5, 0.3, 1.0, 2.0, 300.0, 6e4])
    y = ops.convert_to_numpy(asinh(ops.convert_to_tensor(x, "float16"))).astype("float64")
    np.testing.assert_allclose(y, np.arcsinh(x.astype("float16").astype("float64")), rtol=2e-3)


def test_asinh_in_float64_is_float64_and_exact_far_out():
    x = np.array([-1e300, -3e9, -1.5, -1e-12, 0.0, 2e-9, 0.7, 1.0, 1e9, 2.0**30, 2.0**31, 1e300])
    y = asinh(ops.convert_to_tensor(x, "float64"))
    assert ops.dtype(y) == "float64"
    # log(m + √(m² + 1)) near 0 is log(1 + m): exact to float64's 1e-16 absolutely.
    np.testing.assert_allclose(ops.convert_to_numpy(y), np.arcsinh(x), rtol=1e-15, atol=2e-16)
