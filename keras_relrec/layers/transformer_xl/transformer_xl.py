"""A stack of Transformer-XL layers that runs a sequence segment by segment."""

from keras import ops

from keras_relrec.layers.transformer_xl.segment_recurrence import MASK_DTYPE
from keras_relrec.layers.transformer_xl.segment_recurrence import SegmentRecurrence
from keras_relrec.ops.relative_attention import update_memory
from keras_relrec.utils.registration import register_layer


@register_layer
class TransformerXL(SegmentRecurrence):
    """Transformer-XL: `num_layers` `TransformerXLBlock`s run over a long
    sequence one segment of `segment_len` positions at a time, each layer
    attending to the memory of its own inputs over the last `mem_len`
    positions.

    Dai et al., "Transformer-XL: Attentive language models beyond a
    fixed-length context", ACL 2019. For segment τ and layer n:

    ```
    h_τ^0 = E[x_τ] · sqrt(d)   (tokens; features are taken as they are)
    h_τ^n = TransformerXLBlock_n(h_τ^(n−1), memory m_τ^n)
    m_(τ+1)^n = SG([m_τ^n; h_τ^(n−1)])[last mem_len positions]
    ```

    The memories start empty (the PyTorch original and HuggingFace's
    TransfoXL; slots not filled yet are masked, not attended as zeros as in
    the paper's TensorFlow trainer). Causal: the output at position t
    depends on positions up to t only, across segments too.

    The layer behaves like a `keras.layers.RNN` whose step is a segment and
    whose state is the memories: `initial_state`, `return_state`,
    `stateful` with `reset_state()` (truncated back-propagation over
    segments, as the paper trains: gradients stop at the memory), and
    streaming as a `StreamingLayer` with one segment per step (SavedModel
    `step`, TFLite streaming). The states are
    `[memory_0, …, memory_(num_layers−1), memory_mask]`: each memory is
    (batch, mem_len, hidden_dim), and memory_mask (batch, mem_len) is 1 for
    slots that hold a position (float32).

    A call runs in segments of `segment_len` from its start, the last one
    shorter where `segment_len` does not divide the call's length (the
    layer may pad it at the end to compute it, masked, but that padding
    never enters the memories): after a call of T steps, each layer's
    memory holds the last `mem_len` positions of [its memory; its T
    inputs], and memory_mask likewise. A stream cut into calls thus runs as
    each call cut so, as HuggingFace's TransfoXL runs each call (a segment
    of its own length), in eager calls, graphs of unknown length and XLA
    alike; it runs as one call where every call but the last is a whole
    number of segments. `streaming_step` takes a chunk of up to
    `segment_len` steps the same way (`TransformerXLGenerator` steps one
    token at a time). Masking: a masked position is never attended, in its
    segment or from memory, its output is zeros, and it keeps its place in
    the distances and in the memories (a masked slot); a segment with no
    valid position leaves the memories as they were (as a masked step
    leaves an RNN's state).

    Args:
        num_layers: Number of blocks.
        num_heads: Attention heads per block.
        head_size: Width of a head.
        hidden_dim: d, the model width (even).
        intermediate_dim: Width of the feed-forward nets.
        segment_len: L, positions per segment.
        mem_len: M, memory positions per layer; 0: no memory.
        vocabulary_size: With it, the inputs are token ids and the layer
            embeds them (scaled by sqrt(d), as the paper); without it, the
            inputs are (batch, steps, hidden_dim) features.
        clamp_len, same_length, pre_lnorm: As in `TransformerXLBlock`.
        tie_relative_biases: One u and v for every layer (the paper's code
            without `untie_r`) instead of one pair per layer.
        dropout: Dropout rate of the embedding and in every block.
        attention_dropout: Dropout rate of the attention weights.
        epsilon: The layer norms' epsilon.
        kernel_initializer, bias_initializer, relative_bias_initializer:
            Of the blocks.
        embeddings_initializer: Of the token embedding.
        stateful: Whether each call starts from the memories the last one
            ended with (the batch size must be fixed).
        return_state: Whether to return the states after the outputs.
        seed: Seed of the dropout.
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
    backbone = keras_relrec.layers.TransformerXL(
        num_layers=2, num_heads=2, head_size=8, hidden_dim=16,
        intermediate_dim=32, segment_len=4, mem_len=8, vocabulary_size=100)
    tokens = keras.Input((None,), dtype="int32")
    logits = keras.layers.Dense(100)(backbone(tokens))
    model = keras.Model(tokens, logits)
    ```
    """

    def __init__(
        self,
        num_layers,
        num_heads,
        head_size,
        hidden_dim,
        intermediate_dim,
        segment_len,
        mem_len,
        vocabulary_size=None,
        clamp_len=None,
        same_length=False,
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
        if isinstance(mem_len, bool) or not isinstance(mem_len, int) or mem_len < 0:
            raise ValueError(f"Argument `mem_len` must be a non-negative integer; received mem_len={mem_len!r}.")
        if same_length and mem_len == 0:
            raise ValueError(
                "Argument `same_length` needs a memory: every query sees the mem_len nearest "
                "positions; received same_length=True with mem_len=0."
            )
        super().__init__(
            num_layers, num_heads, head_size, hidden_dim, intermediate_dim, segment_len,
            vocabulary_size=vocabulary_size, clamp_len=clamp_len, same_length=same_length, pre_lnorm=pre_lnorm,
            tie_relative_biases=tie_relative_biases, dropout=dropout, attention_dropout=attention_dropout,
            epsilon=epsilon, kernel_initializer=kernel_initializer, bias_initializer=bias_initializer,
            relative_bias_initializer=relative_bias_initializer, embeddings_initializer=embeddings_initializer,
            stateful=stateful, return_state=return_state, seed=seed, **kwargs,
        )
        self.mem_len = mem_len

    def streaming_state_specs(self):
        """[(name, shape without batch, dtype)] of the states (see
        `StreamingLayer`)."""
        if not self.mem_len:
            return []
        memory = (self.mem_len, self.hidden_dim)
        specs = [(f"memory_{n}", memory, self.compute_dtype) for n in range(self.num_layers)]
        return specs + [("memory_mask", (self.mem_len,), MASK_DTYPE)]

    def _segment(self, hidden, mask, states, steps, training):
        """One segment (batch, L or fewer, d) through every layer: (outputs,
        states). The memories take its first `steps` positions, not the
        padding of a call's last segment after them."""
        memories, memory_mask = states[: self.num_layers], states[self.num_layers :]
        memory_mask = memory_mask[0] if memory_mask else None
        new_memories = []
        for block, memory in zip(self.blocks, memories or [None] * self.num_layers):
            if memory is not None:
                # The block's own new memory would take the padding too.
                new_memories.append(update_memory(memory, hidden, steps))
            result = block(hidden, memory=memory, mask=mask, memory_mask=memory_mask,
                           relative_biases=self._relative_biases(), training=training)
            hidden = result if memory is None else result[0]
        if not self.mem_len:
            return hidden, []
        segment_valid = ops.ones(ops.shape(hidden)[:2], MASK_DTYPE) if mask is None else ops.cast(mask, MASK_DTYPE)
        return hidden, new_memories + [update_memory(memory_mask, segment_valid, steps)]

    def get_config(self):
        config = {"mem_len": self.mem_len, "same_length": self.blocks[0].get_config()["same_length"]}
        return {**super().get_config(), **config}
