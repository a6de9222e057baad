"""Transformer-XL with a cache of past segments recalled by relevance."""

import keras
from keras import ops

from keras_relrec.layers.transformer_xl.segment_recurrence import MASK_DTYPE
from keras_relrec.layers.transformer_xl.segment_recurrence import SegmentRecurrence
from keras_relrec.layers.transformer_xl.segment_summary import KINDS
from keras_relrec.layers.transformer_xl.segment_summary import SegmentSummary
from keras_relrec.ops import any_valid
from keras_relrec.ops import masked_softmax
from keras_relrec.ops.relative_attention import update_memory
from keras_relrec.utils import validation
from keras_relrec.utils.dtypes import at_least_float32
from keras_relrec.utils.initializers import clone_initializer
from keras_relrec.utils.registration import register_layer

QUERIES = ("causal", "standard", "compute_first")


@register_layer
class SegmentCacheTransformer(SegmentRecurrence):
    """A Transformer-XL whose memory is a cache of the N last segments, of
    which the k most relevant to the current segment are recalled.

    The cache-based recurrent transformer of the design note "Cache-based
    Recurrent Transformer Network" (no paper and no public implementation;
    nearest relatives: Landmark attention's block retrieval, Memorizing
    Transformers). The backbone is Transformer-XL
    (Dai et al. 2019): `num_layers` `TransformerXLBlock`s. For segment X_t
    (L positions), the cache {K_s, V_s}, s = 1..N (slot N the newest), and
    the summary S (`SegmentSummary`, one `summary` kind):

    ```
    query:    q = S(X_t)                    (query="standard", the note's)
              q = S(Transformer(X_t))       ("compute_first": the stack run
                                             on X_t alone, same weights)
              q = S(SG(h_(t−1)^m))          ("causal": the previous segment)
    recall:   α = softmax_s(q · K_s) over the filled slots
              R = top-k slots by α          (all N when k = N)
    layer n:  m = [V_r^(n−1)]_(r ∈ R),   h̃ = [SG(m) ∘ h^(n−1)] → keys,
              m̃ = [α_r V_r^(n−1)],        ĥ = [SG(m̃) ∘ h^(n−1)] → values,
              h^n = TransformerXLBlock_n(h^(n−1), memory m, values scaled by α)
    renewal:  drop slot 1, shift the rest down, V_N = SG(h_t^(0..m−1)),
              K_N = SG(S(h_t^m))
    ```

    Decisions the note leaves open:

    - **Keys.** A segment's key is `S` of its last layer's output, `summary_dim`
      wide; V_s holds the segment's input to every layer (as Transformer-XL's
      memories), so that layer n recalls V^(n−1).
    - **No 1/sqrt(d_key)** in α, as the note writes it: divided, the logits
      stayed small beside the exploration's noise, α near uniform and the
      recall close to random in the long-range recall tutorial (its
      figures: tutorials/README.md, "Long-range recall with the segment
      cache").
    - **Empty slots** (the first N segments of a stream) are masked before
      the softmax and never recalled: with fewer than k filled slots, the
      others come back with α = 0 and all their positions masked.
    - **α is not renormalised** over the k recalled slots (the note takes
      the top k of the softmax over all N): renormalised, k = 1 would give
      α = 1 and no gradient to the summary. The summary learns through α,
      which scales the recalled values (values only: the projections have
      no bias, so this is α · V W_v; with `pre_lnorm` the scaling comes after
      the layer norm, which would otherwise undo it). Stored keys and values
      are stop-gradient. `relevance_weighting=False` fixes α = 1 (recall
      still picks the top k).
    - **Exploration** (`explore_recall=True`, off by default): in training,
      the k slots are drawn from α without replacement (Gumbel-top-k)
      instead of taken as the top k, so that every filled slot is tried
      and its α learns; at inference the top k. The summary only learns
      about the slots it recalls, and without it a segment it ranks low
      at the start may never be recalled (the long-range recall tutorial
      shows the difference).
    - **Distances.** A recalled slot keeps its true distance: slot s is
      N − s segments old (the FIFO moves every slot one place per segment
      with a valid position), so position p of slot s is (N − s)·L + i − p
      from query i. The model thus knows how old a recalled fact is, and
      with k = N the distances are Transformer-XL's. Position scores are
      picked from a table of (N + 1)·L distances (`clamp_len` clamps them).
    - **Causality.** `"standard"` and `"compute_first"` summarise the whole
      current segment, so position i's output depends on later positions
      of its segment through the choice of R and α: fine for
      classification or retrieval, a leak for language modelling.
      `"causal"` (the default) recalls by the previous segment's output,
      summarised with the current weights: no output depends on a later
      input, and the summary still learns through α.

    With k = N, `relevance_weighting=False` and the same block weights, the
    layer computes what `TransformerXL` with `mem_len = N·L` computes.

    The layer behaves like a `keras.layers.RNN` whose step is a segment
    (see `TransformerXL`: `initial_state`, `return_state`, `stateful`,
    streaming with one segment per step, masking). A call whose length is
    not a multiple of L — one shorter than L, fresh or the end of a
    stream, too, and a short chunk of the streaming step — is padded
    (masked) at the end, and since a slot holds a whole segment, its
    padding enters the cache as positions masked in `slot_mask`, never
    attended (unlike `TransformerXL`'s memories, which leave such padding
    out): the next call goes on as the stream of the calls each padded to
    whole segments (as one call when every length is a multiple of L), the
    padding keeping its place in the distances. The states are
    `[keys (batch, N, summary_dim), values_0, …, values_(m−1) (batch, N, L, d),
    slot_mask (batch, N, L) (float32, 1 for the valid positions of filled
    slots)]`, and with `query="causal"` `previous_output` (batch, L, d) last.

    Args:
        num_layers: Number of blocks (m).
        num_heads: Attention heads per block.
        head_size: Width of a head.
        hidden_dim: d, the model width (even).
        intermediate_dim: Width of the feed-forward nets.
        segment_len: L, positions per segment.
        num_slots: N, segments in the cache.
        top_k: k, segments recalled per segment (at most N).
        query: `"causal"` (default), `"standard"` or `"compute_first"`.
        summary: `"dense"` (default), `"mlp"` or `"bilstm"` (`SegmentSummary`).
        summary_dim: The key width (default: hidden_dim).
        summary_layers: Depth of the `"mlp"` summary.
        relevance_weighting: Whether recalled values are scaled by α.
        explore_recall: Whether training draws the recalled slots from α.
        vocabulary_size: With it, the inputs are token ids, embedded and
            scaled by sqrt(d); without it, (batch, steps, hidden_dim).
        clamp_len, pre_lnorm, tie_relative_biases, dropout,
            attention_dropout, epsilon, kernel_initializer,
            bias_initializer, relative_bias_initializer,
            embeddings_initializer, stateful, return_state, seed: As in
            `TransformerXL`.
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: (batch, steps) token ids or (batch, steps, hidden_dim).
        mask: Optional boolean (batch, steps), false for padding.
        initial_state: Optional states to start from (see above).
        training: Whether dropout is on.

    Returns:
        (batch, steps, hidden_dim); with `return_state`, [outputs, *states].

    Example:

    ```python
    cache = keras_relrec.layers.SegmentCacheTransformer(
        num_layers=2, num_heads=2, head_size=8, hidden_dim=16, intermediate_dim=32,
        segment_len=4, num_slots=8, top_k=2, vocabulary_size=100)
    tokens = keras.Input((None,), dtype="int32")
    logits = keras.layers.Dense(100)(cache(tokens))
    model = keras.Model(tokens, logits)
    ```
    """

    # A slot holds a whole segment: a short call or chunk is padded too.
    runs_short_segments = False

    def __init__(
        self,
        num_layers,
        num_heads,
        head_size,
        hidden_dim,
        intermediate_dim,
        segment_len,
        num_slots,
        top_k,
        query="causal",
        summary="dense",
        summary_dim=None,
        summary_layers=2,
        relevance_weighting=True,
        explore_recall=False,
        vocabulary_size=None,
        clamp_len=None,
        pre_lnorm=False,
        tie_relative_biases=False,
        dropout=0.0,
        attention_dropout=0.0,
        epsilon=1e-5,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        relative_bias_initializer=None,
        embeddings_initializer="uniform",
        stateful=False,
        return_state=False,
        seed=None,
        **kwargs,
    ):
        super().__init__(
            num_layers, num_heads, head_size, hidden_dim, intermediate_dim, segment_len,
            vocabulary_size=vocabulary_size, clamp_len=clamp_len, pre_lnorm=pre_lnorm,
            tie_relative_biases=tie_relative_biases, dropout=dropout, attention_dropout=attention_dropout,
            epsilon=epsilon, kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
            relative_bias_initializer=relative_bias_initializer, embeddings_initializer=embeddings_initializer,
            stateful=stateful, return_state=return_state, seed=seed, **kwargs,
        )
        self.num_slots = validation.check_positive_int("num_slots", num_slots)
        self.top_k = validation.check_positive_int("top_k", top_k)
        if self.top_k > self.num_slots:
            raise ValueError(
                f"Argument `top_k` must be at most num_slots={num_slots} (the cache recalls from its "
                f"slots); received top_k={top_k!r}."
            )
        self.query = validation.check_choice("query", query, QUERIES)
        validation.check_choice("summary", summary, KINDS)
        self.relevance_weighting = validation.check_bool("relevance_weighting", relevance_weighting)
        self.explore_recall = validation.check_bool("explore_recall", explore_recall)
        self.recall_seed_generator = (
            keras.random.SeedGenerator(self.seed, name="recall_seed_generator") if self.explore_recall else None
        )
        self.summary = SegmentSummary(
            self.hidden_dim if summary_dim is None else summary_dim,
            kind=summary,
            num_layers=summary_layers,
            kernel_initializer=clone_initializer(self.kernel_initializer, "summary"),
            bias_initializer=clone_initializer(self.bias_initializer, "summary"),
            dtype=self.dtype_policy,
            name="summary",
        )
        self.summary_dim = self.summary.units

    def _build_segment(self):
        super()._build_segment()
        self.summary.build((None, self.segment_len, self.hidden_dim))

    def streaming_state_specs(self):
        """[(name, shape without batch, dtype)] of the states (see
        `StreamingLayer`)."""
        slots, length, width = self.num_slots, self.segment_len, self.hidden_dim
        specs = [("keys", (slots, self.summary_dim), self.compute_dtype)]
        specs += [(f"values_{n}", (slots, length, width), self.compute_dtype) for n in range(self.num_layers)]
        specs += [("slot_mask", (slots, length), MASK_DTYPE)]
        if self.query == "causal":
            specs += [("previous_output", (length, width), self.compute_dtype)]
        return specs

    def _query(self, hidden, mask, slot_mask, previous_output, training):
        """The summary that chooses what the segment recalls."""
        if self.query == "causal":
            # The newest slot holds the previous segment's valid positions.
            return self.summary(ops.stop_gradient(previous_output), mask=slot_mask[:, -1] > 0)
        if self.query == "compute_first":
            for block in self.blocks:
                hidden = block(hidden, mask=mask, relative_biases=self._relative_biases(), training=training)
        return self.summary(hidden, mask=mask)

    def recalled_slots(self, inputs, states, mask=None):
        """What one segment recalls: for inputs (batch, L) token ids or
        (batch, L, hidden_dim) and the states before it, (alpha (batch,
        N), indices (batch, k)) as `recall` returns them. Slot s holds the
        segment N − s segments back."""
        return self._recall_for(self._embed(inputs, False), mask, list(states), False)

    def _recall_for(self, hidden, mask, states, training):
        slot_mask = states[1 + self.num_layers]
        previous_output = states[-1] if self.query == "causal" else None
        query = self._query(hidden, mask, slot_mask, previous_output, training)
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
        ranked = ops.where(filled, ranked, ops.full_like(ranked, float("-inf")))
        _, indices = ops.top_k(ranked, self.top_k)
        return alpha, indices

    def _segment(self, hidden, mask, states, steps, training):
        """One segment (batch, L, d) through recall, every layer and the
        renewal: (outputs, states). The new slot holds the whole segment,
        its padding (after `steps`) masked in slot_mask."""
        slots, length, width = self.num_slots, self.segment_len, self.hidden_dim
        keys, values, slot_mask = states[0], states[1 : 1 + self.num_layers], states[1 + self.num_layers]
        previous_output = states[-1] if self.query == "causal" else None
        dtype = self.compute_dtype
        alpha, indices = self._recall_for(hidden, mask, states, training)
        # Recalled by a one-hot product (batch matmuls: no gather to export).
        select = ops.one_hot(indices, slots, dtype=dtype)  # (batch, k, N)
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
        inputs_per_layer = []
        for block, value in zip(self.blocks, values):
            memory = ops.einsum("bkn,bnld->bkld", select, ops.stop_gradient(ops.cast(value, dtype)))
            inputs_per_layer.append(hidden)
            hidden, _ = block(
                hidden, memory=ops.reshape(memory, (-1, self.top_k * length, width)), mask=mask,
                memory_mask=recalled_mask, relative_biases=self._relative_biases(),
                memory_offsets=offsets, max_offset=slots * length, memory_scale=memory_scale, training=training,
            )
        # Renewal: the oldest slot leaves, this segment enters as the newest.
        valid = ops.ones(ops.shape(hidden)[:2], MASK_DTYPE) if mask is None else ops.cast(mask, MASK_DTYPE)
        new_key = self.summary(ops.stop_gradient(hidden), mask=mask)

        # The memory update of Transformer-XL, one slot at a time.
        new_states = [update_memory(keys, new_key[:, None])]
        new_states += [update_memory(value, entry[:, None]) for value, entry in zip(values, inputs_per_layer)]
        new_states += [update_memory(slot_mask, valid[:, None])]
        if self.query == "causal":
            new_states += [ops.stop_gradient(ops.cast(hidden, previous_output.dtype))]
        return hidden, new_states

    def get_config(self):
        config = {
            "num_slots": self.num_slots,
            "top_k": self.top_k,
            "query": self.query,
            "summary": self.summary.kind,
            "summary_dim": self.summary_dim,
            "summary_layers": self.summary.num_layers,
            "relevance_weighting": self.relevance_weighting,
            "explore_recall": self.explore_recall,
        }
        return {**super().get_config(), **config}
