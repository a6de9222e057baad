"""The bilinear family: the bilinear layer and TABL."""

from keras_relrec.layers.bilinear.bilinear_layer import BilinearLayer
from keras_relrec.layers.bilinear.tabl import TABL
