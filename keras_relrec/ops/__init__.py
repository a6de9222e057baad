"""Math that several layer families share, written with `keras.ops` only."""

from keras_relrec.ops.codeword_similarity import codeword_logits
from keras_relrec.ops.masked_mean import masked_mean
