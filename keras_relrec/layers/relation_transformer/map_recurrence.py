"""Local recurrence over the rows of relation maps (the DRRT, Belanger
Nzakimuena 2022: the equation before eq. 10)."""

import keras
from keras import ops

from keras_relrec.layers.local_recurrence.local_recurrence import LocalRecurrence
from keras_relrec.utils.initializers import clone_initializer


class MapRecurrence(keras.layers.Layer):
    """Eqs. (1)–(2) of the DRRT run down a relation map's rows; a part of
    `InteractionTransformer`.

    A map (batch, [K,] rows, cols) is read as a sequence of rows, each a
    vector of `cols` numbers; h_t = tanh(U x_t + V h_{t−1} + b) over windows
    of M rows (`LocalRecurrence` of a `SimpleRNNCell` of `units`, default
    `cols`), then x'_t = σ(W h_t + b'), `cols` numbers again. The K maps of a regional
    module share the weights.
    """

    def __init__(self, window_size, units, activation, kernel_initializer, recurrent_initializer,
                 bias_initializer, **kwargs):
        super().__init__(**kwargs)
        self.window_size = window_size
        self.units = units
        self.activation = activation
        self.kernel_initializer = kernel_initializer
        self.recurrent_initializer = recurrent_initializer
        self.bias_initializer = bias_initializer

    def build(self, input_shape):
        width = input_shape[-1]
        cell = keras.layers.SimpleRNNCell(
            self.units or width,
            kernel_initializer=clone_initializer(self.kernel_initializer, f"{self.name}_cell"),
            recurrent_initializer=clone_initializer(self.recurrent_initializer, f"{self.name}_cell"),
            bias_initializer=clone_initializer(self.bias_initializer, f"{self.name}_cell"),
            dtype=self.dtype_policy,
            name="cell",
        )
        self.local = LocalRecurrence(cell, self.window_size, dtype=self.dtype_policy, name="local")
        self.output_dense = keras.layers.Dense(
            width,
            activation=self.activation,
            kernel_initializer=clone_initializer(self.kernel_initializer, f"{self.name}_output"),
            bias_initializer=clone_initializer(self.bias_initializer, f"{self.name}_output"),
            dtype=self.dtype_policy,
            name="output",
        )
        rows = (None, input_shape[-2], width)
        self.local.build(rows)
        self.output_dense.build(rows[:-1] + (self.units or width,))

    def call(self, maps, row_mask=None, training=None):
        shape = ops.shape(maps)
        rows = ops.reshape(maps, (-1, shape[-2], shape[-1]))
        if row_mask is not None and len(maps.shape) == 4:
            # One row mask for the K maps of an example.
            # Broadcast, not repeated: TFLite Micro has BROADCAST_TO but no TILE.
            row_mask = ops.broadcast_to(ops.expand_dims(row_mask, 1), (shape[0], maps.shape[1], shape[-2]))
            row_mask = ops.reshape(row_mask, (-1, shape[-2]))
        out = self.output_dense(self.local(rows, mask=row_mask, training=training))
        return ops.reshape(out, shape)
