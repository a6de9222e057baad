"""Masks applied by selection: what a masked entry holds (NaN and inf
included) never reaches a valid output or a weight gradient, which a
multiplication by zero would not ensure (NaN · 0 is NaN)."""

import keras
import numpy as np
from keras import ops

from keras_relrec.ops import micro_forms
from keras_relrec.ops import roots
from keras_relrec.ops.gathering import gather_steps
from keras_relrec.ops.shapes import axis_size


def _broadcast_mask(mask, x):
    """`mask` as a boolean tensor with `x`'s rank (trailing axes of one)."""
    mask = ops.cast(mask, "bool")
    while len(mask.shape) < len(x.shape):
        mask = ops.expand_dims(mask, -1)
    return mask


def zero_masked(x, mask=None):
    """`x` with zeros where `mask` is false; `mask` covers x's leading axes
    ((batch, steps) for sequences, (batch, height, width) for maps)."""
    if mask is None:
        return x
    return ops.where(_broadcast_mask(mask, x), x, ops.zeros_like(x))


def any_valid(mask, axis):
    """Whether any entry of `mask` along `axis` is true, as a count above
    zero: TFLite Micro has no REDUCE_ANY, and a max (REDUCE_MAX) refuses an
    empty batch, which a sum does not.

    Args:
        mask: A boolean or numeric tensor; nonzero entries count as true.
        axis: An int or a tuple of ints, the axes to reduce.

    Returns:
        A boolean tensor, `mask` with `axis` reduced. The count is float32
        whatever the dtype policy: a float16 count is exact only up to 2048.

    Example:

    >>> from keras import ops
    >>> mask = ops.convert_to_tensor([[True, False], [False, False]])
    >>> ops.convert_to_numpy(any_valid(mask, axis=1))
    array([ True, False])
    """
    return ops.sum(ops.cast(mask, "float32"), axis=axis) > 0


def masked_mean(x, mask=None, axis=1):
    """Mean of `x` over `axis`, counting only entries where `mask` is true.

    Args:
        x: (batch, steps, ...) tensor.
        mask: `None`, or a boolean (batch, steps) tensor.
        axis: The steps axis.

    Returns:
        `x` with `axis` reduced. A row with no valid step, or no step at
        all, gives zeros.
    """
    if mask is None:
        total = ops.sum(x, axis=axis)
        count = ops.cast(ops.shape(x)[axis], x.dtype)
    else:
        mask = _broadcast_mask(mask, x)
        total = ops.sum(ops.where(mask, x, ops.zeros_like(x)), axis=axis)
        count = ops.sum(ops.cast(mask, x.dtype), axis=axis)
    return total / ops.maximum(count, 1.0)


def masked_scale(x, mask=None, epsilon=1e-20, axis=1):
    """Mean μ and scale σ̃ of `x` over `axis`, valid entries only:

    ```
    μ = mean_t x_t        σ̃ = √(mean_t (x_t − μ)² + ε + (8 · ε_m · μ)²)
    ```

    with ε_m the machine epsilon of `x`'s dtype: deviations from the mean
    within a few roundings of it count as none, so a flat series does not
    become noise of unit scale. The mean is taken in two passes (the mean,
    then the mean of what is left), so that its rounding does not grow
    with the number of steps: a constant series of 5,000 float32 steps
    leaves deviations far below the term above.

    Args:
        x: (batch, steps, ...) tensor.
        mask: `None`, or a boolean (batch, steps) tensor.
        epsilon: ε > 0, added to the variance.
        axis: The steps axis.

    Returns:
        `(μ, σ̃)`, each `x` with `axis` kept as one entry (for broadcasting).
        A row with no valid step gives μ = 0 and σ̃ = √ε.
    """
    rough = ops.expand_dims(masked_mean(x, mask, axis), axis)
    mean = rough + ops.expand_dims(masked_mean(x - rough, mask, axis), axis)
    # Zeros before the square: its gradient, 2 · deviation, would be NaN at
    # a masked step holding NaN, and reach the mean.
    deviation = zero_masked(x - mean, mask)
    variance = ops.expand_dims(masked_mean(deviation * deviation, mask, axis), axis)
    roundoff = 8.0 * float(np.finfo(keras.backend.standardize_dtype(x.dtype)).eps)
    return mean, roots.sqrt(variance + epsilon + ops.square(roundoff * mean), positive=epsilon > 0)


def masked_segment_mean(x, mask=None, num_segments=1):
    """Means of `x` over `num_segments` consecutive segments of its steps,
    counting only steps where `mask` is true.

    Step t of T belongs to segment ⌊t · S / T⌋ (S = `num_segments`), so the
    segments are as equal as T allows (⌊T/S⌋ or ⌈T/S⌉ steps each, for
    T ≥ S) and every step is in exactly one. The segments are of the steps'
    axis, the same for every sequence: a sequence padded at the end leaves
    its last segments without a valid step.

    Args:
        x: (batch, steps, channels) tensor.
        mask: `None`, or a boolean (batch, steps) tensor.
        num_segments: Positive int S.

    Returns:
        (batch, S, channels). A segment with no valid step, or no step at
        all, gives zeros. Masked steps are selected away; the segments'
        sums are one matrix product, so an inf or NaN at a valid step
        reaches every segment, not its own alone.
    """
    steps = ops.shape(x)[1]
    # (T, S) indicators of each step's segment, as comparisons: s · T ≤
    # t · S < (s + 1) · T. TF Lite would make ONE_HOT (which TFLM lacks) of
    # an equality with a range. Matrix products sum the segments.
    scaled = ops.arange(steps, dtype="int32")[:, None] * num_segments
    start = ops.arange(num_segments, dtype="int32") * steps
    members = ops.cast((scaled >= start) & (scaled < start + steps), x.dtype)
    if mask is None:
        valid = ops.ones(ops.shape(x)[:2], x.dtype)
    else:
        valid = ops.cast(mask, x.dtype)
        x = zero_masked(x, mask)
    total = ops.matmul(ops.transpose(members), x)
    count = ops.expand_dims(ops.matmul(valid, members), -1)
    return total / ops.maximum(count, 1.0)


