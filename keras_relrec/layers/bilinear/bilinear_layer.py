"""The bilinear layer of Tran et al. (2019)."""

import keras
from keras import ops

from keras_relrec.ops import zero_masked
from keras_relrec.utils import validation
from keras_relrec.utils.initializers import clone_initializer
from keras_relrec.utils.registration import register_layer

DATA_FORMATS = ("channels_last", "channels_first")


@register_layer
class BilinearLayer(keras.layers.Layer):
    """Bilinear layer (BL): a linear map of the features and one of time.

    Tran, Iosifidis, Kanniainen and Gabbouj, "Temporal Attention-Augmented
    Bilinear Network for Financial Time-Series Data Analysis", IEEE TNNLS
    30(5), 2019. For one example X ∈ R^{D×T} (features × time):

    ```
    Y = φ(W1 X W2 + B),   W1 (D', D), W2 (T, T'), B (D', T')
    ```

    so Y ∈ R^{D'×T'}. The weights keep the paper's shapes whatever the
    layout of the data: with `data_format="channels_last"` (default, Keras'
    (batch, time, features)) the layer reads (batch, T, D) and writes
    (batch, T', D'); with `"channels_first"` it reads the paper's
    (batch, D, T) and writes (batch, D', T').

    Args:
        units: Positive int D', output features.
        steps: Positive int T', output time steps.
        activation: φ; default none.
        use_bias: Whether to add B. Default True.
        data_format: `"channels_last"` (default) or `"channels_first"`.
        squeeze: If True (needs `steps=1`), the time axis of the output is
            dropped: (batch, D'), e.g. class scores of a last layer.
        kernel_initializer: Of W1 and W2; default `"glorot_uniform"`.
        bias_initializer: Of B; default `"zeros"`.
        kernel_regularizer, bias_regularizer: Of W1 and W2, of B.
        kernel_constraint, bias_constraint: Of W1 and W2 (the paper trains
            with `keras.constraints.MaxNorm`), of B.
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: (batch, T, D), or (batch, D, T) with `"channels_first"`.
        mask: Optional boolean (batch, T): masked steps (padding) enter as
            zeros. W2 maps all T steps, so the output carries no mask.

    Returns:
        (batch, T', D'), (batch, D', T') with `"channels_first"`, or
        (batch, D') with `squeeze=True`.

    Example:

    >>> import numpy as np
    >>> from keras_relrec.layers import BilinearLayer
    >>> x = np.zeros((2, 10, 40), "float32")  # 10 steps of 40 features
    >>> tuple(BilinearLayer(units=60, steps=5, activation="relu")(x).shape)
    (2, 5, 60)
    """

    def __init__(
        self,
        units,
        steps,
        activation=None,
        use_bias=True,
        data_format="channels_last",
        squeeze=False,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.units = validation.check_positive_int("units", units)
        self.steps = validation.check_positive_int("steps", steps)
        self.activation = keras.activations.get(activation)
        self.use_bias = validation.check_bool("use_bias", use_bias)
        self.data_format = validation.check_choice("data_format", data_format, DATA_FORMATS)
        self.squeeze = validation.check_bool("squeeze", squeeze)
        if self.squeeze and self.steps != 1:
            raise ValueError(
                "Argument `squeeze=True` drops the time axis of the output and "
                f"needs steps=1; received steps={steps!r}."
            )
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.kernel_constraint = keras.constraints.get(kernel_constraint)
        self.bias_constraint = keras.constraints.get(bias_constraint)
        self.supports_masking = True

    def _time_and_features(self, input_shape):
        """(T, D) of an input shape, checked."""
        if len(input_shape) != 3 or None in tuple(input_shape[1:]):
            layout = "(batch, time, features)" if self.data_format == "channels_last" else (
                "(batch, features, time)")
            raise ValueError(
                f"{type(self).__name__} expects inputs {layout} with a known number "
                f"of steps and features; received input of shape {tuple(input_shape)}."
            )
        time, features = input_shape[1:] if self.data_format == "channels_last" else input_shape[:0:-1]
        if time == 0 or features == 0:
            raise ValueError(
                f"{type(self).__name__} needs at least one step and one feature; "
                f"received input of shape {tuple(input_shape)}."
            )
        return time, features

    def build(self, input_shape):
        time, features = self._time_and_features(input_shape)
        self.input_spec = keras.layers.InputSpec(ndim=3, axes={1: input_shape[1],
                                                               2: input_shape[2]})
        self.feature_kernel = self.add_weight(
            name="feature_kernel", shape=(self.units, features),
            initializer=clone_initializer(self.kernel_initializer, "feature_kernel"),
            regularizer=self.kernel_regularizer, constraint=self.kernel_constraint,
        )
        self.time_kernel = self.add_weight(
            name="time_kernel", shape=(time, self.steps),
            initializer=clone_initializer(self.kernel_initializer, "time_kernel"),
            regularizer=self.kernel_regularizer, constraint=self.kernel_constraint,
        )
        if self.use_bias:
            self.bias = self.add_weight(
                name="bias", shape=(self.units, self.steps),
                initializer=clone_initializer(self.bias_initializer, "bias"),
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
            )

    def _project_features(self, inputs, mask=None):
        """X̄ = W1 X, held as (batch, T, D') whatever the data format, with
        zeros at masked steps."""
        if self.data_format == "channels_first":
            inputs = ops.swapaxes(inputs, 1, 2)
        # Checked against (batch, T, D), so that channels_first takes its
        # (batch, T) mask too; TABL's attention reads the same mask.
        validation.check_mask(self, mask, inputs)
        return ops.matmul(zero_masked(inputs, mask), ops.transpose(self.feature_kernel))

    def _between(self, projected, mask=None):
        """What happens to X̄ before the time map: nothing here; TABL attends."""
        return projected

    def call(self, inputs, mask=None):
        projected = self._between(self._project_features(inputs, mask), mask)
        # (X̄ W2) as (batch, T', D'): Σ_t X̄[b, t, d] W2[t, u].
        outputs = ops.einsum("btd,tu->bud", projected, self.time_kernel)
        if self.use_bias:
            outputs = outputs + ops.transpose(self.bias)
        outputs = self.activation(outputs)
        if self.squeeze:
            return outputs[:, 0]
        if self.data_format == "channels_first":
            return ops.swapaxes(outputs, 1, 2)
        return outputs

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        if self.squeeze:
            return (input_shape[0], self.units)
        if self.data_format == "channels_first":
            return (input_shape[0], self.units, self.steps)
        return (input_shape[0], self.steps, self.units)

    def get_config(self):
        config = {
            "units": self.units,
            "steps": self.steps,
            "activation": keras.activations.serialize(self.activation),
            "use_bias": self.use_bias,
            "data_format": self.data_format,
            "squeeze": self.squeeze,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
            "bias_regularizer": keras.regularizers.serialize(self.bias_regularizer),
            "kernel_constraint": keras.constraints.serialize(self.kernel_constraint),
            "bias_constraint": keras.constraints.serialize(self.bias_constraint),
        }
        return {**super().get_config(), **config}
