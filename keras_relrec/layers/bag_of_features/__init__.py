"""The neural bag-of-features family: quantizer, 2-D attention, recurrent cell,
local features and segment means."""

from keras_relrec.layers.bag_of_features.bof_quantizer import BoFQuantizer
from keras_relrec.layers.bag_of_features.local_features import LocalFeatures
from keras_relrec.layers.bag_of_features.recurrent_bof_cell import RecurrentBoFCell
from keras_relrec.layers.bag_of_features.segment_mean import SegmentMean
from keras_relrec.layers.bag_of_features.two_d_attention import TwoDAttention
