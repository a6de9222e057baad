"""The recurrent bag-of-features cell (Krestenitis et al. 2020)."""

import keras
from keras import ops

from keras_relrec.layers.bag_of_features.codebook import adapt_codebook
from keras_relrec.layers.bag_of_features.codebook import check_codeword_arguments
from keras_relrec.ops import codeword_logits
from keras_relrec.utils import validation
from keras_relrec.utils.initializers import Constant
from keras_relrec.utils.initializers import clone_initializer
from keras_relrec.utils.registration import register_layer


@register_layer
class RecurrentBoFCell(keras.layers.Layer):
    """Recurrent neural bag-of-features quantizer, a cell for
    `keras.layers.RNN`.

    After Krestenitis, Passalis, Iosifidis, Gabbouj and Tefas, "Recurrent
    bag-of-features for visual information analysis", Pattern Recognition
    106, 2020, as the lecture "Sequence processing" of the course Advanced
    Deep Learning presents it: a GRU-like quantizer whose histogram s_j is
    updated step by step. The lecture names a reset gate r,
    an update gate z, a recurrent quantizer d and the update
    s_j = (1 − z) ⊙ s_{j−1} + z ⊙ u, but does not say what u is or how d
    enters it; there is no public code. keras_relrec defines them, by
    analogy with the GRU's candidate state, as

    ```
    a   = −‖w_k ⊙ (x_j − v_k)‖₂, k = 1..K            (NBoF similarity logits)
    r   = σ(x_j W_r + s_{j−1} U_r + b_r)             (reset gate, K)
    z   = σ(x_j W_z + s_{j−1} U_z + b_z)             (update gate, K)
    d   = a + (r ⊙ s_{j−1}) U_d                      (recurrent quantizer)
    u   = softmax(d)                                 (memberships of x_j in context)
    s_j = (1 − z) ⊙ s_{j−1} + z ⊙ u
    ```

    so that r decides how much of the running histogram biases the
    quantization of the new vector and z how much the new memberships move
    the histogram. s_j is the output and the state. It starts at zeros
    (Keras' zero state, so `reset_state()` and masking behave as for any
    cell), hence the first s_j sum to less than one; each is a mix of
    memberships, not a normalised histogram. Distances and the softmax are
    computed in float32 under mixed precision, but `keras.layers.RNN` casts
    the inputs to the compute dtype before the cell sees them: normalise
    large-valued inputs first.
    The sequence-level histogram of the lecture, the mean of the s_j over
    the valid steps, is `RNN(cell, return_sequences=True)` followed by
    `keras.layers.GlobalAveragePooling1D()`, which honours the mask.

    With `groups=G` each step is G vectors side by side,
    x_j = [x_j^(1), …, x_j^(G)] of D / G features each, and each is its own
    sequence through the same codebook, scales, gates and U_d: s_j =
    [s_j^(1), …, s_j^(G)], every s_j^(g) by the equations above from
    x_j^(g) and s_{j−1}^(g). keras_relrec's classifiers quantize each
    dilation of MiniRocket's kernels so (`recurrent_nbof_classifier`):
    one histogram per dilation, for the weights of one.

    Args:
        num_codewords: Positive int K.
        distance: `"l2"` (default) or `"squared_l2"`, as in `BoFQuantizer`.
        initial_scale: Positive float, initial value of the per-dimension
            scales w_k. Default 1.0.
        epsilon: Non-negative float under the square root. Default 1e-12.
        groups: Positive int G (default 1): the features of a step are G
            vectors of equal size, each quantized with a state of its own
            (above); the output and the state have G·K values.
        codebook_initializer: Default `"random_normal"`; `adapt(data)`
            sets the codebook by k-means instead, as for `BoFQuantizer`.
        kernel_initializer: Of W_r, W_z; default `"glorot_uniform"`.
        recurrent_initializer: Of U_r, U_z, U_d; default `"orthogonal"`.
        bias_initializer: Of b_r, b_z; default `"zeros"`.
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: One step, (batch, D).
        states: `[s]`, (batch, G·K).

    Returns:
        `(s_j, [s_j])`.

    Example:

    >>> import numpy as np, keras
    >>> from keras_relrec.layers import RecurrentBoFCell
    >>> x = np.random.default_rng(0).normal(size=(2, 6, 3)).astype("float32")
    >>> layer = keras.layers.RNN(RecurrentBoFCell(5), return_sequences=True)
    >>> tuple(keras.layers.GlobalAveragePooling1D()(layer(x)).shape)
    (2, 5)
    """

    # s_j, the output, is states[0] (see keras_relrec.export.graph.rnn_streamer).
    output_is_first_state = True

    def __init__(
        self,
        num_codewords,
        distance="l2",
        initial_scale=1.0,
        epsilon=1e-12,
        groups=1,
        codebook_initializer="random_normal",
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_codewords, self.distance, self.initial_scale, self.epsilon = check_codeword_arguments(
            num_codewords, distance, initial_scale, epsilon)
        self.groups = validation.check_positive_int("groups", groups)
        self.codebook_initializer = keras.initializers.get(codebook_initializer)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.recurrent_initializer = keras.initializers.get(recurrent_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.state_size = [self.groups * self.num_codewords]
        self.output_size = self.groups * self.num_codewords

    def build(self, input_shape):
        if len(input_shape) != 2 or input_shape[-1] is None:
            raise ValueError(
                "RecurrentBoFCell expects steps of shape (batch, features) "
                "(sequences of shape (batch, time, features)); received steps "
                f"of shape {tuple(input_shape)}."
            )
        if input_shape[-1] % self.groups:
            raise ValueError(
                f"RecurrentBoFCell with groups={self.groups} expects a number of features that "
                f"{self.groups} divides (the groups side by side); received steps of shape "
                f"{tuple(input_shape)}. Give groups that divides {input_shape[-1]}."
            )
        self.input_spec = keras.layers.InputSpec(ndim=2, axes={-1: input_shape[-1]})
        features, k = input_shape[-1] // self.groups, self.num_codewords
        self.codebook = self.add_weight(
            name="codebook", shape=(k, features),
            initializer=clone_initializer(self.codebook_initializer, "codebook"),
        )
        self.scales = self.add_weight(
            name="scales", shape=(k, features),
            initializer=Constant(self.initial_scale),
        )
        # r and z side by side: [W_r | W_z], [U_r | U_z], [b_r | b_z].
        self.kernel = self.add_weight(
            name="kernel", shape=(features, 2 * k),
            initializer=clone_initializer(self.kernel_initializer, "kernel"),
        )
        self.recurrent_kernel = self.add_weight(
            name="recurrent_kernel", shape=(k, 2 * k),
            initializer=clone_initializer(self.recurrent_initializer, "recurrent_kernel"),
        )
        self.bias = self.add_weight(
            name="bias", shape=(2 * k,), initializer=clone_initializer(self.bias_initializer, "bias")
        )
        self.quantizer_kernel = self.add_weight(
            name="quantizer_kernel", shape=(k, k),
            initializer=clone_initializer(self.recurrent_initializer, "quantizer_kernel"),
        )

    def call(self, inputs, states):
        validation.check_cell_states(self, inputs, states)
        previous = states[0]
        if self.groups > 1:
            # The groups as rows of their own: (batch · G, D / G), (batch · G, K).
            inputs = ops.reshape(inputs, (-1, self.codebook.shape[-1]))
            previous = ops.reshape(previous, (-1, self.num_codewords))
        logits = codeword_logits(inputs, self.codebook, self.scales, self.distance, self.epsilon)
        gates = ops.sigmoid(
            ops.matmul(inputs, self.kernel) + ops.matmul(previous, self.recurrent_kernel)
            + self.bias
        )
        reset, update = gates[:, : self.num_codewords], gates[:, self.num_codewords :]
        # The softmax runs in float32 with the logits: a squared distance
        # beyond float16's range would make every logit −inf.
        recurrent = ops.cast(ops.matmul(reset * previous, self.quantizer_kernel), logits.dtype)
        memberships = ops.cast(ops.softmax(logits + recurrent, axis=-1), self.compute_dtype)
        histogram = (1.0 - update) * previous + update * memberships
        if self.groups > 1:
            histogram = ops.reshape(histogram, (-1, self.groups * self.num_codewords))
        return histogram, [histogram]

    def adapt(self, data, sample_size=100_000, seed=None, mask_value=None, n_init=4):
        """Sets the codebook to the k-means centres of sampled feature
        vectors (with `groups`, of their groups), as `BoFQuantizer.adapt`
        does."""
        adapt_codebook(self, data, lambda features: (None, features),
                       sample_size, seed, mask_value, n_init, groups=self.groups)

    def get_initial_state(self, batch_size=None):
        return [ops.zeros((batch_size, self.groups * self.num_codewords), dtype=self.compute_dtype)]

    def compute_output_shape(self, inputs_shape, states_shape=None):
        batch = inputs_shape[0]
        return (batch, self.groups * self.num_codewords), [(batch, self.groups * self.num_codewords)]

    def get_config(self):
        config = {
            "num_codewords": self.num_codewords,
            "distance": self.distance,
            "initial_scale": self.initial_scale,
            "epsilon": self.epsilon,
            "groups": self.groups,
            "codebook_initializer": keras.initializers.serialize(self.codebook_initializer),
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "recurrent_initializer": keras.initializers.serialize(self.recurrent_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
        }
        return {**super().get_config(), **config}
