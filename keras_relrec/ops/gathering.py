"""Gathers along an axis with int32 positions.

`keras.ops.take_along_axis` makes its positions int64 on TensorFlow, which
TensorFlow Lite for Microcontrollers' GATHER refuses; these gather rows of
a flattened tensor with int32 positions instead (`keras.ops.take`), the
same values on every backend. Traced for TFLite Micro (`micro_forms`), they
are one-hot products: Keras' `take` corrects negative positions with an
int32 SELECT, which TFLite Micro has not either.
"""

import math

from keras import ops

from keras_relrec.ops import micro_forms
from keras_relrec.ops.ranking import one_hot
from keras_relrec.ops.shapes import axis_size


def gather_steps(x, indices):
    """x[b, indices[b, j]] for (batch, steps, ...) float `x` and (batch, n)
    `indices` in 0..steps − 1 (integers, or floats holding whole numbers);
    traced for TFLite Micro, every step of `x` must be finite (a product
    with zero keeps a NaN)."""
    shape = ops.shape(x)  # static sizes where known, else dynamic ones
    steps, trailing = axis_size(x, 1), tuple(shape[2:])
    if micro_forms.enabled():
        flat = ops.reshape(x, (shape[0], steps, -1))
        picked = ops.matmul(one_hot(indices, steps, x.dtype), flat)  # (batch, n, features)
        return ops.reshape(picked, (shape[0], ops.shape(indices)[1]) + trailing)
    rows = ops.reshape(x, (-1,) + trailing)  # (batch · steps, ...)
    starts = ops.arange(shape[0], dtype="int32")[:, None] * steps
    # Float whole numbers cast exactly: no rounding needed off TFLite Micro.
    return ops.take(rows, ops.cast(indices, "int32") + starts, axis=0)


def take_along_last_axis(x, indices):
    """`keras.ops.take_along_axis(x, indices, axis=-1)` for `indices` of x's
    rank that broadcast against x on every axis but the last, in
    0..n − 1 (n: x's last axis); traced for TFLite Micro, `x` must be
    finite."""
    shape = ops.shape(x)
    leading = tuple(shape[:-1])
    size = axis_size(x, -1)
    indices = ops.broadcast_to(ops.cast(indices, "int32"), leading + (indices.shape[-1],))
    if micro_forms.enabled():
        rows, count = math.prod(leading), indices.shape[-1]
        select = ops.reshape(one_hot(indices, size, x.dtype), (rows, count, size))
        picked = ops.matmul(select, ops.reshape(x, (rows, size, 1)))
        return ops.reshape(picked, leading + (count,))
    starts = ops.reshape(ops.arange(math.prod(leading), dtype="int32") * size, leading + (1,))
    return ops.take(ops.reshape(x, (-1,)), indices + starts, axis=0)


def lookup_rows(table, ids, outside_zero=False):
    """table[ids]: the rows of a (rows, width) `table` at integer `ids` in
    0..rows − 1, (…ids, width); with `outside_zero`, a zero row for an id
    outside. Traced for TFLite Micro, a one-hot product (whose row for an
    id outside is zeros: no int32 SELECT, which TFLite Micro has not)."""
    if micro_forms.enabled():
        return ops.matmul(one_hot(ids, table.shape[0], table.dtype), table)
    ids = ops.cast(ids, "int32")
    if not outside_zero:
        return ops.take(table, ids, axis=0)
    inside = ops.logical_and(ids >= 0, ids < table.shape[0])
    return ops.where(inside[..., None], ops.take(table, ops.where(inside, ids, 0), axis=0), 0.0)
