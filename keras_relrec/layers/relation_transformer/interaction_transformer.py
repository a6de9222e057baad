"""The interaction transformer of the Deep (Recurrent) Relation Transformer:
each sequence transformed by the other through global and regional relation
maps."""

import keras
from keras import ops

from keras_relrec.layers.relation_transformer import region_map
from keras_relrec.layers.relation_transformer.global_relation import GlobalRelation
from keras_relrec.layers.relation_transformer.map_recurrence import MapRecurrence
from keras_relrec.layers.relation_transformer.pairwise_relation import PAIRWISE
from keras_relrec.layers.relation_transformer.pairwise_relation import relation_inputs
from keras_relrec.layers.relation_transformer.pairwise_relation import valid_pairs
from keras_relrec.layers.relation_transformer.regional_relation import RegionalRelation
from keras_relrec.ops import zero_masked
from keras_relrec.utils import initializers
from keras_relrec.utils import validation
from keras_relrec.utils.registration import register_layer

FUSIONS = ("sum", "maxout", "concat")


@register_layer
class InteractionTransformer(keras.layers.Layer):
    """Relation maps, local recurrence over them, information transformation
    and fusion: Z_ab and Z_ba from A' and B'.

    Belanger Nzakimuena, "Deep Recurrent Relation Transformer" (2022),
    after Song et al., "Deep Relation Transformer for Diagnosing Glaucoma
    with Optical Coherence Tomography and Visual Field Function", IEEE TMI
    2021: section 3. For A' (batch, n, d) and B' (batch, m, d), σ ∈ {g, r(1) … r(K)}:

    ```
    α^σ, β^σ                          `GlobalRelation`, `RegionalRelation` (eqs. 3–9)
    α'^σ = LR(α^σ),  β'^σ = LR(β^σ)   local recurrence over the maps (with map_window_size)
    T^σ_{b'→a'_i} = Σ_j α'^σ_ij W_b~ b'_j                                (10)
    T^σ_{a'→b'_j} = Σ_i β'^σ_ij W_a~ a'_i                                (11)
    A'_{b'→a'} = Fusion(T^g_{b'→a'}, Σ_k T^{r(k)}_{b'→a'}) W_t             (12)
    B'_{a'→b'} = Fusion(T^g_{a'→b'}, Σ_k T^{r(k)}_{a'→b'}) W_t             (13)
    Z_ab = A' + A'_{b'→a'},   Z_ba = B' + B'_{a'→b'}                       (14, 15)
    ```

    Fusion is the sum, the element-wise maximum ("maxout") or the
    concatenation of its two arguments; W_t (d_t or 2·d_t → d) is shared by
    both directions, so A' and B' must have the same width d.

    **Local recurrence over the maps** ("calculated in a similar way as
    outputs at the feature extraction stage"): α (n, m) is read as n rows
    of m numbers, in A's order, and each row becomes σ(W h_i + b) with h_i
    a tanh RNN (of m units, or `map_units`) over the M most recent rows
    (eqs. 1–2; `LocalRecurrence`); β is read as m columns of n numbers in
    B's order.
    The global α, global β, regional α and regional β each have their own
    recurrence; the K regional maps share theirs. The recurrence needs n
    and m to be known (its widths are m and n), and its outputs are no
    longer distributions (σ = sigmoid by default): rows do not sum to one.
    Without it (`map_window_size=None`) the layer is the Deep Relation
    Transformer's, α' = α.

    **Confinement of the regional maps** (`confine_regional_maps`). The
    recurrence runs down a whole map, and σ(W h + b) is not zero at pairs
    outside region k, so α'^{r(k)} covers every pair. By default
    (`True`) α'^{r(k)} and β'^{r(k)} are confined to region k again, R
    of eq. (8):

    ```
    T^{r(k)}_{b'→a'_i} = Σ_j R^{r(k)}_ij α'^{r(k)}_ij W_b~ b'_j
    T^{r(k)}_{a'→b'_j} = Σ_i R^{r(k)}_ij β'^{r(k)}_ij W_a~ a'_i
    ```

    so that a regional transform keeps what makes it regional: a'_i reads
    only the b'_j of its own region pair (A'_k with B'_k, eq. 8), and a
    position outside A'_k gets no T^{r(k)} at all, as without the
    recurrence; unconfined, each of the K regional transforms reads the
    whole of B' like the global one. `False` takes eqs. (10)–(11)
    literally, the sums over all j (all i) of α'^{r(k)} (β'^{r(k)}) as the
    recurrence leaves them. The two forms are the same without the
    recurrence (α^{r(k)} is zero outside region k) and for the global
    maps. In both, padded pairs are zeros.

    The regional maps' rows sum to 1/C_r (eq. 9), about K/(n·m)·sqrt(d)
    of the global ones': through the shared W_b~ and W_t, fusion by sum or
    maxout lets them count for little unless the recurrence rescales
    them; concatenation gives them weights of their own in W_t.

    Masking: padded positions take no part in any relation (see the two
    modules and `LocalRecurrence`); their rows of Z_ab and Z_ba are zeros
    and the masks are passed on.

    Args:
        relation_units: h of both relation modules' projections.
        regions: The regional module's regions (see `RegionalRelation`;
            default 2, an equal split).
        fusion: `"sum"` (default), `"maxout"` or `"concat"`.
        pairwise: The modules' pairwise function (see `GlobalRelation`):
            `"concat"` (default; as written), `"concat_relu"` or `"dot"`.
        transform_units: d_t, the width of W_a~ and W_b~ (default d).
        map_window_size: M of the local recurrence over the maps; `None`
            (default) for none (the Deep Relation Transformer).
        map_units: The width of h in that recurrence (default the map's
            width, m for α and n for β: the recurrences then hold about
            6·(n² + m²) weights; a smaller width bounds them).
        map_activation: σ of the recurrence's output (default sigmoid).
        confine_regional_maps: `True` (default) confines α'^{r(k)} and
            β'^{r(k)} to region k's pairs before eqs. (10)–(11); `False`
            sums over all pairs, as eqs. (10)–(11) are written (see above).
            A bool; it matters only with `map_window_size`.
        kernel_initializer, recurrent_initializer, bias_initializer: Of
            every kernel, the recurrences' recurrent kernels and biases.
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: [A', B'], (batch, n, d) and (batch, m, d).
        mask: Optional [mask_A, mask_B], boolean (batch, n) and (batch, m).
        training: Passed to the recurrences.

    Returns:
        [Z_ab, Z_ba], (batch, n, d) and (batch, m, d).

    Example:

    ```python
    block = keras_relrec.layers.InteractionTransformer(16, regions=4, fusion="concat", map_window_size=3)
    z_ab, z_ba = block([np.random.rand(2, 20, 8), np.random.rand(2, 12, 8)])   # (2, 20, 8), (2, 12, 8)
    ```
    """

    def __init__(
        self,
        relation_units,
        regions=2,
        fusion="sum",
        pairwise="concat",
        transform_units=None,
        map_window_size=None,
        map_units=None,
        map_activation="sigmoid",
        confine_regional_maps=True,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.relation_units = validation.check_positive_int("relation_units", relation_units)
        self.regions = region_map.check_regions(regions)
        self.fusion = validation.check_choice("fusion", fusion, FUSIONS)
        self.pairwise = validation.check_choice("pairwise", pairwise, PAIRWISE)
        self.transform_units = (
            None if transform_units is None else validation.check_positive_int("transform_units", transform_units)
        )
        self.map_window_size = (
            None if map_window_size is None else validation.check_positive_int("map_window_size", map_window_size)
        )
        self.map_units = None if map_units is None else validation.check_positive_int("map_units", map_units)
        self.map_activation = keras.activations.get(map_activation)
        self.confine_regional_maps = validation.check_bool("confine_regional_maps", confine_regional_maps)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    def build(self, input_shape):
        # The recurrence over the maps has n and m units: the lengths are
        # part of its weights.
        self.input_spec = validation.pair_input_specs(self, input_shape,
                                                      fixed_lengths=self.map_window_size is not None)
        shape_a, shape_b = (tuple(s) for s in input_shape)
        if shape_a[-1] != shape_b[-1]:
            raise ValueError(
                "InteractionTransformer needs A' and B' of the same width (W_t is shared by both directions "
                f"and Z = A' + A'_{{b'→a'}}); received inputs of shapes {shape_a} and {shape_b}."
            )
        width = shape_a[-1]
        common = {"kernel_initializer": self.kernel_initializer, "dtype": self.dtype_policy}
        self.global_relation = GlobalRelation(self.relation_units, self.pairwise, name="global_relation", **common)
        self.regional_relation = RegionalRelation(self.relation_units, self.regions, self.pairwise,
                                                  name="regional_relation", **common)
        self.global_relation.build([shape_a, shape_b])
        self.regional_relation.build([shape_a, shape_b])
        self.map_recurrences = {}
        if self.map_window_size is not None:
            for name, maps in [("global_alpha", (None, shape_a[1], shape_b[1])),
                               ("global_beta", (None, shape_b[1], shape_a[1])),
                               ("regional_alpha", (None, None, shape_a[1], shape_b[1])),
                               ("regional_beta", (None, None, shape_b[1], shape_a[1]))]:
                recurrence = MapRecurrence(self.map_window_size, self.map_units, self.map_activation,
                                           self.kernel_initializer,
                                           self.recurrent_initializer, self.bias_initializer,
                                           dtype=self.dtype_policy, name=f"{name}_recurrence")
                recurrence.build(maps)
                self.map_recurrences[name] = recurrence
        inner = self.transform_units or width
        self.transform_a = self._dense(inner, "transform_a", shape_a)
        self.transform_b = self._dense(inner, "transform_b", shape_b)
        fused = 2 * inner if self.fusion == "concat" else inner
        self.output_dense = self._dense(width, "output", shape_a[:-1] + (fused,))

    def _dense(self, units, name, input_shape):
        # W_a~, W_b~ and W_t are matrices without biases (eqs. 10–13).
        layer = initializers.dense(units, name, self.kernel_initializer, "zeros", self.dtype_policy, use_bias=False)
        layer.build(input_shape)
        return layer

    def relation_maps(self, inputs, mask=None):
        """The maps before any recurrence: a dict of `global_alpha`,
        `global_beta` (batch, n, m) and `regional_alpha`, `regional_beta`
        (batch, K, n, m)."""
        global_alpha, global_beta = self.global_relation(inputs, mask=mask)
        regional_alpha, regional_beta = self.regional_relation(inputs, mask=mask)
        return {"global_alpha": global_alpha, "global_beta": global_beta,
                "regional_alpha": regional_alpha, "regional_beta": regional_beta}

    def call(self, inputs, mask=None, training=None):
        a, b, mask_a, mask_b = relation_inputs(self, inputs, mask)
        maps = self.relation_maps([a, b], mask=[mask_a, mask_b])
        if self.map_recurrences:
            maps = self._recur(maps, a, b, mask_a, mask_b, training)
        regional_alpha = ops.sum(maps["regional_alpha"], axis=1)
        regional_beta = ops.sum(maps["regional_beta"], axis=1)
        values_b, values_a = self.transform_b(b), self.transform_a(a)
        # Σ_k T^{r(k)} = (Σ_k α'^{r(k)}) W_b~ B': the maps are summed first.
        a_from_b = self._fuse(ops.matmul(maps["global_alpha"], values_b), ops.matmul(regional_alpha, values_b))
        b_from_a = self._fuse(ops.matmul(_swap(maps["global_beta"]), values_a),
                              ops.matmul(_swap(regional_beta), values_a))
        return [zero_masked(a + self.output_dense(a_from_b), mask_a),
                zero_masked(b + self.output_dense(b_from_a), mask_b)]

    def _recur(self, maps, a, b, mask_a, mask_b, training):
        """α' and β' (eq. before 10), confined to the valid pairs and, with
        `confine_regional_maps`, the regional ones to their region's."""
        recurrences = self.map_recurrences
        valid = valid_pairs(mask_a, mask_b, a, b)
        regional = None if valid is None else ops.expand_dims(valid, 1)
        if self.confine_regional_maps:
            region = ops.expand_dims(self.regional_relation.region_pairs(ops.shape(a)[1], ops.shape(b)[1]), 0)
            regional = region if regional is None else ops.logical_and(region, regional)
        out = {}
        for name, pairs in [("global", valid), ("regional", regional)]:
            alpha = recurrences[f"{name}_alpha"](maps[f"{name}_alpha"], mask_a, training=training)
            beta = _swap(recurrences[f"{name}_beta"](_swap(maps[f"{name}_beta"]), mask_b, training=training))
            out[f"{name}_alpha"] = zero_masked_pairs(alpha, pairs)
            out[f"{name}_beta"] = zero_masked_pairs(beta, pairs)
        return out

    def _fuse(self, global_part, regional_part):
        if self.fusion == "sum":
            return global_part + regional_part
        if self.fusion == "maxout":
            return ops.maximum(global_part, regional_part)
        return ops.concatenate([global_part, regional_part], axis=-1)

    def compute_mask(self, inputs, mask=None):
        return [None, None] if mask is None else list(mask)

    def compute_output_shape(self, input_shape):
        return [tuple(s) for s in input_shape]

    def get_config(self):
        config = {
            "relation_units": self.relation_units,
            "regions": self.regions,
            "fusion": self.fusion,
            "pairwise": self.pairwise,
            "transform_units": self.transform_units,
            "map_window_size": self.map_window_size,
            "map_units": self.map_units,
            "map_activation": keras.activations.serialize(self.map_activation),
            "confine_regional_maps": self.confine_regional_maps,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }
        return {**super().get_config(), **config}


def _swap(maps):
    """The last two axes swapped: β read along B's positions and back."""
    axes = list(range(len(maps.shape)))
    return ops.transpose(maps, axes[:-2] + [axes[-1], axes[-2]])


def zero_masked_pairs(maps, pairs):
    """`maps` with zeros outside `pairs` (None: all pairs kept)."""
    return maps if pairs is None else ops.where(pairs, maps, ops.zeros_like(maps))
