"""A compression of heavy-tailed features, written with `keras.ops` only."""

import math

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_relrec")
def asinh(x):
    """asinh(x) = sign(x) · log(|x| + √(x² + 1)): linear near 0, logarithmic
    in |x| beyond 1.

    Written with ops that TF Lite and TFLM have as builtins (TensorFlow's
    `asinh` is not one), odd by selects, so that large negative x lose no
    precision to cancellation; |x| by a select too, since `abs` has no
    gradient at 0, where asinh's is 1. In float16, where x² overflows
    beyond 256, it is computed beyond |x| = 1 as log|x| + log(1 + √(1 +
    1/x²)); in wider types with one log: log(|x| + √(x² + 1)), or log(2|x|)
    far out.
    Registered, so that an `Activation(asinh)` saves and loads.
    """
    negative = x < 0
    magnitude = ops.where(negative, -x, x)
    if keras.backend.standardize_dtype(x.dtype) != "float16":
        y = _asinh_of_magnitude(magnitude)
    else:
        # Each branch gets an argument that is safe for it; the select
        # keeps the right one (and the other's gradient, zero, stays
        # finite).
        small = ops.minimum(magnitude, 1.0)
        large = ops.maximum(magnitude, 1.0)
        y = ops.where(magnitude > 1.0,
                      ops.log(large) + ops.log(1.0 + ops.sqrt(1.0 + ops.square(1.0 / large))),
                      ops.log(small + ops.sqrt(ops.square(small) + 1.0)))
    return ops.where(negative, -y, y)


# Beyond it asinh(m) = log(2m) to float64's precision (the rest is
# 1/(4m²)), and below it m² is finite in float32 and bfloat16.
_FAR = 2.0**30


def _asinh_of_magnitude(magnitude):
    """asinh(m) for m ≥ 0 with one log: log(m + √(m² + 1)), or log(2m)
    far out, where m² would overflow."""
    far = magnitude > _FAR
    near = ops.minimum(magnitude, _FAR)
    return (ops.log(ops.where(far, magnitude, near + ops.sqrt(ops.square(near) + 1.0)))
            + ops.cast(far, magnitude.dtype) * math.log(2.0))
