"""Transformer-XL: relative attention over a memory of earlier segments."""

from keras_relrec.layers.transformer_xl.relative_multi_head_attention import RelativeMultiHeadAttention
from keras_relrec.layers.transformer_xl.transformer_xl import TransformerXL
from keras_relrec.layers.transformer_xl.transformer_xl_block import TransformerXLBlock
