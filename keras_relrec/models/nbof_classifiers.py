"""Sequence classifiers of the neural bag-of-features family."""

import keras
import numpy as np

from keras_relrec.layers import BoFQuantizer
from keras_relrec.layers import LocalFeatures
from keras_relrec.layers import RecurrentBoFCell
from keras_relrec.layers import TwoDAttention
from keras_relrec.models.front_end import COMPRESSION
from keras_relrec.models.front_end import RECURRENT_MAX_STEPS
from keras_relrec.models.front_end import WINDOW_SIZE
from keras_relrec.models.front_end import kernels_default
from keras_relrec.models.front_end import local_front_end
from keras_relrec.models.front_end import resolve_front_end
from keras_relrec.models.front_end import resolve_scaling
from keras_relrec.models.front_end import scaled_inputs
from keras_relrec.models.front_end import valid_steps
from keras_relrec.utils import validation

ATTENTIONS = ("input", "codeword", "temporal")


def nbof_classifier(
    input_shape,
    num_classes,
    num_codewords,
    attention=(),
    scale="per_dimension",
    mask_value=0.0,
    normalization=None,
    scaling="auto",
    front_end="kernels",
    front_end_filters=32,
    window_size=WINDOW_SIZE,
    max_steps="auto",
    codebook_per_dilation=None,
    temporal_rank=8,
    hidden_units=64,
    dropout=0.2,
    codebook_data=None,
    seed=None,
    front_end_compression="auto",
    name=None,
):
    """NBoF, or attention NBoF, for (steps, features) sequences; outputs logits.

    ```
    sequence → [Masking] → [Normalization, or SeriesNormalization: scaling]
             → [input attention]
             → [local features: front_end; with "kernels",
                asinh(10 · r) of each response r by default:
                front_end_compression]
             → BoFQuantizer (memberships Φ; with the kernels one per
               dilation, Φ = [Φ_1, Φ_2, Φ_4, …] side by side)
             → [codeword attention] → [temporal attention]
             → histogram (mean over the valid steps) [, SeriesStatistics]
             → Dense(ReLU) → Dropout → Dense(num_classes)
    ```

    The attentions are `TwoDAttention` layers (Tran et al., IEEE Access
    2022): input attention over the features of each step, codeword
    attention over the codewords of each step, temporal attention over the
    steps (which needs a fixed number of steps).

    Input: a series of one value per step (univariate, features = 1) or of
    several (multivariate), padded at the end with `mask_value` where the
    lengths differ. The quantizer histograms the vectors it sees; fed one
    value per step it could only count amplitudes and would lose the shape
    of the series. The default front-end (`local_front_end`) therefore
    gives it the responses of MiniRocket's fixed kernels at every step,
    for univariate and multivariate series alike (on the univariate sets of
    `benchmarks/bench_ucr.py` it beat the learned `"conv"` front-end by
    far, and on the two multivariate ones it was a little behind:
    benchmarks/RESULTS.md, "Ready-made classifiers on UCR/UEA sets", the
    columns "NBoF" and "NBoF, conv"); each response is compressed to
    asinh(10 · r), so that small fluctuations count beside large jumps
    (`front_end_compression`);
    `front_end=None` quantizes the raw steps (the paper's
    setting, for features that already describe a step, e.g. speech frames
    or order-book levels).

    Args:
        input_shape: (steps, features) of one example; steps may be `None`
            without temporal attention.
        num_classes: Number of classes.
        num_codewords: Codewords K of the quantizer.
        attention: Any of `"input"`, `"codeword"`, `"temporal"`.
        scale: The quantizer's scaling, `"per_dimension"` (default) or
            `"per_codeword"` (see `BoFQuantizer`).
        mask_value: Steps whose features all equal it are padding (a
            `Masking` layer); `None` for no mask.
        normalization: Optional `(mean, variance)` per feature, for a
            `Normalization` layer after the masking (statistics of the
            valid training steps); with `scaling="series"`, the reference
            of each series' level and scale.
        scaling: `"global"`: every step standardized by `normalization`;
            `"series"`: each series standardized by its own mean and scale
            (`SeriesNormalization`), which are given to the head as
            features (`SeriesStatistics`), for sets whose amplitudes spread
            over orders of magnitude; `"auto"` (default): `"series"` where
            the series of `codebook_data` spread their scales over more
            than `SERIES_SCALE_SPREAD` (`choose_scaling`), else (and
            without `codebook_data`) `"global"`. See `scaled_inputs`.
        front_end: `"kernels"` (default, MiniRocket's fixed dilated
            kernels), `"conv"` (learned), `"window"` (raw sub-sequences),
            None (the raw steps), or `"auto"`: the kernels for one
            feature per step, the raw steps for several
            (`resolve_front_end`; a `FrontEnd` it gave is taken as it
            is); see `local_front_end`. The kernels'
            dilations reach across the `steps` of `input_shape`; with
            steps None they reach over `window_size` steps only, so give
            the padded length where you can.
        front_end_filters: Width of the `"conv"` front-end.
        window_size: Window of the `"conv"` and `"window"` front-ends,
            and the kernels' shortest reach.
        max_steps: The front-end's stride shortens longer series to at most
            this many steps; `"auto"` (default): 32, or 512 for
            `"kernels"`; None keeps every step.
        codebook_per_dilation: With `"kernels"` (the other front-ends
            have no dilations), whether each dilation's responses get a
            quantizer and codebook of `num_codewords` of their own (the
            histogram has K·|dilations| bins, for as many distances as
            one codebook over all of them), or one quantizer sees them
            all. Default None: per dilation with `"kernels"` (codeword
            attention then weighs every dilation's codewords together,
            (K·|dilations|)² weights; with both, the attention NBoF
            did better on two training series a class: benchmarks/RESULTS.md,
            "Tiny training sets, continued"); True with another front-end
            is refused.
        temporal_rank: Rank r of the temporal attention's W = 1/L + U Vᵀ
            (2·L·r weights, default 8); None for the paper's full L × L W,
            whose weights grow with the square of the steps L.
        hidden_units, dropout: The classifier head.
        codebook_data: Optional training sequences (an array): each
            quantizer's codebook is set by k-means on the feature vectors
            it sees for them (after the input attention, if any), skipping
            padding (`fit_codebook`, which also does it later on a built
            model).
        seed: Seed of the dropout and of k-means.
        front_end_compression: None, or c > 0: with `"kernels"`, each
            standardized response r becomes asinh(c · r) before the
            quantizer (see `local_front_end`). Default `"auto"`:
            `COMPRESSION` (10) with `"kernels"`, None otherwise
            (`benchmarks/RESULTS.md` measures NBoF with c = 10 against
            none).
        name: Model name; default `"nbof"` or `"attention_nbof"`.

    Returns:
        An uncompiled `keras.Model`; its layers are named `quantizer`
        (with a codebook per dilation and more than one dilation,
        `quantizer_1`, `quantizer_2`, … in the order of the dilations, and
        `memberships` joining them), `input_attention`,
        `codeword_attention`, `temporal_attention`, `histogram`.
    """
    attention = () if attention is None else attention
    if isinstance(attention, str) or set(attention) - set(ATTENTIONS):
        raise ValueError(
            f"Argument `attention` must be a collection of {ATTENTIONS}; received "
            f"attention={attention!r}."
        )
    _check_head(num_classes, hidden_units, dropout)
    inputs, h, statistics = scaled_inputs(input_shape, mask_value, normalization,
                                          resolve_scaling(scaling, codebook_data, mask_value))
    # "auto" by the input's width, once: local_front_end takes it resolved.
    front_end = resolve_front_end(front_end, h.shape[-1])
    front_end_compression = kernels_default(front_end_compression, front_end, COMPRESSION)
    codebook_per_dilation = _per_dilation("codebook_per_dilation", codebook_per_dilation, front_end)
    if "input" in attention:
        h = TwoDAttention(axis=2, name="input_attention")(h)
    parts = local_front_end(h, front_end, front_end_filters, window_size, max_steps,
                            split_dilations=codebook_per_dilation, compression=front_end_compression)
    phi = quantize(parts, num_codewords, scale=scale)
    phi = phi[0] if len(phi) == 1 else keras.layers.Concatenate(name="memberships")(phi)
    if "codeword" in attention:
        phi = TwoDAttention(axis=2, name="codeword_attention")(phi)
    if "temporal" in attention:
        phi = TwoDAttention(axis=1, rank=temporal_rank, name="temporal_attention")(phi)
    histogram = keras.layers.GlobalAveragePooling1D(name="histogram")(phi)
    outputs = _head(histogram, statistics, num_classes, hidden_units, dropout, seed)
    model = keras.Model(inputs, outputs, name=name or ("attention_nbof" if attention else "nbof"))
    if codebook_data is not None:
        fit_codebook(model, codebook_data, seed)
    return model


