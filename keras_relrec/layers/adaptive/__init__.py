"""Adaptive input embeddings and the adaptive softmax: a vocabulary cut into
clusters by frequency, rarer tokens with narrower vectors."""

from keras_relrec.layers.adaptive.adaptive_embedding import AdaptiveEmbedding
from keras_relrec.layers.adaptive.adaptive_softmax import AdaptiveSoftmax
