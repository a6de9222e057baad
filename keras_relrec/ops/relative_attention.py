"""Transformer-XL's relative positions and memory (Dai et al. 2019), written
with `keras.ops` for the attention layers that use them.

Keys are [memory (M positions); current segment (L positions)], queries the
current segment. Query i sits at key index M + i, so its distance to key j
is M + i − j; the key is in the future when that is negative.
"""

from keras import ops

from keras_relrec.ops.gathering import take_along_last_axis
from keras_relrec.ops.shapes import axis_size
from keras_relrec.utils.dtypes import at_least_float32


def relative_position_encoding(key_length, width, clamp_len=None, dtype="float32"):
    """R: the sinusoids of the distances key_length − 1, …, 1, 0.

    R[c] = [sin(d_c f), cos(d_c f)] with d_c = key_length − 1 − c (clamped
    to at most `clamp_len`) and f_k = 10000^(−2k / width): the sin block
    then the cos block, not interleaved, as in the paper's code.

    Args:
        key_length: Number of keys, an int or a scalar tensor.
        width: The even model width.
        clamp_len: Distances above it use its encoding; None: no clamp.
        dtype: Of the result.

    Returns:
        (key_length, width) tensor.
    """
    # In the result's dtype, float32 at least: a float64 layer gets float64
    # sinusoids (not float32 ones cast up), a float16 one float32's angles.
    compute = at_least_float32(dtype)
    distances = ops.arange(key_length - 1, -1, -1, dtype=compute)
    if clamp_len is not None:
        distances = ops.minimum(distances, float(clamp_len))
    frequencies = 1.0 / (10000.0 ** (ops.arange(0, width, 2, dtype=compute) / width))
    angles = distances[:, None] * frequencies[None, :]
    return ops.cast(ops.concatenate([ops.sin(angles), ops.cos(angles)], axis=-1), dtype)


def relative_shift(scores):
    """Moves position scores from "column c = distance key_length − 1 − c"
    to "column j = key j": out[..., i, j] = scores[..., i, j + L − 1 − i]
    for L queries, the entry for distance M + i − j. Entries for future keys
    (j > M + i) hold other scores; the causal mask must hide them.

    The paper's trick: one zero column in front, the (L, K + 1) rows read as
    (K + 1, L), the first row dropped, the rest read as (L, K) again.

    Args:
        scores: (batch, heads, L, K) with static L and K.
    """
    _, heads, queries, keys = (axis_size(scores, axis) for axis in range(4))
    padded = ops.pad(scores, [[0, 0], [0, 0], [0, 0], [1, 0]])
    padded = ops.reshape(padded, (-1, heads, keys + 1, queries))
    return ops.reshape(padded[:, :, 1:], (-1, heads, queries, keys))


def gather_relative_scores(scores, distances):
    """Picks each query's position score for each key by its distance, for
    keys that are not contiguous (the shift's alternative).

    Args:
        scores: (batch, heads, L, D): column c holds the score for distance
            D − 1 − c (the columns of `relative_position_encoding(D, …)`).
        distances: Integer (batch, L, K): the distance of key k from query
            i; negative ones (future keys, which the causal mask hides) and
            those beyond D − 1 read distance 0 and D − 1.

    Returns:
        (batch, heads, L, K).
    """
    table = scores.shape[-1]
    columns = (table - 1) - ops.clip(ops.cast(distances, "int32"), 0, table - 1)
    return take_along_last_axis(scores, columns[:, None])


def relative_attention_mask(queries, memory_length, key_valid=None, window=None):
    """Which keys each query may attend to.

    Key j is visible to query i iff its distance M + i − j is at least 0
    (causal) and, with `window`, less than `window` (Transformer-XL's
    `same_length`: every query sees the same number of positions), and the
    key is valid.

    Args:
        queries: L (an int, or a scalar tensor for a dynamic length).
        memory_length: M, static.
        key_valid: Optional boolean (batch, M + L): false for padding and
            for memory slots not filled yet.
        window: Optional int.

    Returns:
        Boolean mask broadcastable to (batch, heads, L, M + L).
    """
    distance = (memory_length + ops.arange(queries)[:, None]) - ops.arange(memory_length + queries)[None, :]
    visible = distance >= 0
    if window is not None:
        visible = ops.logical_and(visible, distance < window)
    visible = visible[None, None]
    if key_valid is not None:
        visible = ops.logical_and(visible, ops.cast(key_valid, "bool")[:, None, None, :])
    return visible


def update_memory(memory, inputs, steps=None):
    """The last M positions of [memory; inputs[:, :steps]] (all the inputs
    by default), without gradient: the memory the next segment attends to
    (the paper's SG(·)). `steps` leaves out the padding after a sequence's
    end in its last segment; an int, or a scalar tensor where the padding
    is known only when the graph runs."""
    joined = ops.concatenate([memory, ops.cast(inputs, memory.dtype)], axis=1)
    size = memory.shape[1]
    if steps is None:
        return ops.stop_gradient(joined[:, axis_size(joined, 1) - size :])
    if isinstance(steps, int):
        return ops.stop_gradient(joined[:, steps : steps + size])
    # A slice of static size: a loop's states keep their shapes. -1: the
    # whole batch, whatever it is.
    start = (0, steps) + (0,) * (len(memory.shape) - 2)
    return ops.stop_gradient(ops.slice(joined, start, (-1, size, *memory.shape[2:])))
