"""The pairwise function Ψ(a_i, b_j) of the relation modules (the DRRT,
Belanger Nzakimuena 2022, eqs. 5 and 7), for every pair at once without
the n·m concatenations."""

import keras
from keras import ops

from keras_relrec.ops import masked_softmax
from keras_relrec.ops import zero_masked
from keras_relrec.utils import validation
from keras_relrec.utils.initializers import clone_initializer

PAIRWISE = ("concat", "concat_relu", "dot")


class PairwiseRelation(keras.layers.Layer):
    """Ψ (batch, n, m) for A (batch, n, d_A) and B (batch, m, d_B); a part of
    `GlobalRelation` and `RegionalRelation`.

    With u_i = W_a' a_i and v_j = W_b' b_j (h = `units` each) and W_g = [g_a; g_b]:

    ```
    "concat"       Ψ_ij = W_g [u_i; v_j] = g_a·u_i + g_b·v_j     eq. (5) as written: an outer sum
    "concat_relu"  Ψ_ij = g · ReLU(u_i + v_j + c)                 a hidden layer on [a_i; b_j]
    "dot"          Ψ_ij = u_i · v_j                               embedded dot product
    ```

    "concat" never forms the (n, m, 2h) concatenation: W_g [u; v] splits
    into two dot products, one per side. "concat_relu" forms (n, m, h).
    """

    def __init__(self, units, pairwise, kernel_initializer, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.pairwise = pairwise
        self.kernel_initializer = kernel_initializer

    def build(self, input_shape):
        shape_a, shape_b = input_shape
        self.kernel_a = self._weight("kernel_a", (shape_a[-1], self.units))
        self.kernel_b = self._weight("kernel_b", (shape_b[-1], self.units))
        if self.pairwise == "concat":
            self.score_a = self._weight("score_a", (self.units,))
            self.score_b = self._weight("score_b", (self.units,))
        elif self.pairwise == "concat_relu":
            self.hidden_bias = self.add_weight(name="hidden_bias", shape=(self.units,), initializer="zeros")
            self.score = self._weight("score", (self.units,))

    def _weight(self, name, shape):
        return self.add_weight(name=name, shape=shape, initializer=clone_initializer(self.kernel_initializer, name))

    def call(self, a, b):
        u = ops.matmul(a, self.kernel_a)
        v = ops.matmul(b, self.kernel_b)
        if self.pairwise == "concat":
            return ops.expand_dims(ops.matmul(u, self.score_a), 2) + ops.expand_dims(ops.matmul(v, self.score_b), 1)
        if self.pairwise == "concat_relu":
            hidden = ops.relu(ops.expand_dims(u, 2) + ops.expand_dims(v, 1) + self.hidden_bias)
            return ops.matmul(hidden, self.score)
        return ops.matmul(u, ops.transpose(v, (0, 2, 1)))


def relation_inputs(layer, inputs, mask):
    """A, B in the layer's compute dtype with padding read as zeros, and
    their boolean masks (or None); inputs of different batch sizes, or
    masks of other shapes than theirs, raise `ValueError`."""
    validation.check_same_batch(layer, inputs)
    if mask is None:
        mask = [None, None]
    elif not (isinstance(mask, (list, tuple)) and len(mask) == 2):
        raise ValueError(
            f"{type(layer).__name__} expects `mask` [mask_A, mask_B], one (batch, steps) mask or None per "
            f"input; received a {type(mask).__name__}"
            f"{f' of shape {tuple(mask.shape)}' if hasattr(mask, 'shape') else ''}."
        )
    for name, m, x in zip(("mask_A", "mask_B"), mask, inputs):
        validation.check_mask(layer, m, x, name)
    masks = [None if m is None else ops.cast(m, "bool") for m in mask]
    a, b = (zero_masked(ops.cast(x, layer.compute_dtype), m) for x, m in zip(inputs, masks))
    return a, b, masks[0], masks[1]


def valid_pairs(mask_a, mask_b, a, b):
    """Boolean (batch, n, m), true where both positions are valid; None
    where neither input has a mask."""
    if mask_a is None and mask_b is None:
        return None
    if mask_a is None:
        mask_a = ops.ones(ops.shape(a)[:2], "bool")
    if mask_b is None:
        mask_b = ops.ones(ops.shape(b)[:2], "bool")
    return ops.logical_and(ops.expand_dims(mask_a, 2), ops.expand_dims(mask_b, 1))


def softmax_over_pairs(logits, valid, axis):
    """Softmax along `axis` over the valid pairs (all where `valid` is None)."""
    return ops.softmax(logits, axis=axis) if valid is None else masked_softmax(logits, valid, axis=axis)
