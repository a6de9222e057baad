"""What the sequence classifiers put before their first layer of the
family: the masked, normalized input and its local features (see
`LocalFeatures`)."""

import dataclasses
import math

import keras
import numpy as np

from keras_relrec.layers import LocalFeatures
from keras_relrec.layers import SeriesNormalization
from keras_relrec.layers import SeriesStatistics
from keras_relrec.layers.bag_of_features.local_features import kernel_dilations
from keras_relrec.ops import asinh
from keras_relrec.utils import validation
from keras_relrec.utils.dtypes import at_least_float32

FRONT_ENDS = ("conv", "window", "kernels")
# The front-end's defaults, in every builder: windows of this many steps,
# and with `max_steps="auto"` at most this many steps of local features.
# The learned and window front-ends sum up blocks of a long series; the
# kernels learn nothing, and a stride would only throw shape away, so they
# keep far more (benchmarks/RESULTS.md, "MiniRocket's kernels as the
# front-end: choosing its recipe (NBoF)").
WINDOW_SIZE = 16
MAX_STEPS = {"conv": 32, "window": 32, "kernels": 512}
# Before a recurrence every step the front-end leaves is a step of the
# loop, and at 512 steps of kernels the recurrent NBoF's fits took several
# times as long as with the learned front-end's 32. 128 is a cap for time:
# it still beat the learned front-end, though 512 did better where both ran
# (benchmarks/RESULTS.md, "A codebook per dilation, and the recurrent NBoF
# with the kernels" and "The kernels before the other builders").
RECURRENT_MAX_STEPS = {**MAX_STEPS, "kernels": 128}
# The builders' default compression of the kernels' standardized responses,
# asinh(10 · r): linear for |r| < 0.1. Chosen on ACSF1, whose rare jumps
# hid its small fluctuations; it raised NBoF's mean over bench_ucr.py's
# sets though it lost on some (benchmarks/RESULTS.md, "Compressed kernel
# responses, and C(TABL) over local histograms").
COMPRESSION = 10.0
SCALINGS = ("global", "series")
# `scaling="auto"` scales each series by itself where the training series'
# standard deviations spread over more than this ratio (their 90th
# percentile to their 10th, in any feature): one mean and variance leave
# the smaller ones nearly flat. Chosen on generated sets of shapes at
# amplitudes over one to four decades (`benchmarks/bench_ucr.py`'s
# "ScaledShapes 1e1, tune" …; benchmarks/RESULTS.md, "Scaling each series
# by itself"): NBoF scaled globally lost 12 points or more from a spread of
# 40 on, and under 3 at 6.3, where both were near the top.
SERIES_SCALE_SPREAD = 10.0


@dataclasses.dataclass(frozen=True)
class FrontEnd:
    """A builder's `front_end` argument, resolved once for an input of
    `features` values per step (`resolve_front_end`); builders, the
    recipes and `local_front_end` take it in place of the argument.

    Attributes:
        named: The argument as given: `"conv"`, `"window"`, `"kernels"`,
            None or `"auto"` (anything else is kept, for `local_front_end`
            to refuse).
        kind: What it stands for: `named`, or for `"auto"` `"kernels"`
            (one feature per step) or None (several: the raw steps).
        features: The input's values per step; None where unknown.
    """

    named: object
    kind: object
    features: object

    @property
    def label(self):
        """The front-end as an error message names it: what the caller
        gave, and for `"auto"` what it stands for."""
        if self.kind == self.named:
            return repr(self.named)
        return f"'auto' ({self.kind!r} for {self.features} features per step)"

    def max_steps(self, caps=MAX_STEPS):
        """`max_steps="auto"` for this front-end by `caps` (a cap per
        kind): its cap, or None for a kind without one (the raw steps)."""
        return caps.get(self.kind) if isinstance(self.kind, str) else None


