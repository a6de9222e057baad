"""Scaled dot-product attention of several heads, written once for the
relational memory core and the attention layers built after it."""

from keras import ops

from keras_relrec.ops.masking import masked_softmax
from keras_relrec.ops.shapes import axis_size


def split_heads(x, num_heads):
    """(batch, steps, heads · d) → (batch, heads, steps, d)."""
    # -1 for the batch: defined even for an empty batch, since the other
    # sizes are not zero.
    x = ops.reshape(x, (-1, axis_size(x, -2), num_heads, x.shape[-1] // num_heads))
    return ops.transpose(x, (0, 2, 1, 3))


def merge_heads(x):
    """(batch, heads, steps, d) → (batch, steps, heads · d)."""
    heads, steps, width = x.shape[1], axis_size(x, -2), x.shape[-1]
    return ops.reshape(ops.transpose(x, (0, 2, 1, 3)), (-1, steps, heads * width))


def scaled_dot_product_attention(query, key, value, mask=None, scale=None, bias=None, dropout=None,
                                 return_weights=False):
    """A = softmax(scale · q kᵀ + bias) over the keys, and A v, for every head.

    Args:
        query: (batch, heads, queries, d_k).
        key: (batch, heads, keys, d_k).
        value: (batch, heads, keys, d_v).
        mask: Optional boolean tensor broadcastable to (batch, heads,
            queries, keys), true where a query may attend to a key; a
            masked key gets exactly no weight, and a query with no key to
            attend to gets zeros (see `masked_softmax`).
        scale: A Python number that multiplies the queries before the
            product; default d_k^-½.
        bias: Optional logits added after the scaling, broadcastable to
            (batch, heads, queries, keys): Transformer-XL's position term.
        dropout: Optional function applied to A before A v (attention
            dropout); the weights returned are A before it.
        return_weights: Whether to return A as well.

    Returns:
        A v, (batch, heads, queries, d_v); with `return_weights`, (A v, A)
        with A (batch, heads, queries, keys).
    """
    if scale is None:
        scale = query.shape[-1] ** -0.5
    # The Python number multiplies as it is: it takes the query's dtype, not
    # float32's rounding first.
    logits = ops.matmul(query * scale, ops.swapaxes(key, -1, -2))
    if bias is not None:
        logits = logits + bias
    weights = ops.softmax(logits, axis=-1) if mask is None else masked_softmax(logits, mask, axis=-1)
    attended = ops.matmul(weights if dropout is None else dropout(weights), value)
    return (attended, weights) if return_weights else attended
