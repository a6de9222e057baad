"""Public layers and cells of keras_relrec, one family per sub-package."""

from keras_relrec.layers.bag_of_features import BoFQuantizer
from keras_relrec.layers.bag_of_features import LocalFeatures
from keras_relrec.layers.bag_of_features import RecurrentBoFCell
from keras_relrec.layers.bag_of_features import SegmentMean
from keras_relrec.layers.bag_of_features import TwoDAttention
from keras_relrec.layers.bilinear import TABL
from keras_relrec.layers.bilinear import BilinearLayer
from keras_relrec.layers.local_recurrence import LocalRecurrence
from keras_relrec.layers.local_recurrence import RTransformerBlock
from keras_relrec.layers.recurrent import CoupledLSTMCell
from keras_relrec.layers.recurrent import PeepholeConvLSTM2D
from keras_relrec.layers.recurrent import PeepholeLSTMCell
from keras_relrec.layers.relation_transformer import GlobalRelation
from keras_relrec.layers.relation_transformer import InteractionTransformer
from keras_relrec.layers.relation_transformer import RegionalRelation
from keras_relrec.layers.relational import RelationalMemoryCell
from keras_relrec.layers.streaming_layer import StreamingLayer
from keras_relrec.layers.transformer_xl import FifoMemory
from keras_relrec.layers.transformer_xl import MemoryPolicy
from keras_relrec.layers.transformer_xl import RelativeMultiHeadAttention
from keras_relrec.layers.transformer_xl import SegmentCache
from keras_relrec.layers.transformer_xl import SegmentCacheTransformer
from keras_relrec.layers.transformer_xl import SegmentRecurrence
from keras_relrec.layers.transformer_xl import SegmentSummary
from keras_relrec.layers.transformer_xl import TransformerXL
from keras_relrec.layers.transformer_xl import TransformerXLBlock
