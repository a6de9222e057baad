"""The peephole LSTM cell of Gers & Schmidhuber."""

from keras_relrec.layers.recurrent.lstm_family_cell import LSTMFamilyCell
from keras_relrec.utils.registration import register_layer


@register_layer
class PeepholeLSTMCell(LSTMFamilyCell):
    """LSTM cell with peephole connections from the cell state to the gates.

    The input and forget gates look at the previous cell state, the output
    gate at the new one (Gers & Schmidhuber, "Recurrent nets that time and
    count", IJCNN 2000; "LSTMs with peephole connections" in the lecture
    "Sequence processing" of the course Advanced Deep Learning).
    With `z = x_t W + h_{t-1} U + b` split into blocks i, f, c, o:

    ```
    i_t = σ(z_i + p_i ⊙ c_{t-1})
    f_t = σ(z_f + p_f ⊙ c_{t-1})
    c_t = f_t ⊙ c_{t-1} + i_t ⊙ tanh(z_c)    (clipped to ±cell_clip if given)
    o_t = σ(z_o + p_o ⊙ c_t)
    h_t = o_t ⊙ tanh(c_t)
    ```

    The peepholes p_i, p_f, p_o are vectors (a diagonal weight), as in the
    paper. The weights are laid out as in TF Addons' `PeepholeLSTMCell`:
    `kernel` (D, 4U), `recurrent_kernel` (U, 4U), `bias` (4U,) with gate
    blocks in the order i, f, c, o, then `input_gate_peephole_weights`,
    `forget_gate_peephole_weights` and `output_gate_peephole_weights`, each
    (U,). Weights saved from that cell (`get_weights()`, or an H5 file read
    in that order) load with `set_weights` as they are.

    Args:
        units: Positive int, the width of h and c.
        activation: Activation g of the candidate and of the output,
            default `"tanh"`.
        recurrent_activation: Gate activation σ, default `"sigmoid"`.
        use_bias: Whether the gates have a bias b. Default `True`.
        kernel_initializer, recurrent_initializer, bias_initializer,
            peephole_initializer: Initializers of W, U, b and the peepholes.
            Defaults: `"glorot_uniform"`, `"orthogonal"`, `"zeros"`,
            `"glorot_uniform"` (TF Addons drew the peepholes with the kernel
            initializer, which is the same default).
        unit_forget_bias: If `True` (default), the forget block of the bias
            starts at one.
        kernel_regularizer, recurrent_regularizer, bias_regularizer,
            peephole_regularizer: Optional regularizers of the same weights.
        kernel_constraint, recurrent_constraint, bias_constraint,
            peephole_constraint: Optional constraints of the same weights.
        dropout: Fraction in [0, 1) of the input units dropped in training;
            one mask per sequence, drawn before the loop.
        recurrent_dropout: Fraction in [0, 1) of h_{t-1} dropped in training
            (variational: one mask per sequence).
        seed: Optional int seed of the dropout masks.
        cell_clip: Optional positive float: c_t is clipped to [−cell_clip,
            cell_clip] (as TensorFlow 1's LSTMCell and TFLite's LSTM do). An
            LSTM whose cell state grows over a long stream needs a bound to
            be exported in fixed point: an int8 or int16 state holds one
            range, calibrated in advance. Default None, no clip.
        **kwargs: Base `Layer` arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: One step, `(batch, features)`.
        states: `[h_{t-1}, c_{t-1}]`, each `(batch, units)`.
        training: Whether dropout is applied.

    Returns:
        `(h_t, [h_t, c_t])`.

    Example:

    >>> import numpy as np, keras
    >>> from keras_relrec.layers import PeepholeLSTMCell
    >>> rnn = keras.layers.RNN(PeepholeLSTMCell(4), return_sequences=True)
    >>> tuple(rnn(np.zeros((2, 10, 3), "float32")).shape)
    (2, 10, 4)
    """

    GATES = ("i", "f", "c", "o")

    def __init__(self, units, **kwargs):
        use_peepholes = kwargs.pop("use_peepholes", True)
        if use_peepholes is not True:
            raise ValueError(
                "PeepholeLSTMCell always has peepholes; received "
                f"use_peepholes={use_peepholes!r}. Use keras.layers.LSTMCell "
                "for an LSTM without them."
            )
        super().__init__(units, use_peepholes=True, **kwargs)

    def get_config(self):
        config = super().get_config()
        del config["use_peepholes"]
        return config
