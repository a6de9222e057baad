"""The coupled input-forget-gate LSTM cell (CIFG)."""

from keras_relrec.layers.recurrent.lstm_family_cell import LSTMFamilyCell
from keras_relrec.utils.registration import register_layer


@register_layer
class CoupledLSTMCell(LSTMFamilyCell):
    """LSTM cell whose input gate is one minus its forget gate (CIFG).

    The cell decides together what to forget and what to write ("LSTMs
    with coupled forget and input gates" in the lecture "Sequence
    processing" of the course Advanced Deep Learning; Greff et al.,
    "LSTM: A Search Space Odyssey", IEEE TNNLS 2017, variant CIFG). With
    `z = x_t W + h_{t-1} U + b` split into blocks f, c, o:

    ```
    f_t = σ(z_f [+ p_f ⊙ c_{t-1}])
    c_t = f_t ⊙ c_{t-1} + (1 − f_t) ⊙ tanh(z_c)    (clipped to ±cell_clip if given)
    o_t = σ(z_o [+ p_o ⊙ c_t])
    h_t = o_t ⊙ tanh(c_t)
    ```

    The bracketed peephole terms are present when `use_peepholes=True`.
    There are three gate blocks instead of four, so the cell has a quarter
    fewer weights than an LSTM of the same width and does a quarter less
    matrix work. Weights: `kernel` (D, 3U), `recurrent_kernel` (U, 3U),
    `bias` (3U,) in block order f, c, o, then with peepholes
    `forget_gate_peephole_weights` and `output_gate_peephole_weights`, each
    (U,).

    Args:
        units: Positive int, the width of h and c.
        use_peepholes: Whether the forget and output gates see the cell state.
            Default `False`.
        activation: Activation g of the candidate and of the output,
            default `"tanh"`.
        recurrent_activation: Gate activation σ, default `"sigmoid"`.
        use_bias: Whether the gates have a bias b. Default `True`.
        kernel_initializer, recurrent_initializer, bias_initializer,
            peephole_initializer: Initializers of W, U, b and the peepholes.
        unit_forget_bias: If `True` (default), the forget block of the bias
            starts at one.
        kernel_regularizer, recurrent_regularizer, bias_regularizer,
            peephole_regularizer: Optional regularizers of the same weights.
        kernel_constraint, recurrent_constraint, bias_constraint,
            peephole_constraint: Optional constraints of the same weights.
        dropout: Fraction in [0, 1) of the input units dropped in training.
        recurrent_dropout: Fraction in [0, 1) of h_{t-1} dropped in training.
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
    >>> from keras_relrec.layers import CoupledLSTMCell
    >>> rnn = keras.layers.RNN(CoupledLSTMCell(4, use_peepholes=True))
    >>> tuple(rnn(np.zeros((2, 10, 3), "float32")).shape)
    (2, 4)
    """

    GATES = ("f", "c", "o")

    def __init__(self, units, use_peepholes=False, **kwargs):
        super().__init__(units, use_peepholes=use_peepholes, **kwargs)
