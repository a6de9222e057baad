"""Recurrent cells and layers."""

from keras_relrec.layers.recurrent.coupled_lstm_cell import CoupledLSTMCell
from keras_relrec.layers.recurrent.peephole_conv_lstm2d import PeepholeConvLSTM2D
from keras_relrec.layers.recurrent.peephole_lstm_cell import PeepholeLSTMCell
