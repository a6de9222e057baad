"""Each series standardized by its own mean and scale, valid steps only."""

from keras import ops

from keras_relrec.layers.scaling.series_moments import SeriesMoments
from keras_relrec.ops import zero_masked
from keras_relrec.utils.registration import register_layer


@register_layer
class SeriesNormalization(SeriesMoments):
    """Standardizes every series by its own mean and scale, per feature,
    over its valid steps:

    ```
    μ = mean_t x_t      σ̃ = √(mean_t (x_t − μ)² + ε + (8 · ε_m · μ)²)
    y_t = (x_t − μ) / σ̃
    ```

    (ε_m: the machine epsilon of the dtype the statistics are taken in, so
    that a flat series gives zeros, not rounding noise blown up to unit
    scale; the mean is taken in two passes, see `masked_scale`). One mean and variance
    over a whole training set (`keras.layers.Normalization`) leaves a series
    a thousand times smaller than the others nearly flat; this layer gives
    every series unit scale whatever its amplitude, which is z-normalization
    as Dau et al., "The UCR time series archive" (IEEE/CAA JAS 2019) apply it
    to most of their sets, with masks. What it removes, each series' level
    and amplitude, `SeriesStatistics` gives back as features.

    Under mixed precision the statistics are taken in float32 (a float16
    variance of a series of amplitude 1e-3 underflows) and the output is
    given in the compute dtype.

    Args:
        epsilon: ε > 0 added to the variance (default 1e-20: a series whose
            standard deviation is below about 1e-10 counts as flat).
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: (batch, steps, features) sequences.
        mask: Optional boolean (batch, steps) mask; masked steps are in no
            statistic and give zeros, whatever they hold.

    Returns:
        (batch, steps, features), the mask passed on.

    Example:

    >>> import keras, numpy as np
    >>> from keras_relrec.layers import SeriesNormalization
    >>> x = np.array([[[1e-4], [3e-4], [9.0]], [[100.0], [300.0], [9.0]]], "float32")
    >>> mask = np.array([[True, True, False], [True, True, False]])
    >>> keras.ops.convert_to_numpy(SeriesNormalization()(x, mask=mask)).round(3).tolist()
    [[[-1.0], [1.0], [0.0]], [[-1.0], [1.0], [0.0]]]
    """

    def __init__(self, epsilon=1e-20, **kwargs):
        super().__init__(epsilon, **kwargs)
        self.supports_masking = True

    def call(self, inputs, mask=None):
        x, mean, scale = self.moments(inputs, mask)
        return ops.cast(zero_masked((x - mean) / scale, mask), self.compute_dtype)

    def compute_mask(self, inputs, mask=None):
        return mask

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)
