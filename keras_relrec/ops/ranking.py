"""The k largest entries of each row from comparisons, without a sort:
TensorFlow Lite for Microcontrollers has no TOPK_V2."""

from keras import ops


def top_k_indices(scores, k, valid=None):
    """Indices of the `k` largest entries of each row, largest first.

    The order of `keras.ops.top_k`, ties to the lower index, found by
    counting for each entry the entries ahead of it (larger, or equal and
    earlier): comparisons, a sum and an equality, ops every runtime has.
    Time and memory grow with n², so it is for short rows (a cache's slots).

    Args:
        scores: (batch, n) float scores.
        k: A static int, 1 ≤ k ≤ n.
        valid: Optional boolean (batch, n): the entries where it is false
            rank after every valid one, in index order, as −inf scores
            would (no −inf is formed: an int8 file could not hold its
            range). Entries whose score is NaN rank so too.

    Returns:
        (batch, k) int32 indices.
    """
    n = scores.shape[-1]
    if not isinstance(k, int) or not 1 <= k <= n:
        raise ValueError(f"Argument `k` must be an int in 1..{n} (the row's length); received k={k!r}.")
    column = ops.arange(n, dtype="int32")
    before = column[None, :] < column[:, None]  # [i, j]: j comes before i
    # A NaN score compares false with every score, so that no entry would
    # rank ahead of it and several would share a place: NaN entries rank as
    # invalid ones, after the others (x == x is false at NaN alone).
    numbers = scores == scores
    valid = numbers if valid is None else ops.logical_and(ops.cast(valid, "bool"), numbers)
    # [b, i, j]: entry j ranks ahead of entry i: valid entries by score,
    # then the invalid ones by index.
    by_score = ops.logical_or(scores[:, None, :] > scores[:, :, None],
                              ops.logical_and(scores[:, None, :] == scores[:, :, None], before[None]))
    both_valid = ops.logical_and(valid[:, None, :], valid[:, :, None])
    both_invalid = ops.logical_not(ops.logical_or(valid[:, None, :], valid[:, :, None]))
    ahead = ops.logical_or(
        ops.logical_or(ops.logical_and(both_valid, by_score), ops.logical_and(both_invalid, before[None])),
        ops.logical_and(valid[:, None, :], ops.logical_not(valid[:, :, None])))
    # Counted in float32 (TFLite Micro sums float and small integer types
    # only), whole numbers compared within 0.5 (an int8 file rounds them).
    place = ops.sum(ops.cast(ahead, "float32"), axis=-1)  # (batch, n)
    # Each of the first k places is held by one entry: its index is the
    # one-hot row's dot product with 0..n − 1 (Keras' argmax of floats
    # traces a bitwise op that TFLite Micro lacks).
    chosen = ops.cast(ops.abs(place[:, None, :] - ops.arange(k, dtype="float32")[:, None]) < 0.5, "float32")
    return ops.cast(ops.round(ops.sum(chosen * ops.cast(column, "float32"), axis=-1)), "int32")


def one_hot(indices, depth, dtype):
    """`keras.ops.one_hot(indices, depth, dtype=dtype)` from comparisons.

    The TFLite converter turns `indices == arange(depth)` of static shapes
    into ONE_HOT, which TensorFlow Lite for Microcontrollers lacks; the
    difference compared with zero stays SUB and EQUAL. Integer indices
    compare exactly (int32, which TFLM subtracts and compares); float
    indices that hold whole numbers (counts) within 0.5, so that the
    rounding of an int8 file's tensors cannot move them.
    """
    if "int" in str(ops.dtype(indices)):
        offsets = ops.expand_dims(ops.cast(indices, "int32"), -1) - ops.arange(depth, dtype="int32")
        return ops.cast(offsets == 0, dtype)
    offsets = ops.expand_dims(ops.cast(indices, "float32"), -1) - ops.arange(depth, dtype="float32")
    return ops.cast(ops.abs(offsets) < 0.5, dtype)
