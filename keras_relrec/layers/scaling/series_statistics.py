"""Each series' level and scale, as features beside the standardized series."""

import math

import numpy as np
from keras import ops

from keras_relrec.layers.scaling.series_moments import SeriesMoments
from keras_relrec.ops import zero_masked
from keras_relrec.utils import validation
from keras_relrec.utils.registration import register_layer


@register_layer
class SeriesStatistics(SeriesMoments):
    """Each series' level and scale per feature, relative to a reference
    (m, v), the mean and variance of the training steps:

    ```
    μ, σ̃ as in SeriesNormalization (valid steps only)
    level = (μ − m) / √v        scale = log10(σ̃ / √v)
    output = [level_1 … level_D, scale_1 … scale_D]
    ```

    With `per_step=True` the output is repeated at every step, zeros at
    the masked ones, and the mask passes on: for a model that reads the
    steps (a bilinear network), beside the standardized series.

    What `SeriesNormalization` takes from a series, given back as 2·D
    numbers for a classifier's head: on a set whose amplitudes say nothing
    of the class the head can ignore them, and where they do (a standing
    and a running person's accelerations) it keeps them. The scale is in
    decades of the reference's standard deviation (−5 for a series 10⁵
    times smaller) and the level in its standard deviations, so that
    neither depends on the data's units.

    Args:
        mean: m, a number or one per feature (default 0).
        variance: v > 0, a number or one per feature (default 1).
        epsilon: ε > 0, as in `SeriesNormalization`.
        per_step: Whether the output is (batch, 2·D), the default, or
            (batch, steps, 2·D), the same at every valid step.
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: (batch, steps, features) sequences.
        mask: Optional boolean (batch, steps) mask; masked steps are in no
            statistic, whatever they hold.

    Returns:
        (batch, 2 · features), the mask consumed; with `per_step`,
        (batch, steps, 2 · features), the mask passed on.

    Example:

    >>> import keras, numpy as np
    >>> from keras_relrec.layers import SeriesStatistics
    >>> x = np.array([[[0.01], [0.03]], [[100.0], [300.0]]], "float32")
    >>> y = keras.ops.convert_to_numpy(SeriesStatistics(variance=1.0)(x))
    >>> np.round(y.astype("float64"), 3).tolist()
    [[0.02, -2.0], [200.0, 2.0]]
    """

    def __init__(self, mean=0.0, variance=1.0, epsilon=1e-20, per_step=False, **kwargs):
        super().__init__(epsilon, **kwargs)
        self.per_step = validation.check_bool("per_step", per_step)
        self.supports_masking = True
        self.mean = _numbers("mean", mean)
        self.variance = _numbers("variance", variance)
        if np.any(np.asarray(self.variance) <= 0):
            raise ValueError(f"Argument `variance` must be positive; received variance={variance!r}.")

    def build(self, input_shape):
        super().build(input_shape)
        features = input_shape[-1]
        for name in ("mean", "variance"):
            size = np.size(getattr(self, name))
            if size not in (1, features):
                raise ValueError(
                    f"Argument `{name}` must be one number or one per feature ({features}); received "
                    f"{name}={getattr(self, name)!r}."
                )

    def call(self, inputs, mask=None):
        x, mean, scale = self.moments(inputs, mask)
        reference = ops.convert_to_tensor(np.reshape(self.mean, -1), dtype=x.dtype)
        # log10(σ̃ / √v) = log(σ̃) / ln 10 − log10(v) / 2, the second a
        # constant of float64 arithmetic in Python.
        root = ops.convert_to_tensor(np.sqrt(np.reshape(self.variance, -1)), dtype=x.dtype)
        level = (ops.squeeze(mean, 1) - reference) / root
        decades = ops.log(ops.squeeze(scale, 1)) / math.log(10.0) - ops.convert_to_tensor(
            np.log10(np.reshape(self.variance, -1)) / 2, dtype=x.dtype)
        statistics = ops.concatenate([level, decades], axis=-1)
        if self.per_step:
            # Repeated by a broadcast sum (an ADD; TFLM has no BROADCAST_TO).
            statistics = zero_masked(ops.expand_dims(statistics, 1) + ops.zeros_like(x[..., :1]), mask)
        return ops.cast(statistics, self.compute_dtype)

    def compute_mask(self, inputs, mask=None):
        return mask if self.per_step else None

    def compute_output_shape(self, input_shape):
        width = None if input_shape[-1] is None else 2 * input_shape[-1]
        return (input_shape[0], input_shape[1], width) if self.per_step else (input_shape[0], width)

    def get_config(self):
        return {**super().get_config(), "mean": self.mean, "variance": self.variance, "per_step": self.per_step}


def _numbers(name, value):
    """A finite number or a list of them, as `get_config` keeps it."""
    array = np.asarray(value, np.float64) if not isinstance(value, str) else np.asarray(np.nan)
    if array.ndim > 1 or array.size == 0 or not np.all(np.isfinite(array)):
        raise ValueError(f"Argument `{name}` must be a finite number or a list of them, one per feature; received "
                         f"{name}={value!r}.")
    return float(array) if array.ndim == 0 else array.tolist()
