"""A 2-D convolutional LSTM with the Hadamard peepholes of Shi et al."""

import keras
from keras import constraints
from keras import initializers
from keras import ops
from keras import regularizers

from keras_relrec.layers.recurrent.lstm_family_cell import add_peephole_weights
from keras_relrec.layers.recurrent.lstm_family_cell import dropped_step_inputs
from keras_relrec.layers.recurrent.lstm_family_cell import lstm_update
from keras_relrec.ops import any_valid
from keras_relrec.ops import zero_masked
from keras_relrec.utils import validation
from keras_relrec.utils.keras_internals import ConvLSTMCell
from keras_relrec.utils.registration import register_layer

# The gate blocks of ConvLSTM2D's fused kernel, in its order (its weights
# load as they are); Shi et al. give each of the three gates a peephole.
GATES = ("i", "f", "c", "o")
PEEPHOLE_GATES = ("i", "f", "o")


class PeepholeConvLSTMCell(ConvLSTMCell):
    """The step of `PeepholeConvLSTM2D`; see that layer for the equations."""

    def __init__(
        self,
        use_peepholes=True,
        peephole_initializer="zeros",
        peephole_regularizer=None,
        peephole_constraint=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.use_peepholes = use_peepholes
        self.peephole_initializer = initializers.get(peephole_initializer)
        self.peephole_regularizer = regularizers.get(peephole_regularizer)
        self.peephole_constraint = constraints.get(peephole_constraint)
        # One input mask and one recurrent mask per sequence, shared by the
        # four gates, so that the gates can be computed by one convolution.
        self.dropout_mask_count = None
        self.channel_axis = -1 if self.data_format == "channels_last" else 1

    def build(self, inputs_shape, states_shape=None):
        super().build(inputs_shape, states_shape)
        if not self.use_peepholes:
            return
        # Shi et al. use full Hadamard weights, one per position and channel
        # of the cell state, hence the static spatial shape.
        step_shape = (None,) + tuple(inputs_shape[1:])
        add_peephole_weights(self, PEEPHOLE_GATES, self.compute_output_shape(step_shape)[0][1:])

    def get_initial_state(self, batch_size=None):
        # The state's spatial shape is known once the layer has seen inputs.
        if not self.built:
            raise ValueError(
                "PeepholeConvLSTM2D has no state shape before it is built: call it on "
                "sequences, or build it for their shape, first."
            )
        return super().get_initial_state(batch_size)

    def input_conv(self, x, w, b=None, padding="valid"):
        return self._conv(x, w, self.strides, padding, self.dilation_rate)

    def recurrent_conv(self, x, w):
        return self._conv(x, w, 1, "same", 1)

    def _conv(self, x, kernel, strides, padding, dilation_rate):
        """A convolution computed in channels_last whatever the data format.

        TensorFlow's portable CPU kernel of Conv2D takes NHWC only (NCHW
        exists in its oneDNN kernels, which it does not use on every CPU,
        e.g. not on AMD's), so channels_first tensors are transposed at the
        edges of each convolution; the kernel's layout is the same in both
        formats."""
        first = self.data_format == "channels_first"
        if first:
            x = ops.transpose(x, (0, 2, 3, 1))
        out = ops.conv(
            x, kernel, strides=strides, padding=padding,
            data_format="channels_last", dilation_rate=dilation_rate,
        )
        return ops.transpose(out, (0, 3, 1, 2)) if first else out

    def call(self, inputs, states, training=False):
        inputs, h_tm1, c_tm1 = dropped_step_inputs(self, inputs, states, training)
        # TensorFlow's oneDNN Conv2D (on where the CPU has AVX-512) returns
        # an empty batch in its input's shape; reshaping to the gates' shape
        # restores it and changes nothing for a batch of examples. -1 for the
        # batch: an exported file then reshapes to a constant shape (see
        # export/tflite/static_reshapes).
        gates_shape = [-1] + list(ops.shape(h_tm1))[1:]
        gates_shape[self.channel_axis] = 4 * self.filters
        z = ops.reshape(self.input_conv(inputs, self.kernel, padding=self.padding), gates_shape)
        z = z + ops.reshape(self.recurrent_conv(h_tm1, self.recurrent_kernel), gates_shape)
        if self.use_bias:
            bias_shape = [1] * (self.rank + 2)
            bias_shape[self.channel_axis] = 4 * self.filters
            z = z + ops.reshape(self.bias, bias_shape)
        z = dict(zip(GATES, ops.split(z, len(GATES), axis=self.channel_axis)))
        return lstm_update(self, z, c_tm1, PEEPHOLE_GATES if self.use_peepholes else ())


def step_mask(mask):
    """A (batch, time) mask from a mask of rank 2 or more."""
    if len(mask.shape) == 2:
        return mask
    return any_valid(mask, axis=tuple(range(2, len(mask.shape))))


def is_frame_mask(mask, sequences, data_format):
    """Whether `mask` is (batch, time) and a frame's positions: the input's
    shape less its last axis (what `keras.layers.Masking` gives), or its
    (rows, cols) with `channels_first`."""
    frames = [sequences.shape[2:-1]]
    if data_format == "channels_first":
        frames.append(sequences.shape[3:])
    return len(mask.shape) == 4 and any(
        all(m is None or s is None or m == s for m, s in zip(mask.shape[2:], frame)) for frame in frames
    )


@register_layer
class PeepholeConvLSTM2D(keras.layers.ConvLSTM2D):
    """2-D convolutional LSTM with Hadamard peepholes (Shi et al. 2015).

    A drop-in for `keras.layers.ConvLSTM2D`: the same arguments, call and
    output shapes, plus the peephole connections of Shi et al., "Convolutional LSTM
    Network: A Machine Learning Approach for Precipitation Nowcasting",
    NeurIPS 2015, eq. (3), which Keras' layer lacks. With `*` a convolution
    and `∘` the Hadamard product:

    ```
    i_t = σ(W_xi * X_t + W_hi * H_{t-1} + W_ci ∘ C_{t-1} + b_i)
    f_t = σ(W_xf * X_t + W_hf * H_{t-1} + W_cf ∘ C_{t-1} + b_f)
    C_t = f_t ∘ C_{t-1} + i_t ∘ tanh(W_xc * X_t + W_hc * H_{t-1} + b_c)
    o_t = σ(W_xo * X_t + W_ho * H_{t-1} + W_co ∘ C_t + b_o)
    H_t = o_t ∘ tanh(C_t)
    ```

    W_ci, W_cf, W_co have the full shape of the cell state: (rows, cols,
    filters) for `channels_last`, (filters, rows, cols) for `channels_first`.
    They start at zero by default, so a new layer computes what `ConvLSTM2D`
    computes and learns its peepholes. The first three weights (kernel,
    recurrent kernel, bias) are `ConvLSTM2D`'s; weights saved from a
    `ConvLSTM2D` load as they are into `use_peepholes=False`, or into the
    first three weights of a peephole layer. The
    input convolution uses `strides`, `padding` and `dilation_rate`; the
    recurrent one is "same" with stride 1, as in Keras. With
    `channels_first` the convolutions are computed in channels_last between
    two transposes, because TensorFlow has no portable NCHW convolution on
    CPUs (it fails on CPUs where it does not use oneDNN, such as AMD's);
    weights, states and outputs keep the channels_first layout.

    Args:
        filters: Positive int, the number of channels of H and C.
        kernel_size: int or pair, the convolution window.
        use_peepholes: Whether the gates see the cell state. Default `True`;
            with `False` the layer is `ConvLSTM2D`.
        peephole_initializer: Initializer of W_ci, W_cf, W_co; default
            `"zeros"`.
        peephole_regularizer, peephole_constraint: Optional regularizer and
            constraint of the peepholes.
        strides, padding, data_format, dilation_rate, activation,
            recurrent_activation, use_bias, kernel_initializer,
            recurrent_initializer, bias_initializer, unit_forget_bias,
            kernel_regularizer, recurrent_regularizer, bias_regularizer,
            activity_regularizer, kernel_constraint, recurrent_constraint,
            bias_constraint, dropout, recurrent_dropout, seed,
            return_sequences, return_state, go_backwards, stateful:
            As in `keras.layers.ConvLSTM2D`. Dropout draws one input mask and
            one recurrent mask per sequence, shared by the four gates.

    Call arguments:
        inputs: `(batch, time, rows, cols, channels)` for `channels_last`,
            `(batch, time, channels, rows, cols)` for `channels_first`.
        initial_state: Optional `[H_0, C_0]`.
        mask: Optional `(batch, time)` boolean mask. A finer mask, such as
            the `(batch, time, rows, cols)` one of `keras.layers.Masking`
            (the input's shape less its last axis), skips a step only where
            every position of it is masked; a mask of any other shape
            raises `ValueError`.
        training: Whether dropout is applied.

    Returns:
        The last H (or all of them with `return_sequences=True`), followed by
        the final H and C with `return_state=True`.

    Example:

    >>> import numpy as np
    >>> from keras_relrec.layers import PeepholeConvLSTM2D
    >>> layer = PeepholeConvLSTM2D(4, 3, padding="same", return_sequences=True)
    >>> tuple(layer(np.zeros((2, 5, 8, 8, 1), "float32")).shape)
    (2, 5, 8, 8, 4)
    """

    def __init__(
        self,
        filters,
        kernel_size,
        strides=1,
        padding="valid",
        data_format=None,
        dilation_rate=1,
        activation="tanh",
        recurrent_activation="sigmoid",
        use_bias=True,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        unit_forget_bias=True,
        kernel_regularizer=None,
        recurrent_regularizer=None,
        bias_regularizer=None,
        kernel_constraint=None,
        recurrent_constraint=None,
        bias_constraint=None,
        dropout=0.0,
        recurrent_dropout=0.0,
        seed=None,
        use_peepholes=True,
        peephole_initializer="zeros",
        peephole_regularizer=None,
        peephole_constraint=None,
        return_sequences=False,
        return_state=False,
        go_backwards=False,
        stateful=False,
        **kwargs,
    ):
        validation.check_positive_int("filters", filters)
        validation.check_bool("use_peepholes", use_peepholes)
        validation.check_bool("use_bias", use_bias)
        validation.check_bool("unit_forget_bias", unit_forget_bias)
        seed = validation.check_seed(seed)
        cell = PeepholeConvLSTMCell(
            rank=2,
            filters=filters,
            kernel_size=kernel_size,
            strides=strides,
            padding=padding,
            data_format=data_format,
            dilation_rate=dilation_rate,
            activation=activation,
            recurrent_activation=recurrent_activation,
            use_bias=use_bias,
            kernel_initializer=kernel_initializer,
            recurrent_initializer=recurrent_initializer,
            bias_initializer=bias_initializer,
            unit_forget_bias=unit_forget_bias,
            kernel_regularizer=kernel_regularizer,
            recurrent_regularizer=recurrent_regularizer,
            bias_regularizer=bias_regularizer,
            kernel_constraint=kernel_constraint,
            recurrent_constraint=recurrent_constraint,
            bias_constraint=bias_constraint,
            dropout=validation.check_rate("dropout", dropout),
            recurrent_dropout=validation.check_rate(
                "recurrent_dropout", recurrent_dropout
            ),
            seed=seed,
            use_peepholes=use_peepholes,
            peephole_initializer=peephole_initializer,
            peephole_regularizer=peephole_regularizer,
            peephole_constraint=peephole_constraint,
            name="peephole_conv_lstm_cell",
            dtype=kwargs.get("dtype"),
        )
        # ConvLSTM2D's own constructor would build a cell without peepholes;
        # the RNN constructor takes ours, and everything else (shapes,
        # properties, masking) is ConvLSTM2D's.
        keras.layers.RNN.__init__(
            self,
            cell,
            return_sequences=return_sequences,
            return_state=return_state,
            go_backwards=go_backwards,
            stateful=stateful,
            **kwargs,
        )
        self.input_spec = keras.layers.InputSpec(ndim=5)

    def build(self, sequences_shape, initial_state_shape=None):
        # (batch, time, rows, cols, channels) or (batch, time, channels, ...).
        axis = 4 if self.cell.data_format == "channels_last" else 2
        channels = sequences_shape[axis]
        if channels is None:
            raise ValueError(
                "PeepholeConvLSTM2D needs a known channel size; received "
                f"input of shape {tuple(sequences_shape)}."
            )
        super().build(sequences_shape, initial_state_shape)
        self.input_spec = keras.layers.InputSpec(ndim=5, axes={axis: channels})

    def call(self, sequences, initial_state=None, mask=None, training=False):
        if sequences.shape[1] == 0:
            raise ValueError(
                "PeepholeConvLSTM2D needs at least one step; received sequences of "
                f"shape {tuple(sequences.shape)}."
            )
        # Integer frames are values like any other (the convolution needs floats).
        sequences = ops.cast(sequences, self.compute_dtype)
        if mask is not None:
            # `keras.layers.Masking` gives (batch, time, rows, cols) here; a
            # step is padding only when all of its positions are. The JAX
            # loop broadcasts the mask against the 4-D state only when it has
            # the state's rank, hence (batch, time, 1, 1, 1). Only a finer
            # mask of a frame's shape is reduced to steps: any other must be
            # (batch, time) already (a (batch, time, 1) mask or a batch of
            # one would otherwise be broadcast silently).
            if is_frame_mask(mask, sequences, self.data_format):
                mask = step_mask(mask)
            validation.check_mask(self, mask, sequences)
            # Masked steps are fed as zeros: Keras' loop runs the cell on them
            # before selecting the old state, so NaN padding would otherwise
            # make the weight gradients NaN.
            sequences = zero_masked(sequences, mask)
            mask = ops.reshape(mask, tuple(ops.shape(mask)) + (1, 1, 1))
        return super().call(
            sequences, initial_state=initial_state, mask=mask, training=training
        )

    def compute_mask(self, inputs, mask):
        if mask is not None:
            mask = step_mask(mask)
        return super().compute_mask(inputs, mask)

    @property
    def use_peepholes(self):
        return self.cell.use_peepholes

    def get_config(self):
        config = {
            "use_peepholes": self.cell.use_peepholes,
            "peephole_initializer": initializers.serialize(
                self.cell.peephole_initializer
            ),
            "peephole_regularizer": regularizers.serialize(
                self.cell.peephole_regularizer
            ),
            "peephole_constraint": constraints.serialize(
                self.cell.peephole_constraint
            ),
        }
        return {**super().get_config(), **config}