def masked_softmax(logits, valid, axis=-1):
    """Softmax along `axis` over the entries where `valid` is true.

    `valid` is boolean and broadcasts against `logits`. Other entries get
    exactly zero weight whatever they hold, the softmax is exact whatever
    the range of the valid logits, and a slice with no valid entry gets all
    zeros rather than NaN.
    """
    if 0 in logits.shape:  # Keras' max refuses empty tensors
        return ops.zeros_like(logits)
    valid = ops.cast(valid, "bool")
    zeros = ops.zeros_like(logits)
    if micro_forms.enabled():
        return _masked_softmax_builtin(logits, valid, zeros, axis)
    # The valid maximum (−inf for a slice with no valid entry, which the
    # selections below never let through).
    lowest = ops.full_like(logits, float("-inf"))
    shift = ops.stop_gradient(ops.max(ops.where(valid, logits, lowest), axis=axis, keepdims=True))
    # Selected before exp, so that a masked entry can neither overflow nor
    # reach a gradient; no clipping (a `minimum` at 0 would halve the
    # gradient of the largest logit on backends that split ties, as JAX).
    exp = ops.where(valid, ops.exp(ops.where(valid, logits - shift, zeros)), zeros)
    total = ops.sum(exp, axis=axis, keepdims=True)
    return exp / ops.where(total > 0, total, ops.ones_like(total))


def _masked_softmax_builtin(logits, valid, zeros, axis):
    """`masked_softmax` by the SOFTMAX op, which TFLite Micro runs in int8
    (its EXP takes float only), with no −inf (an int8 file cannot hold its
    range): the masked entries read the mean of the valid ones, within their
    range, and get zero weight after; the weights are then renormalised."""
    ones = ops.ones_like(logits)
    weight = ops.where(valid, ones, zeros)
    count = ops.sum(weight, axis=axis, keepdims=True)
    fill = ops.sum(ops.where(valid, logits, zeros), axis=axis, keepdims=True) / ops.maximum(count, 1.0)
    kept = ops.softmax(ops.where(valid, logits, fill), axis=axis) * weight
    total = ops.sum(kept, axis=axis, keepdims=True)
    return kept / ops.where(total > 0, total, ops.ones_like(total))


def valid_steps_first(x, mask):
    """Moves each row's valid steps, in order, to its front.

    Args:
        x: (batch, steps, ...).
        mask: Boolean (batch, steps), true for valid steps.

    Returns:
        `x` with every row's valid steps first, then its masked steps as
        zeros (whatever they held), and the number of valid steps per row,
        (batch,) int32. `valid_steps_back` undoes it.
    """
    mask = ops.cast(mask, "bool")
    steps = axis_size(x, 1)
    positions = ops.arange(steps, dtype="int32")[None]
    if micro_forms.enabled():
        # No sort: place d takes the step after the d valid steps before
        # it, the number of steps with at most d valid steps up to them.
        # Counted in float32 (TFLite Micro's CUMSUM and SUM take no int32),
        # whole numbers compared within 0.5, which an int8 file's rounding
        # cannot cross (below 255 steps).
        counts = ops.cumsum(ops.cast(mask, "float32"), axis=1)  # (batch, steps)
        place = ops.cast(positions, "float32")  # (1, steps)
        sources = ops.sum(ops.cast(counts[:, None, :] < ops.transpose(place) + 0.5, "float32"), axis=-1)
        valid = counts[:, -1:]
        front = gather_steps(zero_masked(x, mask), ops.minimum(sources, float(steps - 1)))
        return zero_masked(front, place < valid - 0.5), ops.cast(ops.round(valid[:, 0]), "int32")
    # Distinct keys, so that the order of the sort is defined on every
    # backend: a valid step keeps its position, a masked one goes after all.
    keys = ops.where(mask, positions, positions + steps)
    front = gather_steps(zero_masked(x, mask), ops.argsort(keys, axis=1))
    return front, ops.sum(ops.cast(mask, "int32"), axis=1)


def valid_steps_back(y, mask):
    """The inverse of `valid_steps_first` for outputs (batch, steps, ...):
    every valid step gets the output of its place among the valid steps,
    a masked step zeros."""
    mask = ops.cast(mask, "bool")
    # Counted in float32 (exact to 2^24 steps): TFLite Micro's CUMSUM takes no int32.
    rank = ops.maximum(ops.cumsum(ops.cast(mask, "float32"), axis=1) - 1.0, 0.0)
    return zero_masked(gather_steps(y, rank), mask)
