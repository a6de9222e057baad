"""A stack of Transformer-XL layers that runs a sequence segment by segment."""

from keras_relrec.layers.transformer_xl.fifo_memory import FifoMemory
from keras_relrec.layers.transformer_xl.segment_recurrence import SegmentRecurrence
from keras_relrec.utils.registration import register_layer


@register_layer
class TransformerXL(SegmentRecurrence):
    """Transformer-XL: `num_layers` `TransformerXLBlock`s run over a long
    sequence one segment of `segment_len` positions at a time, each layer
    attending to the memory of its own inputs over the last `mem_len`
    positions: `SegmentRecurrence` with a `FifoMemory(mem_len)`.

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
        num_layers, num_heads, head_size, hidden_dim, intermediate_dim,
            segment_len: As in `SegmentRecurrence`.
        mem_len: M, memory positions per layer; 0: no memory.
        **kwargs: The other arguments of `SegmentRecurrence`
            (`vocabulary_size`, `embedding`, `clamp_len`, `same_length`, `pre_lnorm`,
            `tie_relative_biases`, `dropout`, `attention_dropout`, `epsilon`,
            the initializers, `stateful`, `return_state`, `seed`) and the
            base `Layer`'s.

    Call arguments:
        inputs, mask, initial_state (the memories above), training: As in
            `SegmentRecurrence`.

    Returns:
        (batch, steps, hidden_dim); with `return_state`, [outputs, *memories,
        memory_mask].

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

    def __init__(self, num_layers, num_heads, head_size, hidden_dim, intermediate_dim, segment_len, mem_len,
                 **kwargs):
        super().__init__(num_layers, num_heads, head_size, hidden_dim, intermediate_dim, segment_len,
                         FifoMemory(mem_len), **kwargs)

    @property
    def mem_len(self):
        return self._memory.mem_len

    def get_config(self):
        config = super().get_config()
        del config["memory"]
        return {**config, "mem_len": self.mem_len}
