"""Transformer-XL with a cache of past segments recalled by relevance."""

from keras_relrec.layers.transformer_xl.segment_cache import SegmentCache
from keras_relrec.layers.transformer_xl.segment_recurrence import SegmentRecurrence
from keras_relrec.utils.registration import register_layer


@register_layer
class SegmentCacheTransformer(SegmentRecurrence):
    """A Transformer-XL whose memory is a cache of the N last segments, of
    which the k most relevant to the current segment are recalled:
    `SegmentRecurrence` with a `SegmentCache`.

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
        num_layers, num_heads, head_size, hidden_dim, intermediate_dim,
            segment_len: As in `SegmentRecurrence` (m = num_layers).
        num_slots, top_k, query, summary, summary_dim, summary_layers,
            relevance_weighting, explore_recall: As in `SegmentCache`.
        **kwargs: The other arguments of `SegmentRecurrence` but
            `same_length` (`vocabulary_size`, `clamp_len`, `pre_lnorm`,
            `tie_relative_biases`, `dropout`, `attention_dropout`, `epsilon`,
            the initializers, `stateful`, `return_state`, `seed`, also the
            seed of the exploration) and the base `Layer`'s.

    Call arguments:
        inputs, mask, initial_state (the states above), training: As in
            `SegmentRecurrence`.

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

    def __init__(self, num_layers, num_heads, head_size, hidden_dim, intermediate_dim, segment_len, num_slots,
                 top_k, query="causal", summary="dense", summary_dim=None, summary_layers=2,
                 relevance_weighting=True, explore_recall=False, **kwargs):
        memory = SegmentCache(num_slots, top_k, query=query, summary=summary, summary_dim=summary_dim,
                              summary_layers=summary_layers, relevance_weighting=relevance_weighting,
                              explore_recall=explore_recall, seed=kwargs.get("seed"))
        super().__init__(num_layers, num_heads, head_size, hidden_dim, intermediate_dim, segment_len, memory,
                         **kwargs)

    # The cache's settings and parts under the names 0.2 gave them (and,
    # public, the weights' paths in its `.keras` files).
    num_slots = property(lambda self: self._memory.num_slots)
    top_k = property(lambda self: self._memory.top_k)
    query = property(lambda self: self._memory.query)
    summary_dim = property(lambda self: self._memory.summary_dim)
    relevance_weighting = property(lambda self: self._memory.relevance_weighting)
    explore_recall = property(lambda self: self._memory.explore_recall)
    summary = property(lambda self: self._memory.summary)
    recall_seed_generator = property(lambda self: self._memory.recall_seed_generator)

    def recall(self, query, keys, slot_mask, training=False):
        """As `SegmentCache.recall`."""
        return self._memory.recall(query, keys, slot_mask, training)

    def recalled_slots(self, inputs, states, mask=None):
        """What one segment recalls: for inputs (batch, L) token ids or
        (batch, L, hidden_dim) and the states before it, (alpha (batch,
        N), indices (batch, k)) as `recall` returns them. Slot s holds the
        segment N − s segments back."""
        return self._memory.recall_for(self._embed(inputs, False), mask, list(states), self._stack(mask, False),
                                       False)

    def get_config(self):
        config = super().get_config()
        memory = config.pop("memory")["config"]
        del config["same_length"]
        keys = ("num_slots", "top_k", "query", "summary", "summary_layers", "relevance_weighting", "explore_recall")
        return {**config, **{key: memory[key] for key in keys}, "summary_dim": self.summary_dim}
