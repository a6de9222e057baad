"""Transformer-XL: relative attention over a memory of earlier segments, and
its segment cache that recalls the most relevant past segments.

`SegmentRecurrence` runs `TransformerXLBlock`s segment by segment with a
memory policy: `FifoMemory` (Transformer-XL) or `SegmentCache`;
`TransformerXL` and `SegmentCacheTransformer` are it with one policy each.
"""

from keras_relrec.layers.transformer_xl.fifo_memory import FifoMemory
from keras_relrec.layers.transformer_xl.memory_policy import MemoryPolicy
from keras_relrec.layers.transformer_xl.relative_multi_head_attention import RelativeMultiHeadAttention
from keras_relrec.layers.transformer_xl.segment_cache import SegmentCache
from keras_relrec.layers.transformer_xl.segment_cache_transformer import SegmentCacheTransformer
from keras_relrec.layers.transformer_xl.segment_recurrence import SegmentRecurrence
from keras_relrec.layers.transformer_xl.segment_summary import SegmentSummary
from keras_relrec.layers.transformer_xl.transformer_xl import TransformerXL
from keras_relrec.layers.transformer_xl.transformer_xl_block import TransformerXLBlock
