"""The segment cache: the N last segments, the k most relevant recalled."""

import keras
from keras import ops

from keras_relrec.layers.transformer_xl.memory_policy import MASK_DTYPE
from keras_relrec.layers.transformer_xl.memory_policy import MemoryPolicy
from keras_relrec.layers.transformer_xl.segment_summary import KINDS
from keras_relrec.layers.transformer_xl.segment_summary import SegmentSummary
from keras_relrec.ops import any_valid
from keras_relrec.ops import masked_softmax
from keras_relrec.ops import one_hot
from keras_relrec.ops import top_k_indices
from keras_relrec.ops.relative_attention import update_memory
from keras_relrec.utils import validation
from keras_relrec.utils.dtypes import at_least_float32
from keras_relrec.utils.initializers import clone_initializer
from keras_relrec.utils.registration import PACKAGE

QUERIES = ("causal", "standard", "compute_first")


@keras.saving.register_keras_serializable(package=PACKAGE)
class SegmentCache(MemoryPolicy):
    """A cache of the N last segments, of which the k most relevant to the
    current segment are recalled: the memory of `SegmentCacheTransformer`,
    whose docstring gives the equations and the decisions the design note
    "Cache-based Recurrent Transformer Network" leaves open.

    The states are `[keys (batch, N, summary_dim), values_0, …,
    values_(m−1) (batch, N, L, d), slot_mask (batch, N, L) (float32, 1 for
    the valid positions of filled slots)]`, and with `query="causal"`
    `previous_output` (batch, L, d) last. A slot holds a whole segment, its
    padding masked in `slot_mask`, so a short call or chunk is padded too.

    Args:
        num_slots: N, segments in the cache.
        top_k: k, segments recalled per segment (at most N).
        query: `"causal"` (default), `"standard"` or `"compute_first"`.
        summary: `"dense"` (default), `"mlp"` or `"bilstm"` (`SegmentSummary`).
        summary_dim: The key width (default: the recurrence's hidden_dim).
        summary_layers: Depth of the `"mlp"` summary.
        relevance_weighting: Whether recalled values are scaled by α.
        explore_recall: Whether training draws the recalled slots from α.
        seed: Seed of the exploration's draws.
        **kwargs: Base `Layer` arguments.

    Example:

    ```python
    cache = keras_relrec.layers.SegmentRecurrence(
        num_layers=2, num_heads=2, head_size=8, hidden_dim=16, intermediate_dim=32,
        segment_len=4, memory=keras_relrec.layers.SegmentCache(num_slots=8, top_k=2))
    ```
    """

    runs_short_segments = False

    def __init__(self, num_slots, top_k, query="causal", summary="dense", summary_dim=None, summary_layers=2,
                 relevance_weighting=True, explore_recall=False, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.num_slots = validation.check_positive_int("num_slots", num_slots)
        self.top_k = validation.check_positive_int("top_k", top_k)
        if self.top_k > self.num_slots:
            raise ValueError(
                f"Argument `top_k` must be at most num_slots={num_slots} (the cache recalls from its "
                f"slots); received top_k={top_k!r}."
            )
        self.query = validation.check_choice("query", query, QUERIES)
        self.summary_kind = validation.check_choice("summary", summary, KINDS)
        if summary_dim is not None:
            validation.check_positive_int("summary_dim", summary_dim)
        self.summary_layers = validation.check_positive_int("summary_layers", summary_layers)
        self.relevance_weighting = validation.check_bool("relevance_weighting", relevance_weighting)
        self.explore_recall = validation.check_bool("explore_recall", explore_recall)
        self.seed = validation.check_seed(seed)
        self.requested_summary_dim = summary_dim
        self.summary = None
        self.recall_seed_generator = None

    def configure(self, num_layers, segment_len, hidden_dim, dtype_policy, kernel_initializer, bias_initializer):
        super().configure(num_layers, segment_len, hidden_dim, dtype_policy, kernel_initializer, bias_initializer)
        if self.explore_recall:
            self.recall_seed_generator = keras.random.SeedGenerator(self.seed, name="recall_seed_generator")
        self.summary = SegmentSummary(
            hidden_dim if self.requested_summary_dim is None else self.requested_summary_dim,
            kind=self.summary_kind,
            num_layers=self.summary_layers,
            kernel_initializer=clone_initializer(kernel_initializer, "summary"),
            bias_initializer=clone_initializer(bias_initializer, "summary"),
            dtype=dtype_policy,
            name="summary",
        )

    @property
    def summary_dim(self):
        return self.summary.units

    def build_parts(self, segment_shape):
        self.summary.build(segment_shape)
        super().build_parts(segment_shape)

    def state_specs(self):
        slots, length, width = self.num_slots, self.segment_len, self.hidden_dim
        specs = [("keys", (slots, self.summary_dim), self.state_dtype)]
        specs += [(f"values_{n}", (slots, length, width), self.state_dtype) for n in range(self.num_layers)]
        specs += [("slot_mask", (slots, length), MASK_DTYPE)]
        if self.query == "causal":
            specs += [("previous_output", (length, width), self.state_dtype)]
        return specs

    def recall_for(self, hidden, mask, states, stack, training):
        """(alpha, indices) as `recall` gives them for the segment `hidden`
        and the states before it."""
        slot_mask = states[1 + self.num_layers]
        if self.query == "causal":
            # The newest slot holds the previous segment's valid positions.
            query = self.summary(ops.stop_gradient(states[-1]), mask=slot_mask[:, -1] > 0)
        else:
            query = self.summary(stack(hidden) if self.query == "compute_first" else hidden, mask=mask)
        return self.recall(query, states[0], slot_mask, training)

    def recall(self, query, keys, slot_mask, training=False):
        """Which slots a segment recalls and with what weight.

        Args:
            query: (batch, summary_dim).
            keys: (batch, N, summary_dim).
            slot_mask: (batch, N, L).
            training: With `explore_recall`, draw the slots instead.

        Returns:
            (alpha (batch, N), the softmax over the filled slots; indices
            (batch, k) of the recalled slots, the most relevant first).
        """
        filled = any_valid(slot_mask > 0, axis=-1)
        logits = ops.einsum("bk,bnk->bn", query, ops.stop_gradient(ops.cast(keys, query.dtype)))
        alpha = masked_softmax(logits, filled)
        ranked = ops.stop_gradient(logits)
        if training and self.explore_recall:
            # Gumbel-top-k: k slots drawn from α without replacement. The
            # noise in float32 at least (1e-6 is below float16's normal range).
            uniform = keras.random.uniform(ops.shape(ranked), minval=1e-6, maxval=1.0 - 1e-6,
                                           dtype=at_least_float32(ranked.dtype), seed=self.recall_seed_generator)
            ranked = ranked - ops.cast(ops.log(-ops.log(uniform)), ranked.dtype)
        # Empty slots rank after every filled one.
        return alpha, top_k_indices(ranked, self.top_k, valid=filled)

    def read(self, hidden, mask, states, stack, training):
        """The recalled slots of every layer, their masks, distances and
        weights."""
        slots, length, width = self.num_slots, self.segment_len, self.hidden_dim
        values, slot_mask = states[1 : 1 + self.num_layers], states[1 + self.num_layers]
        dtype = hidden.dtype
        alpha, indices = self.recall_for(hidden, mask, states, stack, training)
        # Recalled by a one-hot product (batch matmuls: no gather to export).
        select = one_hot(indices, slots, dtype)  # (batch, k, N)
        recalled_mask = ops.einsum("bkn,bnl->bkl", ops.cast(select, MASK_DTYPE), ops.cast(slot_mask, MASK_DTYPE))
        recalled_mask = ops.reshape(recalled_mask > 0, (-1, self.top_k * length))
        if self.relevance_weighting:
            weight = ops.einsum("bkn,bn->bk", select, ops.cast(alpha, dtype))
        else:
            weight = ops.ones_like(select[:, :, 0])
        memory_scale = ops.reshape(weight[:, :, None] + ops.zeros((1, 1, length), dtype), (-1, self.top_k * length))
        # Slot s is N − s segments old: position p is (N − s)·L − p before
        # the segment's first position.
        ages = ops.cast(slots - indices, "int32")
        offsets = ops.reshape(ages[:, :, None] * length - ops.arange(length, dtype="int32")[None, None],
                              (-1, self.top_k * length))
        return [
            {
                "memory": ops.reshape(ops.einsum("bkn,bnld->bkld", select, ops.stop_gradient(ops.cast(value, dtype))),
                                      (-1, self.top_k * length, width)),
                "memory_mask": recalled_mask,
                "memory_offsets": offsets,
                "max_offset": slots * length,
                "memory_scale": memory_scale,
            }
            for value in values
        ]

    def update(self, states, layer_inputs, outputs, mask, steps):
        """Renewal: the oldest slot leaves, the segment enters as the newest
        (the memory update of Transformer-XL, one slot at a time), its
        padding after `steps` masked in slot_mask."""
        keys, values, slot_mask = states[0], states[1 : 1 + self.num_layers], states[1 + self.num_layers]
        new_key = self.summary(ops.stop_gradient(outputs), mask=mask)
        new_states = [update_memory(keys, new_key[:, None])]
        new_states += [update_memory(value, entry[:, None]) for value, entry in zip(values, layer_inputs)]
        new_states += [update_memory(slot_mask, self.segment_valid(outputs, mask)[:, None])]
        if self.query == "causal":
            new_states += [ops.stop_gradient(ops.cast(outputs, states[-1].dtype))]
        return new_states

    def get_config(self):
        config = {
            "num_slots": self.num_slots,
            "top_k": self.top_k,
            "query": self.query,
            "summary": self.summary_kind,
            "summary_dim": self.requested_summary_dim,
            "summary_layers": self.summary_layers,
            "relevance_weighting": self.relevance_weighting,
            "explore_recall": self.explore_recall,
            "seed": self.seed,
        }
        return {**super().get_config(), **config}
