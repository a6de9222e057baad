"""Means of a sequence's features over segments of its time axis."""

import keras
from keras import ops

from keras_relrec.ops import masked_segment_mean
from keras_relrec.utils import validation
from keras_relrec.utils.dtypes import at_least_float32
from keras_relrec.utils.registration import register_layer


@register_layer
class SegmentMean(keras.layers.Layer):
    """Means of the features over S consecutive segments of the time axis,
    valid steps only: the coarse shape of a sequence, beside the segment
    histograms of a `BoFQuantizer` (`output_mode="segment_histograms"`)
    that say which local shapes occur in each segment.

    ```
    y_s = (1 / N_s) Σ_{t valid, ⌊t · S / T⌋ = s} x_t       s = 0, …, S − 1
    ```

    with N_s the valid steps of segment s (zeros where it has none). The
    segments are those of `BoFQuantizer`'s segment histograms (the same
    for every sequence, ⌊T/S⌋ or ⌈T/S⌉ steps each): a sequence padded at
    the end leaves its last segments empty. It is piecewise aggregate
    approximation (PAA; Keogh et al., "Dimensionality reduction for fast
    similarity search in large time series databases", KAIS 2001) with
    masks. Under mixed precision the sums are taken in float32 (a float16
    sum of 4 steps near 2e4 overflows) and the means given in the compute
    dtype. The sums are a matrix product: where float32 products run in
    TF32 (NVIDIA GPUs since Ampere, TensorFlow's and JAX's default), the
    inputs keep about 3 significant digits, so standardize them first, as
    `tabl_network`'s `Normalization` does.

    Args:
        num_segments: S, a positive int; at most the number of steps, where
            that is known when the layer is built.
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: (batch, steps, features) sequences.
        mask: Optional boolean (batch, steps) mask; masked steps are in no
            mean, whatever they hold (NaN padding included).

    Returns:
        (batch, S, features). The mask is consumed.

    Example:

    >>> import keras, numpy as np
    >>> from keras_relrec.layers import SegmentMean
    >>> x = np.arange(12, dtype="float32").reshape(1, 6, 2)
    >>> keras.ops.convert_to_numpy(SegmentMean(3)(x)).tolist()
    [[[1.0, 2.0], [5.0, 6.0], [9.0, 10.0]]]
    >>> mask = np.array([[True, True, True, False, False, False]])
    >>> keras.ops.convert_to_numpy(SegmentMean(3)(x, mask=mask)).tolist()
    [[[1.0, 2.0], [4.0, 5.0], [0.0, 0.0]]]
    """

    def __init__(self, num_segments, **kwargs):
        super().__init__(**kwargs)
        self.num_segments = validation.check_positive_int("num_segments", num_segments)
        self.supports_masking = True

    def build(self, input_shape):
        self.input_spec = validation.sequence_input_spec(self, input_shape)
        validation.check_num_segments(self.num_segments, input_shape)

    @property
    def input_dtype(self):
        # Summed in float32: a float16 sum of a few large values overflows.
        return at_least_float32(self.compute_dtype)

    def call(self, inputs, mask=None):
        validation.check_mask(self, mask, inputs)
        means = masked_segment_mean(ops.cast(inputs, self.input_dtype), mask, self.num_segments)
        return ops.cast(means, self.compute_dtype)

    def compute_mask(self, inputs, mask=None):
        return None

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.num_segments, input_shape[-1])

    def get_config(self):
        return {**super().get_config(), "num_segments": self.num_segments}
