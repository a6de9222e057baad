"""Mean over an axis that skips masked entries."""

from keras import ops


def masked_mean(x, mask=None, axis=1):
    """Mean of `x` over `axis`, counting only entries where `mask` is true.

    Args:
        x: (batch, steps, ...) tensor.
        mask: `None`, or a boolean (batch, steps) tensor.
        axis: The steps axis.

    Returns:
        `x` with `axis` reduced. A row with no valid step gives zeros.
    """
    if mask is None:
        return ops.mean(x, axis=axis)
    weights = ops.cast(mask, x.dtype)
    while len(weights.shape) < len(x.shape):
        weights = ops.expand_dims(weights, -1)
    total = ops.sum(x * weights, axis=axis)
    count = ops.sum(weights, axis=axis)
    return total / ops.maximum(count, ops.cast(1.0, x.dtype))
