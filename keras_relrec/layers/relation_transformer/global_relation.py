"""The global relation module of the Deep (Recurrent) Relation Transformer:
relation maps over every pair of positions of two sequences."""

import math

import keras

from keras_relrec.layers.relation_transformer.pairwise_relation import PAIRWISE
from keras_relrec.layers.relation_transformer.pairwise_relation import PairwiseRelation
from keras_relrec.layers.relation_transformer.pairwise_relation import relation_inputs
from keras_relrec.layers.relation_transformer.pairwise_relation import softmax_over_pairs
from keras_relrec.layers.relation_transformer.pairwise_relation import valid_pairs
from keras_relrec.utils import validation
from keras_relrec.utils.registration import register_layer


@register_layer
class GlobalRelation(keras.layers.Layer):
    """Global relation maps α^g and β^g between two sequences A' and B'.

    Belanger Nzakimuena, "Deep Recurrent Relation Transformer" (2022),
    after Song et al., "Deep Relation Transformer for Diagnosing Glaucoma
    with Optical Coherence Tomography and Visual Field Function", IEEE TMI
    2021:
    eqs. (3)–(5). For A' = (a'_1 … a'_n) of d_A' features and B' = (b'_1 …
    b'_m) of d_B':

    ```
    Ψ^g_ij = W_g [W_a' a'_i ; W_b' b'_j]                 (5)
    α^g_ij = softmax_j(Ψ^g_ij / sqrt(d_B'))              (3)  B's positions weighed for each a'_i
    β^g_ij = softmax_i(Ψ^g_ij / sqrt(d_A'))              (4)  A's positions weighed for each b'_j
    ```

    The DRRT note does not say along which axis each softmax runs; α's rows
    (over j) and β's columns (over i) are the reading under which eqs.
    (10)–(11), T_{b'→a'_i} = Σ_j α_ij W b'_j and T_{a'→b'_j} = Σ_i β_ij W
    a'_i, are weighted means. Both maps are returned as (batch, n, m).

    **Eq. (5) as written is linear** (`pairwise="concat"`): W_g [u_i; v_j]
    = g_a·u_i + g_b·v_j, a term for i plus a term for j. In a softmax over
    j the term for i cancels, so every row of α^g is the same distribution
    over B's positions, and every column of β^g the same over A's: the
    global map says which positions matter, not which pairs. The layer
    computes it as that outer sum, never the (n, m, 2h) concatenation.
    `pairwise="concat_relu"` puts a ReLU hidden layer on the concatenation
    (Ψ_ij = g·ReLU(u_i + v_j + c), Relation Networks' form; (n, m, h)
    numbers), and `pairwise="dot"` takes Ψ_ij = u_i·v_j; both relate pairs.

    Masking: a padded position of A (of B) gets weight zero in every β
    column (α row), and its own row of α (column of β) is zero; what it
    holds reaches nothing.

    Args:
        units: h, the width of the projections W_a' and W_b'.
        pairwise: `"concat"` (default; eq. 5), `"concat_relu"` or `"dot"`.
        kernel_initializer: Of W_a', W_b' and W_g.
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: [A', B'], (batch, n, d_A') and (batch, m, d_B').
        mask: Optional [mask_A, mask_B], boolean (batch, n) and (batch, m).

    Returns:
        [α^g, β^g], each (batch, n, m); α's rows and β's columns sum to 1
        (over the valid positions).

    Example:

    ```python
    relation = keras_relrec.layers.GlobalRelation(16, pairwise="dot")
    alpha, beta = relation([np.random.rand(2, 10, 8), np.random.rand(2, 6, 4)])   # (2, 10, 6) each
    ```
    """

    def __init__(self, units, pairwise="concat", kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.units = validation.check_positive_int("units", units)
        self.pairwise = validation.check_choice("pairwise", pairwise, PAIRWISE)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        self.input_spec = validation.pair_input_specs(self, input_shape)
        self.relation = PairwiseRelation(self.units, self.pairwise, self.kernel_initializer,
                                         dtype=self.dtype_policy, name="pairwise")
        self.relation.build(input_shape)

    def call(self, inputs, mask=None):
        a, b, mask_a, mask_b = relation_inputs(self, inputs, mask)
        psi = self.relation(a, b)
        valid = valid_pairs(mask_a, mask_b, a, b)
        return [
            softmax_over_pairs(psi / math.sqrt(b.shape[-1]), valid, axis=-1),
            softmax_over_pairs(psi / math.sqrt(a.shape[-1]), valid, axis=-2),
        ]

    def compute_mask(self, inputs, mask=None):
        return [None, None]

    def compute_output_shape(self, input_shape):
        shape_a, shape_b = input_shape
        shape = (shape_a[0], shape_a[1], shape_b[1])
        return [shape, shape]

    def get_config(self):
        config = {
            "units": self.units,
            "pairwise": self.pairwise,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }
        return {**super().get_config(), **config}

