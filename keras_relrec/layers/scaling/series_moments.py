"""What the per-series scaling layers share: each series' mean and scale,
taken in float32 or wider."""

import keras
from keras import ops

from keras_relrec.ops import masked_scale
from keras_relrec.utils import validation
from keras_relrec.utils.dtypes import at_least_float32


class SeriesMoments(keras.layers.Layer):
    """The base of `SeriesNormalization` and `SeriesStatistics`: their ε,
    their (batch, steps, features) input, and `moments`."""

    def __init__(self, epsilon=1e-20, **kwargs):
        super().__init__(**kwargs)
        # ε > 0: a flat or empty series has scale √ε, not 0 (no 0/0, no log 0).
        self.epsilon = validation.check_positive_float("epsilon", epsilon)

    def build(self, input_shape):
        self.input_spec = validation.sequence_input_spec(self, input_shape)

    @property
    def input_dtype(self):
        # Statistics in float32 under mixed precision: float16 squares of
        # small amplitudes underflow.
        return at_least_float32(self.compute_dtype)

    def moments(self, inputs, mask):
        """`(x, μ, σ̃)`: the input in the statistics' dtype, and each
        series' mean and scale (`masked_scale`), its steps' axis kept."""
        validation.check_mask(self, mask, inputs)
        x = ops.cast(inputs, self.input_dtype)
        mean, scale = masked_scale(x, mask, self.epsilon)
        return x, mean, scale

    def get_config(self):
        return {**super().get_config(), "epsilon": self.epsilon}
