"""The machinery shared by the LSTM-family cells.

`LSTMFamilyCell` holds what the peephole and the coupled input-forget-gate
LSTM cells have in common: Keras' usual LSTM arguments, one fused kernel of
gate blocks, optional peephole vectors and one step function. A subclass only
says which gate blocks it has (`GATES`) and whether peepholes are on. The
step (`dropped_step_inputs`, `lstm_update`) and the peephole weights
(`add_peephole_weights`) are functions, which `PeepholeConvLSTM2D`'s cell
shares.
"""

import keras
from keras import activations
from keras import constraints
from keras import initializers
from keras import ops
from keras import regularizers

from keras_relrec.utils import validation
from keras_relrec.utils.initializers import clone_initializer
from keras_relrec.utils.keras_internals import DropoutRNNCell

# Peephole vector names follow TF Addons' `PeepholeLSTMCell`, so that weights
# saved from that cell load by name and by position.
PEEPHOLE_NAMES = {
    "i": "input_gate_peephole_weights",
    "f": "forget_gate_peephole_weights",
    "o": "output_gate_peephole_weights",
}


class LSTMFamilyCell(keras.layers.Layer, DropoutRNNCell):
    """Base class of the LSTM-family cells; not a public layer.

    Subclasses set `GATES`, the gate blocks of the fused kernel in order:
    `("i", "f", "c", "o")` for a full LSTM, `("f", "c", "o")` for a coupled
    one (the input gate is then `1 - f`). One step computes, with
    `z = x W + h_{t-1} U + b` split into the blocks of `GATES`:

    ```
    f   = σ(z_f + p_f ⊙ c_{t-1})
    i   = σ(z_i + p_i ⊙ c_{t-1})        or  1 − f  without an "i" block
    c_t = f ⊙ c_{t-1} + i ⊙ g(z_c)      clipped to [−cell_clip, cell_clip] with a cell_clip
    o   = σ(z_o + p_o ⊙ c_t)
    h_t = o ⊙ g(c_t)
    ```

    where the peephole terms `p ⊙ c` are present only when `use_peepholes`
    is true, σ is `recurrent_activation` and g is `activation`.

    The state is `[h, c]`, both `(batch, units)`; `states[0]` is the output,
    so masked steps carry the same output on every backend.
    """

    GATES = ("i", "f", "c", "o")
    # h, the output, is states[0] (see keras_relrec.export.graph.rnn_streamer).
    output_is_first_state = True

    def __init__(
        self,
        units,
        activation="tanh",
        recurrent_activation="sigmoid",
        use_bias=True,
        use_peepholes=True,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        peephole_initializer="glorot_uniform",
        unit_forget_bias=True,
        kernel_regularizer=None,
        recurrent_regularizer=None,
        bias_regularizer=None,
        peephole_regularizer=None,
        kernel_constraint=None,
        recurrent_constraint=None,
        bias_constraint=None,
        peephole_constraint=None,
        dropout=0.0,
        recurrent_dropout=0.0,
        seed=None,
        cell_clip=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.units = validation.check_positive_int("units", units)
        self.use_bias = validation.check_bool("use_bias", use_bias)
        self.use_peepholes = validation.check_bool(
            "use_peepholes", use_peepholes
        )
        self.unit_forget_bias = validation.check_bool(
            "unit_forget_bias", unit_forget_bias
        )
        self.dropout = validation.check_rate("dropout", dropout)
        self.recurrent_dropout = validation.check_rate(
            "recurrent_dropout", recurrent_dropout
        )
        validation.check_seed(seed)
        self.cell_clip = None if cell_clip is None else validation.check_positive_float("cell_clip", cell_clip)
        self.activation = activations.get(activation)
        self.recurrent_activation = activations.get(recurrent_activation)

        self.kernel_initializer = initializers.get(kernel_initializer)
        self.recurrent_initializer = initializers.get(recurrent_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.peephole_initializer = initializers.get(peephole_initializer)

        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.recurrent_regularizer = regularizers.get(recurrent_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.peephole_regularizer = regularizers.get(peephole_regularizer)

        self.kernel_constraint = constraints.get(kernel_constraint)
        self.recurrent_constraint = constraints.get(recurrent_constraint)
        self.bias_constraint = constraints.get(bias_constraint)
        self.peephole_constraint = constraints.get(peephole_constraint)

        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed=seed)
        self.state_size = [self.units, self.units]
        self.output_size = self.units
        self.input_spec = keras.layers.InputSpec(ndim=2)

    def build(self, input_shape):
        if len(input_shape) != 2 or input_shape[-1] is None:
            raise ValueError(
                f"{self.__class__.__name__} expects sequences of shape "
                f"(batch, time, features) with a known feature size; received "
                f"sequences whose steps have shape {tuple(input_shape)}."
            )
        input_dim = input_shape[-1]
        self.input_spec = keras.layers.InputSpec(ndim=2, axes={-1: input_dim})
        width = len(self.GATES) * self.units
        self.kernel = self.add_weight(
            shape=(input_dim, width),
            name="kernel",
            initializer=clone_initializer(self.kernel_initializer, "kernel"),
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        self.recurrent_kernel = self.add_weight(
            shape=(self.units, width),
            name="recurrent_kernel",
            initializer=clone_initializer(self.recurrent_initializer, "recurrent_kernel"),
            regularizer=self.recurrent_regularizer,
            constraint=self.recurrent_constraint,
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                shape=(width,),
                name="bias",
                initializer=self._bias_initializer,
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
            )
        add_peephole_weights(self, self._peephole_gates(), (self.units,))

    def _bias_initializer(self, shape, dtype=None):
        bias = clone_initializer(self.bias_initializer, "bias")(shape, dtype=dtype)
        if not self.unit_forget_bias:
            return bias
        # The forget block starts at one (Jozefowicz et al. 2015). The whole
        # vector is drawn once, so a seeded initializer gives distinct blocks.
        f = self.GATES.index("f") * self.units
        return ops.concatenate(
            [bias[:f], ops.ones((self.units,), dtype=bias.dtype), bias[f + self.units :]]
        )

    def _peephole_gates(self):
        if not self.use_peepholes:
            return ()
        return tuple(gate for gate in ("i", "f", "o") if gate in self.GATES)

    def call(self, inputs, states, training=False):
        inputs, h_tm1, c_tm1 = dropped_step_inputs(self, inputs, states, training)
        z = ops.matmul(inputs, self.kernel)
        z = z + ops.matmul(h_tm1, self.recurrent_kernel)
        if self.use_bias:
            z = z + self.bias
        z = dict(zip(self.GATES, ops.split(z, len(self.GATES), axis=-1)))
        return lstm_update(self, z, c_tm1, self._peephole_gates(), self.cell_clip)

    def get_initial_state(self, batch_size=None):
        return [
            ops.zeros((batch_size, self.units), dtype=self.compute_dtype)
            for _ in self.state_size
        ]

    def compute_output_shape(self, inputs_shape, states_shape=None):
        state_shape = (inputs_shape[0], self.units)
        return state_shape, [state_shape, state_shape]

    def get_config(self):
        config = {
            "units": self.units,
            "activation": activations.serialize(self.activation),
            "recurrent_activation": activations.serialize(
                self.recurrent_activation
            ),
            "use_bias": self.use_bias,
            "use_peepholes": self.use_peepholes,
            "kernel_initializer": initializers.serialize(
                self.kernel_initializer
            ),
            "recurrent_initializer": initializers.serialize(
                self.recurrent_initializer
            ),
            "bias_initializer": initializers.serialize(self.bias_initializer),
            "peephole_initializer": initializers.serialize(
                self.peephole_initializer
            ),
            "unit_forget_bias": self.unit_forget_bias,
            "kernel_regularizer": regularizers.serialize(
                self.kernel_regularizer
            ),
            "recurrent_regularizer": regularizers.serialize(
                self.recurrent_regularizer
            ),
            "bias_regularizer": regularizers.serialize(self.bias_regularizer),
            "peephole_regularizer": regularizers.serialize(
                self.peephole_regularizer
            ),
            "kernel_constraint": constraints.serialize(self.kernel_constraint),
            "recurrent_constraint": constraints.serialize(
                self.recurrent_constraint
            ),
            "bias_constraint": constraints.serialize(self.bias_constraint),
            "peephole_constraint": constraints.serialize(
                self.peephole_constraint
            ),
            "dropout": self.dropout,
            "recurrent_dropout": self.recurrent_dropout,
            "seed": self.seed,
            "cell_clip": self.cell_clip,
        }
        return {**super().get_config(), **config}


def add_peephole_weights(cell, gates, shape):
    """Adds to `cell` the peephole weights of `gates` (of "i", "f", "o"),
    each of `shape`, under `PEEPHOLE_NAMES`, with the cell's
    `peephole_initializer`, `peephole_regularizer` and
    `peephole_constraint`."""
    for gate in gates:
        name = PEEPHOLE_NAMES[gate]
        setattr(
            cell,
            name,
            cell.add_weight(
                shape=shape,
                name=name,
                initializer=clone_initializer(cell.peephole_initializer, name),
                regularizer=cell.peephole_regularizer,
                constraint=cell.peephole_constraint,
            ),
        )


def dropped_step_inputs(cell, inputs, states, training):
    """`(x_t, h_{t-1}, c_{t-1})` of one step of an LSTM-family cell (a
    `DropoutRNNCell`), with its dropout masks applied in training; states
    whose batch or shape is not the inputs' raise."""
    validation.check_cell_states(cell, inputs, states)
    h_tm1, c_tm1 = states[0], states[1]
    if training and cell.dropout > 0.0:
        inputs = inputs * cell.get_dropout_mask(inputs)
    if training and cell.recurrent_dropout > 0.0:
        h_tm1 = h_tm1 * cell.get_recurrent_dropout_mask(h_tm1)
    return inputs, h_tm1, c_tm1


def lstm_update(cell, z, c_tm1, peephole_gates, cell_clip=None):
    """`(h_t, [h_t, c_t])` from the gate pre-activations `z`, a dict of
    blocks by gate ("i", "f", "c", "o"; without "i", i = 1 − f): the
    equations of `LSTMFamilyCell`, for blocks of any shape. The gates in
    `peephole_gates` add p ⊙ c, p their peephole weight on `cell`; with a
    `cell_clip`, c_t is clipped to [−cell_clip, cell_clip]."""

    def gate(name, cell_state):
        pre_activation = z[name]
        if name in peephole_gates:
            pre_activation = pre_activation + getattr(cell, PEEPHOLE_NAMES[name]) * cell_state
        return cell.recurrent_activation(pre_activation)

    f = gate("f", c_tm1)
    i = gate("i", c_tm1) if "i" in z else 1.0 - f
    c = f * c_tm1 + i * cell.activation(z["c"])
    if cell_clip is not None:
        c = ops.clip(c, -cell_clip, cell_clip)
    o = gate("o", c)
    h = o * cell.activation(c)
    return h, [h, c]
