"""Relative attention over a memory of recalled segments."""

from keras import ops

from keras_relrec.layers.transformer_xl.relative_multi_head_attention import RelativeMultiHeadAttention
from keras_relrec.ops.relative_attention import gather_relative_scores
from keras_relrec.utils import validation


class RecalledMemoryAttention(RelativeMultiHeadAttention):
    """`RelativeMultiHeadAttention` whose memory may be segments recalled
    from anywhere in the past, each at its own distance and weight (the
    segment cache's recall); not a public layer.

    Without `memory_offsets` and `memory_scale` it is `RelativeMultiHeadAttention`, as
    keras-hub's `CachedMultiHeadAttention` is `MultiHeadAttention` without
    a cache, so `TransformerXLBlock` always holds one. With them, memory
    slot s is `memory_offsets[s] + i` from query i instead of the paper's
    M + i − s, the position term is picked from a table of
    `max_offset + L` distances instead of shifted into place, and the
    values of slot s are scaled by `memory_scale[s]` (keys are not: this is
    α · (m W_v), the values having no bias).

    Call arguments:
        memory_offsets: Optional integer (batch, M): each memory slot's
            distance from the segment's first query, 1 … max_offset. An
            eager call refuses others with a `ValueError`; under a trace
            they are unchecked, and distances beyond the table read its
            last one.
        max_offset: The largest memory offset, a Python int (the table's
            size); exactly with `memory_offsets`.
        memory_scale: Optional (batch, M): the factor on each slot's
            values (the segment cache's relevance α).
        The others: as in `RelativeMultiHeadAttention`.
    """

    def call(self, inputs, memory=None, mask=None, memory_mask=None, relative_biases=None, memory_offsets=None,
             max_offset=None, memory_scale=None, training=None, return_attention_scores=False):
        self._check_recall(memory, memory_offsets, max_offset, memory_scale)
        recalled = None if memory_offsets is None and memory_scale is None else (memory_offsets, max_offset,
                                                                                memory_scale)
        return self._call(inputs, memory, mask, memory_mask, relative_biases, training, return_attention_scores,
                          recalled)

    def _check_recall(self, memory, memory_offsets, max_offset, memory_scale):
        for name, value in (("memory_offsets", memory_offsets), ("memory_scale", memory_scale)):
            shape = getattr(value, "shape", None)
            if value is not None and (memory is None or shape is None or tuple(shape) != tuple(memory.shape[:2])):
                received = f"{name}={value!r}" if shape is None else f"{name} of shape {tuple(shape)}"
                raise ValueError(
                    f"{type(self).__name__} expects `{name}`, a tensor of the memory's shape (batch, slots); "
                    f"received {received} for memory {None if memory is None else tuple(memory.shape)}."
                )
        if (memory_offsets is None) != (max_offset is None) or (
            max_offset is not None and (isinstance(max_offset, bool) or not isinstance(max_offset, int)
                                        or max_offset < 1)
        ):
            raise ValueError(
                f"{type(self).__name__} takes `max_offset`, a positive Python int, exactly with "
                f"`memory_offsets`; received max_offset={max_offset!r} with memory_offsets="
                f"{'None' if memory_offsets is None else 'a tensor'}."
            )
        # Offsets beyond the table would be clipped to its last distance.
        offsets = None if memory_offsets is None else validation.concrete_values(memory_offsets)
        if offsets is not None and offsets.size and not 1 <= offsets.min() <= offsets.max() <= max_offset:
            bad = offsets.min() if offsets.min() < 1 else offsets.max()
            raise ValueError(
                f"{type(self).__name__} expects `memory_offsets` in 1..max_offset={max_offset} (a memory slot "
                f"precedes the segment, at most max_offset before it); received memory_offsets holding "
                f"{bad.item()}. Give max_offset the largest offset, or leave older slots out of the memory."
            )

    def _table_size(self, keys, queries, recalled):
        return keys if recalled is None or recalled[0] is None else recalled[1] + queries

    def _values(self, value, queries, recalled):
        if recalled is None or recalled[2] is None:
            return value
        batch = ops.shape(value)[0]
        factor = ops.concatenate([ops.cast(recalled[2], value.dtype), ops.ones((batch, queries), value.dtype)],
                                 axis=1)
        return value * factor[:, None, :, None]

    def _position_scores(self, scores, queries, recalled):
        if recalled is None or recalled[0] is None:
            return super()._position_scores(scores, queries, recalled)
        # Key j of the segment is i − j from query i; memory slot s is
        # memory_offsets[s] + i.
        memory_offsets = recalled[0]
        own = -ops.arange(queries, dtype="int32")
        offsets = ops.concatenate(
            [ops.cast(memory_offsets, "int32"), ops.zeros_like(memory_offsets[:, :1], "int32") + own[None]], axis=1
        )
        distances = ops.arange(queries, dtype="int32")[None, :, None] + offsets[:, None, :]
        return gather_relative_scores(scores, distances)
