"""A compression of heavy-tailed features, written with `keras.ops` only."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_relrec")
def asinh(x):
    """asinh(x) = sign(x) · log(|x| + √(x² + 1)): linear near 0, logarithmic
    in |x| beyond 1.

    Written with ops that TF Lite and TFLM have as builtins (TensorFlow's
    `asinh` is not one), odd by selects, so that large negative x lose no
    precision to cancellation; |x| by a select too, since `abs` has no
    gradient at 0, where asinh's is 1. Beyond |x| = 1 it is computed as
    log|x| + log(1 + √(1 + 1/x²)), since x² overflows float16 beyond 256.
    Registered, so that an `Activation(asinh)` saves and loads.
    """
    negative = x < 0
    magnitude = ops.where(negative, -x, x)
    # Each branch gets an argument that is safe for it; the select keeps
    # the right one (and the other's gradient, zero, stays finite).
    small = ops.minimum(magnitude, 1.0)
    large = ops.maximum(magnitude, 1.0)
    y = ops.where(magnitude > 1.0,
                  ops.log(large) + ops.log(1.0 + ops.sqrt(1.0 + ops.square(1.0 / large))),
                  ops.log(small + ops.sqrt(ops.square(small) + 1.0)))
    return ops.where(negative, -y, y)
