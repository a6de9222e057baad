"""Local recurrence (R-Transformer, Wang et al. 2019) and the blocks built on it."""

from keras_relrec.layers.local_recurrence.local_recurrence import LocalRecurrence
from keras_relrec.layers.local_recurrence.r_transformer_block import RTransformerBlock
