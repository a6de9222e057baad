"""Square roots that TensorFlow Lite for Microcontrollers runs in int8."""

from keras import ops

from keras_relrec.ops import micro_forms


def sqrt(x, positive=False):
    """`keras.ops.sqrt` of non-negative `x`, 0 where x is 0 with a zero
    gradient there (sqrt's is infinite, which would become NaN); traced for
    TFLite Micro (`micro_forms`), x · rsqrt(x): TFLM's SQRT takes float
    only, its RSQRT int8 too.

    With `positive=True` the caller promises x > 0 everywhere (a sum with
    an epsilon), and no comparison with zero is traced: in an int8 file the
    zero takes the scale of that epsilon, and TFLM aborts on the ratio.
    """
    if positive:
        return x * ops.rsqrt(x) if micro_forms.enabled() else ops.sqrt(x)
    nonzero = x > 0
    safe = ops.where(nonzero, x, ops.ones_like(x))
    root = safe * ops.rsqrt(safe) if micro_forms.enabled() else ops.sqrt(safe)
    return ops.where(nonzero, root, ops.zeros_like(x))