def recurrent_nbof_classifier(
    input_shape,
    num_classes,
    num_codewords,
    mask_value=0.0,
    normalization=None,
    scaling="auto",
    front_end="auto",
    front_end_filters=32,
    window_size=WINDOW_SIZE,
    max_steps="auto",
    hidden_units=64,
    dropout=0.2,
    codebook_data=None,
    seed=None,
    front_end_compression="auto",
    split_dilations=None,
    bidirectional=None,
    name="recurrent_nbof",
):
    """Recurrent NBoF: `RecurrentBoFCell` histograms s_j averaged over the
    valid steps, then the same head as `nbof_classifier`.

    ```
    sequence → [Masking] → [Normalization, or SeriesNormalization: scaling]
             → [local features: front_end]
             → RNN(RecurrentBoFCell; with the kernels, each dilation's
               responses a sequence of their own: groups)
               [and a second one over the steps backwards: bidirectional]
             → mean over the valid steps [, SeriesStatistics] → head
    ```

    Input: as `nbof_classifier`, whose reasons for a front-end hold here
    too for one value per step. The default, `front_end="auto"`
    (`resolve_front_end`), gives a univariate series MiniRocket's kernels
    and a multivariate one its raw steps: a vector of several values
    already describes a step. On the multivariate sets of
    `benchmarks/bench_ucr.py` the raw steps did better than the kernels and
    trained several times faster (benchmarks/RESULTS.md, "The recurrent
    NBoF on the raw steps of multivariate series"). On long series the kernels' stride also
    shortens the recurrence (at most `max_steps` steps), which is what
    keeps it trainable (`bench_ucr.py` measures it against the raw
    steps); a long multivariate series may want `front_end="kernels"` or
    `"conv"` for the same reason.

    Args: as `nbof_classifier` without `attention`, `temporal_rank`
    and `codebook_per_dilation`, except that `front_end` defaults to `"auto"` (above),
    `max_steps="auto"` is 128 with
    `"kernels"` (`RECURRENT_MAX_STEPS`; 32 with `"conv"` and `"window"`):
    every step left is a step of the recurrence, and at 512 it trained
    several times slower than with `"conv"` (`RECURRENT_MAX_STEPS` says
    where what 128 costs is measured). `front_end_compression="auto"`
    compresses the kernels' responses as `nbof_classifier` does (it
    lifted the recurrent NBoF on two training series a class:
    benchmarks/RESULTS.md, "Tiny training sets, continued"); the raw steps
    "auto" gives several features per step are not compressed.
    `split_dilations`: with `"kernels"`, whether the one recurrent
    quantizer reads each dilation's responses as a sequence of its own
    (`RecurrentBoFCell(groups=…)`: one codebook and one set of gates, a
    state and a histogram of K per dilation) rather than all of them as one
    vector (K in all). Default None: per dilation with `"kernels"` (on two
    training series a class it did better, and trained faster, the
    vectors being narrower: benchmarks/RESULTS.md, "Tiny training sets,
    the recurrent NBoF"); True with another front-end is refused.
    `bidirectional`: whether a second recurrent quantizer, weights of its
    own, reads the steps backwards, its histogram beside the first's
    (`keras.layers.Bidirectional`; the model then needs the whole series,
    as the mean over the steps does anyway). Default None: with
    `"kernels"` (on two training series a class it lifted the recurrent
    NBoF most, same section), not on the raw steps, where it was not
    measured. The recurrent quantizer's layer is named
    `recurrent_quantizer` (with `bidirectional`, a `Bidirectional` whose
    halves are `forward_recurrent_quantizer` and
    `backward_recurrent_quantizer`).
    """
    _check_head(num_classes, hidden_units, dropout)
    inputs, h, statistics = scaled_inputs(input_shape, mask_value, normalization,
                                          resolve_scaling(scaling, codebook_data, mask_value))
    # "auto" by the input's width, once: local_front_end takes it resolved
    # (and refuses what is no front-end).
    front_end = resolve_front_end(front_end, h.shape[-1])
    if isinstance(max_steps, str) and max_steps == "auto" and front_end.max_steps(RECURRENT_MAX_STEPS) is not None:
        max_steps = front_end.max_steps(RECURRENT_MAX_STEPS)
    split_dilations = _per_dilation("split_dilations", split_dilations, front_end)
    if bidirectional is None:
        bidirectional = front_end.kind == "kernels"
    validation.check_bool("bidirectional", bidirectional)
    parts = local_front_end(h, front_end, front_end_filters, window_size, max_steps,
                            split_dilations=split_dilations,
                            compression=kernels_default(front_end_compression, front_end, COMPRESSION))
    groups = len(parts) if isinstance(parts, list) else 1
    h = keras.layers.Concatenate(name="dilations")(parts) if groups > 1 else parts
    recurrence = keras.layers.RNN(RecurrentBoFCell(num_codewords, groups=groups), return_sequences=True,
                                  name="recurrent_quantizer")
    if bidirectional:
        recurrence = keras.layers.Bidirectional(recurrence, name="recurrent_quantizer")
    states = recurrence(h)
    histogram = keras.layers.GlobalAveragePooling1D(name="histogram")(states)
    outputs = _head(histogram, statistics, num_classes, hidden_units, dropout, seed)
    model = keras.Model(inputs, outputs, name=name)
    if codebook_data is not None:
        fit_codebook(model, codebook_data, seed)
    return model


