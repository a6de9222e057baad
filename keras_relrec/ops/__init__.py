"""Math that several layer families share, written with `keras.ops` only.

Internal: the layers' building blocks, not a public API (their names and
arguments may change between releases)."""

from keras_relrec.ops.codeword_similarity import codeword_logits
from keras_relrec.ops.compression import asinh
from keras_relrec.ops.gathering import gather_steps
from keras_relrec.ops.gathering import lookup_rows
from keras_relrec.ops.gathering import take_along_last_axis
from keras_relrec.ops.masking import any_valid
from keras_relrec.ops.masking import masked_mean
from keras_relrec.ops.masking import masked_scale
from keras_relrec.ops.masking import masked_segment_mean
from keras_relrec.ops.masking import masked_softmax
from keras_relrec.ops.masking import valid_steps_back
from keras_relrec.ops.masking import valid_steps_first
from keras_relrec.ops.masking import zero_masked
from keras_relrec.ops.multi_head_attention import merge_heads
from keras_relrec.ops.multi_head_attention import scaled_dot_product_attention
from keras_relrec.ops.multi_head_attention import split_heads
from keras_relrec.ops.ranking import one_hot
from keras_relrec.ops.ranking import top_k_indices
from keras_relrec.ops.shapes import axis_size
from keras_relrec.ops.two_d_attention import two_d_attention
from keras_relrec.ops.two_d_attention import two_d_attention_weights