def front_end_strides(steps, max_steps):
    """s = ⌈steps / max_steps⌉: the stride that leaves at most `max_steps`
    steps; 1 for sequences of unknown length."""
    if steps is None or max_steps is None:
        return 1
    return max(1, math.ceil(steps / max_steps))


def resolve_front_end(front_end, features):
    """The `FrontEnd` a `front_end` argument names for an input of
    `features` values per step; the one place where `"auto"` is decided.

    `"auto"` is `"kernels"` for one value per step (a univariate series,
    whose single value per step says nothing of its shape) and None (the
    raw steps) for several, where each step already is a vector for the
    layer after it: on the multivariate sets of `benchmarks/bench_ucr.py`
    the recurrent NBoF did better on the raw steps, and trained several
    times faster (benchmarks/RESULTS.md, "The recurrent NBoF on the raw
    steps of multivariate series"). Any other argument stands for itself.
    A `FrontEnd` already resolved for `features` is returned as it is
    (one for another width is resolved again from what it names).

    Args:
        front_end: `"conv"`, `"window"`, `"kernels"`, None, `"auto"`, or a
            `FrontEnd`.
        features: The input's values per step, None where unknown.

    Returns:
        A `FrontEnd`.

    Raises:
        ValueError: `"auto"` with `features` None.
    """
    if isinstance(front_end, FrontEnd):
        if front_end.features == features:
            return front_end
        front_end = front_end.named
    if not (isinstance(front_end, str) and front_end == "auto"):
        return FrontEnd(front_end, front_end, features)
    if features is None:
        raise ValueError(
            "Argument `front_end='auto'` chooses by the number of features per step, which must be known; "
            "received an input whose last dimension is None."
        )
    return FrontEnd(front_end, "kernels" if features == 1 else None, features)


def kernels_default(value, front_end, default):
    """A builder argument that is `"auto"`: `default` with the kernels
    (`front_end` a resolved `FrontEnd`, or None for none) and None with
    any other front-end; any other `value` stands for itself (the builder
    checks it)."""
    if not (isinstance(value, str) and value == "auto"):
        return value
    return default if front_end is not None and front_end.kind == "kernels" else None


def check_mask_value(mask_value):
    """A builder's `mask_value`: None, or the number that fills a padded
    step's features (NaN would match no step)."""
    if mask_value is not None:
        try:
            validation.check_float("mask_value", mask_value)
        except ValueError:
            raise ValueError(
                "Argument `mask_value` must be None or a number, the value that fills every feature of a padded "
                f"step; received mask_value={mask_value!r}."
            ) from None
    return mask_value


def valid_steps(x, mask_value=None):
    """Boolean (..., steps): the steps of `x` (..., steps, features) that are
    not padding, i.e. not all `mask_value`, as `Masking(mask_value)` sees
    them; every step when `mask_value` is None."""
    check_mask_value(mask_value)
    x = np.asarray(x)
    if mask_value is None:
        return np.ones(x.shape[:-1], bool)
    # In x's dtype, as Masking compares: 0.1 in float32 is not 0.1.
    padding = np.asarray(mask_value).astype(x.dtype) if np.issubdtype(x.dtype, np.floating) else mask_value
    return ~np.all(x == padding, axis=-1)


def scale_spread(x, mask_value=None):
    """The largest ratio, over the features of `x` (examples, steps,
    features), of the 90th to the 10th percentile of the series' standard
    deviations (valid steps only); what `choose_scaling` compares with
    `SERIES_SCALE_SPREAD`. 1 for fewer than two series."""
    valid = valid_steps(x, mask_value)
    x = np.asarray(x, np.float64)
    counts = np.maximum(valid.sum(axis=1), 1)[:, None]
    mean = np.where(valid[..., None], x, 0).sum(axis=1) / counts
    deviations = np.where(valid[..., None], x - mean[:, None], 0)
    scales = np.sqrt((deviations**2).sum(axis=1) / counts)[valid.any(axis=1)]
    if len(scales) < 2:
        return 1.0
    low, high = np.percentile(scales, [10, 90], axis=0)
    # A feature flat in a tenth of the series or more spreads without bound.
    return float(np.max(np.where(low > 0, high / np.where(low > 0, low, 1), np.where(high > 0, np.inf, 1))))


