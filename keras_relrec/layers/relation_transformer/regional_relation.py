"""The guided regional relation module of the Deep (Recurrent) Relation
Transformer: relation maps within K corresponding regions of two
sequences."""

import math

import keras
from keras import ops

from keras_relrec.layers.relation_transformer import region_map
from keras_relrec.layers.relation_transformer.pairwise_relation import PAIRWISE
from keras_relrec.layers.relation_transformer.pairwise_relation import PairwiseRelation
from keras_relrec.layers.relation_transformer.pairwise_relation import relation_inputs
from keras_relrec.layers.relation_transformer.pairwise_relation import softmax_over_pairs
from keras_relrec.layers.relation_transformer.pairwise_relation import valid_pairs
from keras_relrec.utils import validation
from keras_relrec.utils.dtypes import at_least_float32
from keras_relrec.utils.registration import register_layer


@register_layer
class RegionalRelation(keras.layers.Layer):
    """Guided regional relation maps α^{r(k)} and β^{r(k)}, k = 1 … K.

    Belanger Nzakimuena, "Deep Recurrent Relation Transformer" (2022),
    after Song et al., "Deep Relation Transformer for Diagnosing Glaucoma
    with Optical Coherence Tomography and Visual Field Function", IEEE TMI
    2021:
    eqs. (6)–(9). A' (batch, n, d_A') and B' (batch, m, d_B') are divided
    into K corresponding regions A'_k, B'_k (`regions`):

    ```
    R^{r(k)}_ij = 1 if a'_i ∈ A'_k and b'_j ∈ B'_k, else 0              (8)
    Ψ^{r(k)}_ij = R^{r(k)}_ij W_r [W_a' a'_i ; W_b' b'_j]              (7)
    α^{r(k)}_ij = softmax_{j: R^{r(k)}_ij = 1}(Ψ^{r(k)}_ij) / C_r        (6)
    β^{r(k)}_ij = softmax_{i: R^{r(k)}_ij = 1}(Ψ^{r(k)}_ij) / C'_r
    C_r = Σ_{i,j,k} R^{r(k)}_ij / sqrt(d_B'),   C'_r = Σ_{i,j,k} R^{r(k)}_ij / sqrt(d_A')     (9)
    ```

    The softmax of region k runs over region k's pairs only: pairs outside
    it are masked out (weight exactly zero), not given the logit 0 that
    R = 0 in eq. (7) would give them; a row of α^{r(k)} whose a'_i is not
    in A'_k (a column of β whose b'_j is not in B'_k) is all zeros. Each
    other row of α^{r(k)} sums to 1/C_r, and each column of β to 1/C'_r
    (the DRRT note says β is computed "in a similar way"; C'_r takes d_A' as β^g
    does in eq. 4). W_r, W_a' and W_b' are shared by the K regions; they
    are this layer's own, apart from the global module's. `pairwise`
    chooses the form of W_r[·;·] as in `GlobalRelation`: as written
    (`"concat"`), the term for a'_i cancels in α's softmax.

    Masking: a padded position is also masked out of every softmax, and
    its rows and columns are zeros. C_r counts the pairs the region map
    defines, padded or not (in float32 at least: under float16 the count
    would overflow at 256 × 256 pairs). Under float16 the entries themselves,
    about sqrt(d_B') / (Σ R · |B'_k|), fall below float16's normal range
    (6e-5) for long sequences and lose precision; bfloat16 keeps float32's
    range.

    Args:
        units: h, the width of the projections W_a' and W_b'.
        regions: K, the number of regions of an equal split (default 2):
            region k holds positions floor(k·n/K) … floor((k+1)·n/K) − 1
            of A, and likewise of B (any lengths of at least K positions
            each: no region is left empty). Or a pair
            `(regions_a, regions_b)` of lists with one entry per position
            (the inputs' lengths must then match): its region index, -1 for
            none, or a list of indices for a position in several regions.
            Every region must hold positions of both inputs.
        pairwise: `"concat"` (default; eq. 7), `"concat_relu"` or `"dot"`.
        kernel_initializer: Of W_a', W_b' and W_r.
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: [A', B'], (batch, n, d_A') and (batch, m, d_B').
        mask: Optional [mask_A, mask_B], boolean (batch, n) and (batch, m).

    Returns:
        [α^r, β^r], each (batch, K, n, m).

    Example:

    ```python
    # Positions 0–2 of A with 0–1 of B, 3–5 with 2–3; A's position 6 in none.
    relation = keras_relrec.layers.RegionalRelation(16, regions=([0, 0, 0, 1, 1, 1, -1], [0, 0, 1, 1]))
    alpha, beta = relation([np.random.rand(2, 7, 8), np.random.rand(2, 4, 8)])   # (2, 2, 7, 4) each
    ```
    """

    def __init__(self, units, regions=2, pairwise="concat", kernel_initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        self.units = validation.check_positive_int("units", units)
        self.regions = region_map.check_regions(regions)
        self.num_regions = region_map.num_regions(self.regions)
        self.pairwise = validation.check_choice("pairwise", pairwise, PAIRWISE)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        lengths = region_map.explicit_lengths(self.regions)
        for name, want, shape in zip("AB", lengths, input_shape):
            if want is not None and shape[1] != want:
                raise ValueError(
                    f"Argument `regions` maps {want} positions of {name}; received input {name} of shape "
                    f"{tuple(shape)} (the region map needs inputs of exactly that length)."
                )
        self.input_spec = validation.pair_input_specs(self, input_shape, fixed_lengths=lengths[0] is not None)
        region_map.check_fits(self.regions, input_shape[0][1], input_shape[1][1])
        self.relation = PairwiseRelation(self.units, self.pairwise, self.kernel_initializer,
                                         dtype=self.dtype_policy, name="pairwise")
        self.relation.build(input_shape)

    def region_pairs(self, length_a, length_b):
        """R (K, n, m) as a boolean tensor: the pairs of each region."""
        member_a, member_b = region_map.memberships(self.regions, length_a, length_b)
        return ops.logical_and(ops.expand_dims(member_a, 2), ops.expand_dims(member_b, 1))

    def call(self, inputs, mask=None):
        a, b, mask_a, mask_b = relation_inputs(self, inputs, mask)
        region_map.check_fits(self.regions, a.shape[1], b.shape[1])
        pairs = self.region_pairs(ops.shape(a)[1], ops.shape(b)[1])
        valid = ops.expand_dims(pairs, 0)
        padding = valid_pairs(mask_a, mask_b, a, b)
        if padding is not None:
            valid = ops.logical_and(valid, ops.expand_dims(padding, 1))
        # Counted in float32 at least: K·n·m passes float16's largest number
        # (65,504) at 256 × 256 pairs. sqrt(d) / C_r in that dtype too (a
        # float64 layer's, not float32's rounding of it).
        count = ops.sum(ops.cast(pairs, at_least_float32(self.compute_dtype)))
        relation = self.relation(a, b)
        # Broadcast, not repeated: TFLite Micro has BROADCAST_TO but no TILE.
        batch, n, m = ops.shape(relation)
        psi = ops.broadcast_to(ops.expand_dims(relation, 1), (batch, self.num_regions, n, m))
        return [
            softmax_over_pairs(psi, valid, axis=-1) * ops.cast(math.sqrt(b.shape[-1]) / count, psi.dtype),
            softmax_over_pairs(psi, valid, axis=-2) * ops.cast(math.sqrt(a.shape[-1]) / count, psi.dtype),
        ]

    def compute_mask(self, inputs, mask=None):
        return [None, None]

    def compute_output_shape(self, input_shape):
        shape_a, shape_b = input_shape
        shape = (shape_a[0], self.num_regions, shape_a[1], shape_b[1])
        return [shape, shape]

    def get_config(self):
        config = {
            "units": self.units,
            "regions": self.regions,
            "pairwise": self.pairwise,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }
        return {**super().get_config(), **config}
