"""Transformer-XL: relative attention over a memory of earlier segments, and
its segment cache that recalls the most relevant past segments."""

from keras_relrec.layers.transformer_xl.relative_multi_head_attention import RelativeMultiHeadAttention
from keras_relrec.layers.transformer_xl.segment_cache_transformer import SegmentCacheTransformer
from keras_relrec.layers.transformer_xl.segment_summary import SegmentSummary
from keras_relrec.layers.transformer_xl.transformer_xl import TransformerXL
from keras_relrec.layers.transformer_xl.transformer_xl_block import TransformerXLBlock