def choose_scaling(x, mask_value=None):
    """`scaling="auto"` for training sequences `x`: `"series"` where their
    scales spread over more than `SERIES_SCALE_SPREAD` (`scale_spread`),
    `"global"` otherwise."""
    return "series" if scale_spread(x, mask_value) > SERIES_SCALE_SPREAD else "global"


def resolve_scaling(scaling, data=None, mask_value=None):
    """A builder's `scaling` argument, checked: `"global"` or `"series"` as
    given; `"auto"` chosen from `data` (the training sequences,
    `choose_scaling`), or `"global"` without data."""
    validation.check_choice("scaling", scaling, SCALINGS + ("auto",))
    if scaling != "auto":
        return scaling
    return "global" if data is None else choose_scaling(data, mask_value)


def scaled_inputs(input_shape, mask_value=None, normalization=None, scaling="global", name="sequence", suffix="",
                  statistics_per_step=False):
    """The input of a sequence classifier, scaled: `(inputs, h, statistics)`.

    ```
    "global": inputs → [Masking] → [Normalization(mean, variance)]          = h
    "series": inputs → [Masking] → SeriesNormalization                      = h
                               └→ SeriesStatistics(mean, variance)  = statistics
    ```

    `Masking(mask_value)` makes padded steps zeros and masks them; the
    `(mean, variance)` per feature of `normalization` (the valid training
    steps') standardize every step alike (`"global"`), or are the reference
    of each series' level and scale (`"series"`: each series standardized
    by itself, its level and scale in decades as 2·D features for the
    head; 0 and 1 without `normalization`; with `statistics_per_step`,
    repeated at every step with the sequence's mask, for a model that
    reads steps). Each part is left out where its argument is None;
    `statistics` is None with `"global"`. The layers are named
    `normalization`, `series_normalization` and `series_statistics`, each
    followed by `suffix`, and with a suffix the masking `masking{suffix}`
    (a model of several inputs names each input's apart).
    """
    validation.check_choice("scaling", scaling, SCALINGS)
    check_mask_value(mask_value)
    inputs = keras.Input(input_shape, name=name)
    h = inputs
    if mask_value is not None:
        # Under mixed precision the statistics are float32: the masking
        # before them must not round the series to float16 first.
        dtype = at_least_float32(keras.config.dtype_policy().compute_dtype) if scaling == "series" else None
        h = keras.layers.Masking(mask_value, name=f"masking{suffix}" if suffix else None, dtype=dtype)(inputs)
    if scaling == "series":
        mean, variance = (0.0, 1.0) if normalization is None else normalization
        statistics = SeriesStatistics(np.asarray(mean).tolist(), np.asarray(variance).tolist(),
                                      per_step=statistics_per_step, name=f"series_statistics{suffix}")(h)
        return inputs, SeriesNormalization(name=f"series_normalization{suffix}")(h), statistics
    if normalization is not None:
        mean, variance = normalization
        h = keras.layers.Normalization(mean=mean, variance=variance, name=f"normalization{suffix}")(h)
    return inputs, h, None


def sequence_inputs(input_shape, mask_value=None, normalization=None, name="sequence"):
    """The input of a sequence classifier: `(inputs, h)`, h the input behind
    `Masking(mask_value)` (padded steps become zeros and are masked) and a
    `Normalization` with the given `(mean, variance)` per feature, each
    left out when None (`scaled_inputs` with `"global"` scaling)."""
    inputs, h, _ = scaled_inputs(input_shape, mask_value, normalization, "global", name)
    return inputs, h