def quantize(parts, num_codewords, **kwargs):
    """One `BoFQuantizer(num_codewords, **kwargs)` for each front-end output
    in `parts` (a tensor, or a list of them, one per dilation): their
    outputs, a list. The layers are named `quantizer`, or `quantizer_1`,
    `quantizer_2`, … where there are several."""
    parts = parts if isinstance(parts, list) else [parts]
    return [BoFQuantizer(num_codewords, name="quantizer" if len(parts) == 1 else f"quantizer_{k}", **kwargs)(part)
            for k, part in enumerate(parts, start=1)]


def _per_dilation(name, value, front_end):
    """A builder's per-dilation switch `name`, resolved: None is True with
    the kernels (a resolved `FrontEnd`), False otherwise."""
    if value is None:
        return front_end.kind == "kernels"
    validation.check_bool(name, value)
    if value and front_end.kind != "kernels":
        raise ValueError(
            f"Argument `{name}` must be False or None with front_end={front_end.label} (only the kernels "
            f"have dilations); received {name}={value!r}."
        )
    return value


def _check_head(num_classes, hidden_units, dropout):
    validation.check_positive_int("num_classes", num_classes)
    validation.check_positive_int("hidden_units", hidden_units)
    validation.check_rate("dropout", dropout)


def fit_codebook(model, data, seed=None):
    """Sets each codebook of an `nbof_classifier`, a
    `recurrent_nbof_classifier` or a `tabl_network` with `num_codewords` to
    the k-means centres of the vectors its quantizer sees for `data` (after
    the layers before it), padded steps left out.

    Args:
        model: A model from one of these builders.
        data: Training sequences, an array (examples, steps, features).
        seed: Seed of k-means.
    """
    if not hasattr(data, "shape"):
        raise ValueError(
            "Argument `codebook_data` must be an array of training sequences "
            f"(examples, steps, features); received {type(data).__name__}."
        )
    quantizers = [layer for layer in model.layers if isinstance(layer, BoFQuantizer) or _bof_cells(layer)]
    # `layer.input` is a tuple of the call's tensors; the features come first.
    seen = keras.Model(model.inputs, [keras.tree.flatten(q.input)[0] for q in quantizers]).predict(data, verbose=0)
    seen = keras.tree.flatten(seen)
    valid = valid_steps(data)
    for masking in (m for m in model.layers if isinstance(m, keras.layers.Masking)):
        valid = valid_steps(data, masking.mask_value)
    # A front-end's stride shortens the sequence, and its mask with it: its
    # first layer strides (a codebook per dilation has one such layer per
    # dilation, side by side, all with the same stride).
    steps = seen[0].shape[1]
    for front in (m for m in model.layers if isinstance(m, LocalFeatures)):
        if valid.shape[1] > steps:
            valid = np.asarray(front.compute_mask(None, valid))
    for layer, vectors in zip(quantizers, seen):
        first, *others = _bof_cells(layer) or [layer]
        first.adapt(vectors[valid], seed=seed)
        # A Bidirectional's second half sees the same vectors.
        for other in others:
            other.codebook.assign(first.codebook)


def _bof_cells(layer):
    """The `RecurrentBoFCell`s `layer` runs: an RNN's cell, or both halves'
    of a `Bidirectional`."""
    halves = [layer.forward_layer, layer.backward_layer] if isinstance(layer, keras.layers.Bidirectional) else [layer]
    return [half.cell for half in halves if isinstance(getattr(half, "cell", None), RecurrentBoFCell)]


def _head(histogram, statistics, num_classes, hidden_units, dropout, seed):
    """The classifier over the histogram, and each series' level and scale
    (`SeriesStatistics`) beside it where the series were scaled one by one."""
    if statistics is not None:
        histogram = keras.layers.Concatenate(name="histogram_and_statistics")([histogram, statistics])
    h = keras.layers.Dense(hidden_units, activation="relu", name="hidden")(histogram)
    h = keras.layers.Dropout(dropout, seed=seed, name="dropout")(h)
    return keras.layers.Dense(num_classes, name="logits")(h)
