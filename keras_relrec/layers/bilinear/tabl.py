"""The temporal attention-augmented bilinear layer of Tran et al. (2019)."""

import keras
from keras import ops

from keras_relrec.constraints import UnitInterval
from keras_relrec.layers.bilinear.bilinear_layer import BilinearLayer
from keras_relrec.ops.two_d_attention import two_d_attention
from keras_relrec.ops.two_d_attention import two_d_attention_weights
from keras_relrec.utils import validation
from keras_relrec.utils.initializers import Constant
from keras_relrec.utils.initializers import clone_initializer
from keras_relrec.utils.registration import register_layer

ATTEND_OVER = ("time", "features")


@register_layer
class TABL(BilinearLayer):
    """Temporal attention-augmented bilinear layer (TABL).

    Tran, Iosifidis, Kanniainen and Gabbouj, "Temporal Attention-Augmented
    Bilinear Network for Financial Time-Series Data Analysis", IEEE TNNLS
    30(5), 2019, eqs. (4)–(8), exactly as the paper writes them. For one
    example X ∈ R^{D×T} (features × time):

    ```
    X̄ = W1 X                                   W1 (D', D)
    E = X̄ W,  W (T, T) with its diagonal set to 1/T on every call
    A = softmax of each row of E over time
    X̃ = λ (X̄ ⊙ A) + (1 − λ) X̄                  λ ∈ [0, 1]
    Y = φ(X̃ W2 + B)                            W2 (T, T'), B (D', T')
    ```

    λ starts at 0.5, learns, and a `UnitInterval` constraint keeps it in
    [0, 1] after every update; λ multiplies the attended term, as in the
    paper. (The authors' Keras 2 code flips it — its `alpha` multiplies the
    un-attended term — and clips it to [0, 10].) W starts at 1/T everywhere,
    so A starts uniform. With `attend_over="features"` the same attention
    runs over the D' projected features instead, i.e. on X̄ᵀ: E = (X̄ᵀ W)ᵀ
    with W (D', D') and its diagonal 1/D', A the softmax of each column over
    the features.

    Layout, `squeeze` and the remaining arguments are those of
    `BilinearLayer`.

    Args:
        units: Positive int D'.
        steps: Positive int T'.
        attend_over: `"time"` (default, the paper's) or `"features"`.
        initial_lambda: λ's initial value in [0, 1]. Default 0.5.
        attention_initializer: Of W; default the constant 1/L (L = T, or D'
            for features).
        attention_regularizer, attention_constraint: Of W.
        **kwargs: `BilinearLayer` arguments (`activation`, `use_bias`,
            `data_format`, `squeeze`, initializers, regularizers,
            constraints) and base `Layer` arguments.

    Call arguments:
        inputs: (batch, T, D), or (batch, D, T) with `"channels_first"`.
        mask: Optional boolean (batch, T): masked steps (padding) enter as
            zeros and, with attention over time, get no attention weight;
            the output carries no mask.

    Returns:
        As `BilinearLayer`. `attention_weights(inputs)` gives A for a batch,
        in the data format's layout ((batch, T, D') or (batch, D', T)), and
        `lambda_` is the λ weight.

    Example:

    >>> import numpy as np
    >>> from keras_relrec.layers import TABL
    >>> x = np.random.default_rng(0).normal(size=(2, 10, 40)).astype("float32")
    >>> layer = TABL(units=3, steps=1, activation="softmax", squeeze=True)
    >>> probabilities = layer(x)
    >>> tuple(probabilities.shape), float(layer.lambda_.numpy())
    ((2, 3), 0.5)
    """

    def __init__(
        self,
        units,
        steps,
        attend_over="time",
        initial_lambda=0.5,
        attention_initializer=None,
        attention_regularizer=None,
        attention_constraint=None,
        **kwargs,
    ):
        super().__init__(units, steps, **kwargs)
        self.attend_over = validation.check_choice("attend_over", attend_over, ATTEND_OVER)
        self.initial_lambda = validation.check_unit_interval("initial_lambda", initial_lambda)
        self.attention_initializer = (
            None if attention_initializer is None
            else keras.initializers.get(attention_initializer)
        )
        self.attention_regularizer = keras.regularizers.get(attention_regularizer)
        self.attention_constraint = keras.constraints.get(attention_constraint)

    def build(self, input_shape):
        super().build(input_shape)
        time, _ = self._time_and_features(input_shape)
        length = time if self.attend_over == "time" else self.units
        initializer = (
            Constant(1.0 / length) if self.attention_initializer is None
            else clone_initializer(self.attention_initializer, "attention_kernel")
        )
        self.attention_kernel = self.add_weight(
            name="attention_kernel", shape=(length, length), initializer=initializer,
            regularizer=self.attention_regularizer, constraint=self.attention_constraint,
        )
        self.lambda_ = self.add_weight(
            name="lambda", shape=(), initializer=Constant(self.initial_lambda),
            constraint=UnitInterval(),
        )

    @property
    def _axis(self):
        # X̄ is held as (batch, T, D'): time is axis 1, features axis 2.
        return 1 if self.attend_over == "time" else 2

    def _between(self, projected, mask=None):
        kernel = ops.cast(self.attention_kernel, projected.dtype)
        mix = ops.cast(self.lambda_, projected.dtype)
        return two_d_attention(projected, kernel, mix, self._axis, mask if self._axis == 1 else None)

    def attention_weights(self, inputs):
        """A for a batch: (batch, T, D'), or (batch, D', T) with
        `"channels_first"`."""
        inputs = ops.convert_to_tensor(inputs, dtype=self.compute_dtype)
        if not self.built:
            self.build(inputs.shape)
        projected = self._project_features(inputs)
        kernel = ops.cast(self.attention_kernel, projected.dtype)
        weights = two_d_attention_weights(projected, kernel, self._axis)
        if self.data_format == "channels_first":
            return ops.swapaxes(weights, 1, 2)
        return weights

    def get_config(self):
        config = {
            "attend_over": self.attend_over,
            "initial_lambda": self.initial_lambda,
            "attention_initializer": (
                None if self.attention_initializer is None
                else keras.initializers.serialize(self.attention_initializer)
            ),
            "attention_regularizer": keras.regularizers.serialize(self.attention_regularizer),
            "attention_constraint": keras.constraints.serialize(self.attention_constraint),
        }
        return {**super().get_config(), **config}
