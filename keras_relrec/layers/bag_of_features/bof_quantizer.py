"""The neural bag-of-features quantizer of Passalis and Tefas (2017)."""

import keras
from keras import ops

from keras_relrec.layers.bag_of_features.codebook import adapt_codebook
from keras_relrec.layers.bag_of_features.codebook import check_codeword_arguments
from keras_relrec.ops import codeword_logits
from keras_relrec.ops import masked_mean
from keras_relrec.ops import masked_segment_mean
from keras_relrec.ops import zero_masked
from keras_relrec.utils import validation
from keras_relrec.utils.dtypes import at_least_float32
from keras_relrec.utils.initializers import Constant
from keras_relrec.utils.initializers import clone_initializer
from keras_relrec.utils.registration import register_layer

SCALES = ("per_dimension", "per_codeword")
OUTPUT_MODES = ("memberships", "histogram", "segment_histograms")


@register_layer
class BoFQuantizer(keras.layers.Layer):
    """Neural bag-of-features (NBoF) quantizer: soft codeword memberships of
    every feature vector, or their histogram.

    Passalis and Tefas, "Neural Bag-of-Features Learning", Pattern
    Recognition 64, 2017, as the lecture "Sequence processing" of the course
    Advanced Deep Learning formulates it. With a codebook of K
    codewords v_k ∈ R^D and scales w_k, each feature vector x_n gets

    ```
    d_nk = ‖w_k ⊙ (x_n − v_k)‖₂                      distance="l2"
    d_nk = ‖w_k ⊙ (x_n − v_k)‖₂²                     distance="squared_l2"
    φ_nk = exp(−d_nk) / Σ_j exp(−d_nj)               (softmax over codewords)
    y    = (1 / N) Σ_n φ_n                           output_mode="histogram"
    y_s  = (1 / N_s) Σ_{n ∈ segment s} φ_n           output_mode="segment_histograms"
    ```

    where the means run over the valid (unmasked) vectors. Segment
    histograms keep coarse order, where one histogram keeps none: step t of
    T is in segment s = ⌊t · S / T⌋ of S = `num_segments`, so a sequence
    gives S histograms of consecutive, near-equal stretches of the time
    axis. The segments are the same for every sequence (a segment means the
    same time in each): a sequence padded at the end leaves its last
    segments without a valid vector, and such a segment gives zeros.
    (Segments of each sequence's own valid steps instead did worse where
    the lengths differ: `benchmarks/RESULTS.md`.)

    That lecture's layer is `distance="l2"`, `scale="per_dimension"` (w_k ∈ R^D). The
    authors' later code uses a scalar scale per codeword
    (`scale="per_codeword"`) and a Gaussian of the squared distance
    (`distance="squared_l2"`, i.e. φ_nk ∝ exp(−‖w_k ⊙ (x_n − v_k)‖²)).
    ε = `epsilon` is added under the square root, so gradients stay finite
    where a vector sits on a codeword. Under mixed precision the inputs and
    weights are taken in float32 (not cast to the compute dtype first) and
    distances, softmax and histogram are computed in float32; only the
    output takes the compute dtype.

    The codebook is best initialised from data: `adapt(data)` runs k-means
    (scikit-learn's `KMeans`, extra `[kmeans]`) on sampled feature vectors,
    as the authors do.

    Args:
        num_codewords: Positive int K.
        scale: `"per_dimension"` (default, w_k ∈ R^D) or `"per_codeword"`
            (one scalar per codeword).
        distance: `"l2"` (default) or `"squared_l2"`.
        output_mode: `"memberships"` (default): φ for every vector, the
            input's shape with the last axis K; `"histogram"`: their mean
            over the vectors, (batch, K); `"segment_histograms"`: their
            means over S segments of the steps, (batch, S, K) (sequences
            only).
        num_segments: S, a positive int, with `"segment_histograms"` only
            (required there, refused otherwise); at most the number of
            steps, where that is known when the layer is built.
        initial_scale: Positive float, the initial value of every scale
            (the authors' 1/g for a softness g). Default 1.0.
        epsilon: Non-negative float under the square root. Default 1e-12.
        codebook_initializer: Default `"random_normal"`; replaced by
            `adapt`.
        codebook_regularizer, scale_regularizer, codebook_constraint,
            scale_constraint: Of the two weights.
        **kwargs: Base `Layer` arguments.

    Call arguments:
        inputs: (batch, steps, D) sequences or (batch, height, width, D)
            feature maps.
        mask: Optional boolean mask, (batch, steps) for sequences or
            (batch, height, width) for feature maps; masked vectors count in
            no histogram and are quantized as zeros whatever they hold (NaN
            padding included).

    Returns:
        memberships (input shape with last axis K), or the histogram
        (batch, K), or the segment histograms (batch, S, K). Memberships
        carry the input's mask on; histograms consume it.

    Example:

    >>> import keras, numpy as np
    >>> from keras_relrec.layers import BoFQuantizer
    >>> x = np.random.default_rng(0).normal(size=(8, 20, 3)).astype("float32")
    >>> quantizer = BoFQuantizer(4, output_mode="histogram")
    >>> quantizer.adapt(x, seed=0)
    >>> histogram = keras.ops.convert_to_numpy(quantizer(x))
    >>> histogram.shape, bool(np.allclose(histogram.sum(-1), 1.0))
    ((8, 4), True)
    """

    def __init__(
        self,
        num_codewords,
        scale="per_dimension",
        distance="l2",
        output_mode="memberships",
        num_segments=None,
        initial_scale=1.0,
        epsilon=1e-12,
        codebook_initializer="random_normal",
        codebook_regularizer=None,
        scale_regularizer=None,
        codebook_constraint=None,
        scale_constraint=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_codewords, self.distance, self.initial_scale, self.epsilon = check_codeword_arguments(
            num_codewords, distance, initial_scale, epsilon)
        self.scale = validation.check_choice("scale", scale, SCALES)
        self.output_mode = validation.check_choice("output_mode", output_mode, OUTPUT_MODES)
        if (num_segments is None) != (self.output_mode != "segment_histograms"):
            raise ValueError(
                "Argument `num_segments` must be a positive integer with output_mode='segment_histograms' "
                f"and None otherwise; received num_segments={num_segments!r} with "
                f"output_mode={self.output_mode!r}."
            )
        self.num_segments = None if num_segments is None else validation.check_positive_int(
            "num_segments", num_segments)
        self.codebook_initializer = keras.initializers.get(codebook_initializer)
        self.codebook_regularizer = keras.regularizers.get(codebook_regularizer)
        self.scale_regularizer = keras.regularizers.get(scale_regularizer)
        self.codebook_constraint = keras.constraints.get(codebook_constraint)
        self.scale_constraint = keras.constraints.get(scale_constraint)
        self.supports_masking = True

    def build(self, input_shape):
        if len(input_shape) not in (3, 4) or input_shape[-1] is None:
            raise ValueError(
                "BoFQuantizer expects sequences (batch, steps, features) or "
                "feature maps (batch, height, width, features) with a known "
                f"number of features; received input of shape {tuple(input_shape)}."
            )
        features = input_shape[-1]
        if self.output_mode == "segment_histograms":
            if len(input_shape) != 3:
                raise ValueError(
                    "BoFQuantizer with output_mode='segment_histograms' expects sequences (batch, steps, "
                    f"features); received input of shape {tuple(input_shape)}."
                )
            validation.check_num_segments(self.num_segments, input_shape)
            self.input_spec = keras.layers.InputSpec(ndim=3, axes={-1: features})
        else:
            self.input_spec = keras.layers.InputSpec(min_ndim=3, max_ndim=4, axes={-1: features})
        self.codebook = self.add_weight(
            name="codebook",
            shape=(self.num_codewords, features),
            initializer=clone_initializer(self.codebook_initializer, "codebook"),
            regularizer=self.codebook_regularizer,
            constraint=self.codebook_constraint,
            # Read in float32 under mixed precision, not autocast: codewords
            # near 1e5 do not even exist in float16.
            autocast=False,
        )
        self.scales = self.add_weight(
            name="scales",
            shape=(self.num_codewords, features if self.scale == "per_dimension" else 1),
            initializer=Constant(self.initial_scale),
            regularizer=self.scale_regularizer,
            constraint=self.scale_constraint,
            autocast=False,
        )

    @property
    def acts_per_step(self):
        """Memberships are per vector, so the layer streams frame by frame
        (see `keras_relrec.layers.streaming_layer`); a histogram is not."""
        return self.output_mode == "memberships"

    @property
    def input_dtype(self):
        # Distances need the inputs' own precision: a float16 copy of a
        # price has lost the digits that tell two codewords apart.
        return at_least_float32(self.compute_dtype)

    def call(self, inputs, mask=None):
        validation.check_mask(self, mask, inputs)
        # Masked vectors are quantized as zeros: whatever they hold never
        # reaches an output or a gradient.
        inputs = zero_masked(inputs, mask)
        logits = codeword_logits(inputs, self.codebook, self.scales, self.distance, self.epsilon)
        memberships = ops.softmax(logits, axis=-1)
        if self.output_mode == "memberships":
            return ops.cast(memberships, self.compute_dtype)
        if self.output_mode == "segment_histograms":
            return ops.cast(masked_segment_mean(memberships, mask, self.num_segments), self.compute_dtype)
        if len(memberships.shape) == 4:
            batch = ops.shape(memberships)[0]
            memberships = ops.reshape(memberships, (batch, -1, self.num_codewords))
            if mask is not None:
                mask = ops.reshape(mask, (batch, -1))
        # Averaged in float32: counts and sums of many vectors.
        return ops.cast(masked_mean(memberships, mask, axis=1), self.compute_dtype)

    def compute_mask(self, inputs, mask=None):
        return mask if self.output_mode == "memberships" else None

    def compute_output_shape(self, input_shape):
        if self.output_mode == "histogram":
            return (input_shape[0], self.num_codewords)
        if self.output_mode == "segment_histograms":
            return (input_shape[0], self.num_segments, self.num_codewords)
        return tuple(input_shape[:-1]) + (self.num_codewords,)

    def adapt(self, data, sample_size=100_000, seed=None, mask_value=None, n_init=4):
        """Sets the codebook to the k-means centres of sampled feature
        vectors (see `kmeans_codebook` for the arguments)."""
        adapt_codebook(self, data, lambda features: (None, None, features),
                       sample_size, seed, mask_value, n_init)

    def get_config(self):
        config = {
            "num_codewords": self.num_codewords,
            "scale": self.scale,
            "distance": self.distance,
            "output_mode": self.output_mode,
            "num_segments": self.num_segments,
            "initial_scale": self.initial_scale,
            "epsilon": self.epsilon,
            "codebook_initializer": keras.initializers.serialize(self.codebook_initializer),
            "codebook_regularizer": keras.regularizers.serialize(self.codebook_regularizer),
            "scale_regularizer": keras.regularizers.serialize(self.scale_regularizer),
            "codebook_constraint": keras.constraints.serialize(self.codebook_constraint),
            "scale_constraint": keras.constraints.serialize(self.scale_constraint),
        }
        return {**super().get_config(), **config}