def local_front_end(sequence, front_end="conv", filters=32, window_size=WINDOW_SIZE, max_steps="auto",
                    name="front_end", split_dilations=False, compression=None):
    """Local features of every step, for a layer that should see the shape
    of a series rather than its samples one by one.

    ```
    "conv":    LocalFeatures(conv, w, stride s) → BatchNorm → ReLU
               → LocalFeatures(conv, ⌈w/2⌉)   → BatchNorm → ReLU    (filters wide)
    "window":  LocalFeatures(window, w, stride s)                    (w·D wide)
    "kernels": LocalFeatures(kernels, max(w, steps), stride s)
               → BatchNorm (each response standardized; no weights learned)
               → [asinh(c · r) of each standardized response r]
    None:      the sequence as it is
    ```

    With `split_dilations=True` and more than one dilation, `"kernels"`
    gives a list instead: for each dilation d its own
    `LocalFeatures(kernels, dilations=(d,))` and BatchNorm (`{name}_d{d}`,
    `{name}_norm_d{d}`), the same responses apart, for a model that
    quantizes each dilation by itself (NBoF: a codebook each; the recurrent
    NBoF: a sequence each through one recurrent quantizer).

    s = ⌈steps / max_steps⌉ (1 for an unknown length): a long series is
    shortened to at most `max_steps` steps, each summing up its block of s
    steps and the w − s before it (w is raised to s if smaller). Masks pass
    through (an output is valid where a step of its block is).
    `max_steps="auto"` is 32 for `"conv"` and `"window"`, 512 for
    `"kernels"` (`MAX_STEPS`, measured for NBoF; `recurrent_nbof_classifier`
    resolves "auto" by `RECURRENT_MAX_STEPS`, 128 for `"kernels"`, since
    the steps left are its recurrence's).

    An output of the second convolution reaches back over
    w + (⌈w/2⌉ − 1)·s steps: with the defaults (w = 16, at most 32 steps
    out) a quarter of a long series or more, so that a quantizer sees parts
    of the shape rather than local slopes. The defaults were chosen on
    three sets of `benchmarks/bench_ucr.py` (ArrowHead, OSULeaf,
    PickupGestureWiimoteZ; w = 8 and 128 steps did worse there:
    benchmarks/RESULTS.md, "The learned front-end's defaults and recipe").

    `"kernels"` gives the quantizer MiniRocket's fixed kernels, each
    feature alone, at dilations reaching across the whole series (window
    max(w, steps); w alone for sequences of unknown length). It learns
    nothing before the quantizer, so it suits small training sets; its
    width is 84·D per dilation, and a quantizer over it costs several
    times the `"conv"` front-end's. It is NBoF's default, and the
    recurrent NBoF's and C(TABL)'s for one feature per step;
    `benchmarks/RESULTS.md` compares it with `"conv"` on the sets of
    `bench_ucr.py`.

    `compression=c` (kernels only) passes each standardized response r
    through asinh(c · r): linear for |r| < 1/c, logarithmic beyond. Where
    a series is flat but for a few jumps (ACSF1's power readings), the
    jumps set the responses' variance and the quantizer would see every
    other step as one point near 0; compressed, the small fluctuations
    keep their differences and the jumps their sign. c = 10 is every
    builder's default with the kernels (`COMPRESSION`): it lifted ACSF1 most and NBoF's mean over the
    sets of `benchmarks/bench_ucr.py` (benchmarks/RESULTS.md, "Compressed
    kernel responses, and C(TABL) over local histograms").
    The codebooks are set (`fit_codebook`) before training, when the
    BatchNorm still has its initial statistics (mean 0, variance 1): they
    are k-means of asinh(c · response) of the unstandardized responses,
    as the uncompressed ones are of the responses themselves.

    Args:
        sequence: A (batch, steps, features) Keras tensor, with its mask.
        front_end: `"conv"` (default), `"window"`, `"kernels"`, None, or
            `"auto"`: `"kernels"` for one feature per step, None for
            several; or a `FrontEnd` a builder resolved
            (`resolve_front_end`). The builders' defaults are their own.
        filters: Width of the convolutions.
        window_size: w of the first `LocalFeatures`.
        max_steps: At most this many steps come out; `"auto"` (default)
            the front-end's `MAX_STEPS`; None keeps them all. A number is
            refused without a front-end (None, or "auto" for several
            features per step).
        name: Prefix of the layers' names.
        split_dilations: With `"kernels"`, one output per dilation (the
            other front-ends, and the kernels at one dilation, have one
            output whatever it says).
        compression: None (default), or c > 0 for asinh(c · r) of the
            kernels' standardized responses (`Rescaling(c)` then
            `Activation(asinh)`, `{name}_scale`, `{name}_asinh` with
            `_d{d}` per dilation); refused with another front-end.

    Returns:
        The front-end's output, a (batch, steps', width) Keras tensor; with
        `split_dilations` and `"kernels"` at more than one dilation, a list
        of them, one per dilation d = 1, 2, 4, … (width 84·D each).
    """
    auto = isinstance(max_steps, str) and max_steps == "auto"
    if not auto and max_steps is not None:
        try:
            validation.check_positive_int("max_steps", max_steps)
        except ValueError:
            raise ValueError(
                f"Argument `max_steps` must be a positive integer, 'auto' or None; received "
                f"max_steps={max_steps!r}."
            ) from None
    validation.check_bool("split_dilations", split_dilations)
    resolved = resolve_front_end(front_end, sequence.shape[-1])
    validation.check_choice("front_end", resolved.named, FRONT_ENDS + ("auto", None))
    label, front_end = resolved.label, resolved.kind
    if compression is not None:
        try:
            if front_end != "kernels":
                raise ValueError
            compression = validation.check_positive_float("compression", compression)
        except ValueError:
            # The builders' argument is `front_end_compression`.
            raise ValueError(
                f"Argument `compression` (`front_end_compression` of a builder) must be None, or a positive "
                f"finite number with front_end='kernels' (it compresses the kernels' responses); received "
                f"compression={compression!r} with front_end={label}."
            ) from None
    if front_end is None:
        # The raw steps are kept: a length asked for would go unheeded.
        if not auto and max_steps is not None:
            raise ValueError(
                f"Argument `max_steps` needs a front-end to shorten the sequence; received "
                f"max_steps={max_steps!r} with front_end={label}."
            )
        return sequence
    validation.check_positive_int("window_size", window_size)
    if auto:
        max_steps = resolved.max_steps()
    strides = front_end_strides(sequence.shape[1], max_steps)
    window_size = max(window_size, strides)
    if front_end == "window":
        return LocalFeatures("window", window_size, strides=strides, name=name)(sequence)
    if front_end == "kernels":
        window = max(window_size, sequence.shape[1] or 0)

        def standardized(dilations, suffix):
            h = LocalFeatures("kernels", window, strides=strides, dilations=dilations, name=f"{name}{suffix}")(
                sequence)
            h = keras.layers.BatchNormalization(center=False, scale=False, name=f"{name}_norm{suffix}")(h)
            if compression is None:
                return h
            h = keras.layers.Rescaling(compression, name=f"{name}_scale{suffix}")(h)
            return keras.layers.Activation(asinh, name=f"{name}_asinh{suffix}")(h)

        if not split_dilations or len(kernel_dilations(window)) == 1:
            return standardized(None, "")
        return [standardized((d,), f"_d{d}") for d in kernel_dilations(window)]
    validation.check_positive_int("filters", filters)
    h = sequence
    for k, (window, stride) in enumerate(((window_size, strides), (-(-window_size // 2), 1)), start=1):
        h = LocalFeatures("conv", window, filters, strides=stride, activation=None, name=f"{name}_{k}")(h)
        h = keras.layers.BatchNormalization(name=f"{name}_norm_{k}")(h)
        h = keras.layers.Activation("relu", name=f"{name}_relu_{k}")(h)
    return h
