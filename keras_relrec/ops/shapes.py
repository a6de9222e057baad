"""Sizes of tensors whose shape may be known only when the graph runs."""

from keras import ops


def axis_size(x, axis):
    """The size of `x` along `axis`: the static int where there is one (no
    shape op in the graph), else a scalar tensor (TensorFlow's dynamic
    lengths)."""
    return x.shape[axis] if x.shape[axis] is not None else ops.shape(x)[axis]
