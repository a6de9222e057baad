"""The A, B and C networks of Tran et al. (2019), in BL and TABL form."""

import keras
import numpy as np

from keras_relrec.layers import TABL
from keras_relrec.layers import BilinearLayer
from keras_relrec.layers import SegmentMean
from keras_relrec.models.front_end import COMPRESSION
from keras_relrec.models.front_end import WINDOW_SIZE
from keras_relrec.models.front_end import kernels_default
from keras_relrec.models.front_end import local_front_end
from keras_relrec.models.front_end import resolve_front_end
from keras_relrec.models.front_end import resolve_scaling
from keras_relrec.models.front_end import scaled_inputs
from keras_relrec.models.nbof_classifiers import fit_codebook
from keras_relrec.models.nbof_classifiers import quantize
from keras_relrec.utils import validation

# Hidden layers (D', T') of each configuration; the last layer maps to
# (num_classes, 1). For FI-2010's 40 × 10 input: A = 40×10 → 3×1,
# B = → 120×5 → 3×1, C = → 60×10 → 120×5 → 3×1.
CONFIGS = {"A": (), "B": ((120, 5),), "C": ((60, 10), (120, 5))}
KINDS = ("TABL", "BL")
# With a quantizer, histograms of this many segments of the steps (fewer
# for shorter sequences) enter the first bilinear layer. On the sets of
# benchmarks/bench_ucr.py 8 did better than 16, likely because the
# bilinear layers have fewer positions to fit to few training series
# (benchmarks/RESULTS.md, "C(TABL) over 8 segments").
NUM_SEGMENTS = 8
# `num_codewords="auto"` with the kernels: each dilation's codewords, as
# NBoF's; 16 did worse on generated sets of two series a class
# (benchmarks/RESULTS.md, "Tiny training sets, continued").
NUM_CODEWORDS = 32


def tabl_network(
    config="C",
    kind="TABL",
    input_shape=(10, 40),
    num_classes=3,
    dropout=0.1,
    max_norm=None,
    data_format="channels_last",
    mask_value=None,
    normalization=None,
    scaling="auto",
    front_end="auto",
    front_end_filters=32,
    window_size=WINDOW_SIZE,
    max_steps="auto",
    front_end_compression="auto",
    num_codewords="auto",
    num_segments="auto",
    codebook_data=None,
    seed=None,
    name=None,
):
    """The paper's A, B or C network; outputs class logits.

    Tran, Iosifidis, Kanniainen and Gabbouj, "Temporal Attention-Augmented
    Bilinear Network for Financial Time-Series Data Analysis", IEEE TNNLS
    2019: hidden `BilinearLayer`s with ReLU and dropout, and a last layer to
    (num_classes × 1), a `TABL` (kind "TABL") or a `BilinearLayer` (kind
    "BL"), squeezed to (batch, num_classes). The paper puts a softmax on the
    last layer; here it is left to the loss (`from_logits=True`), which is
    the same model.

    ```
    window → [Masking] → [Normalization, or SeriesNormalization: scaling]
           → [local features: front_end]
           → [for each of S segments of the time axis: the histogram of
              each BoFQuantizer (one per dilation with the kernels), and
              the mean of the normalized window (SegmentMean)]
           → [each series' SeriesStatistics beside every step, or segment]
           → BL → ReLU → Dropout → … → TABL (or BL) to (num_classes × 1)
    ```

    The defaults choose by the input: one value per step (a raw
    univariate series) gets local histograms, the kernels with 32
    codewords per dilation (`front_end="auto"`, `num_codewords="auto"`:
    C(TABL) in `benchmarks/bench_ucr.py`); several values per step (the
    paper's order-book features) the paper's network on the steps as they
    are.

    With `num_codewords`, the bilinear layers see local histograms instead
    of the features: each front-end output is quantized by its own
    `BoFQuantizer` (`output_mode="segment_histograms"`), and the S
    segments are the steps of the first bilinear layer, each the
    histograms of its stretch of the series (which local shapes occur
    there) and the mean of its features (where the series is). On
    `benchmarks/bench_ucr.py`'s sets this is what makes C(TABL)
    generalise from raw series (`benchmarks/RESULTS.md` compares it with
    `front_end="conv"`).

    Args:
        config: `"A"`, `"B"` or `"C"` (see `CONFIGS`).
        kind: `"TABL"` or `"BL"`, the last layer.
        input_shape: One example, (T, D) with `"channels_last"` (default;
            FI-2010's 10 events × 40 features) or (D, T) with
            `"channels_first"`.
        num_classes: Number of classes; 3 for mid-price movements.
        dropout: Rate after each hidden layer; the paper's 0.1.
        max_norm: If given, a `keras.constraints.MaxNorm(max_norm)` on every
            kernel (the paper tries 3, 5 and 7).
        data_format: `"channels_last"` or `"channels_first"`.
        mask_value: Steps whose features all equal it are padding (series
            of different lengths): the front-end leaves them out of its
            windows, the first bilinear layer takes them as zeros after the
            normalization (channels_last only). Default None: every step
            is data.
        normalization: Optional `(mean, variance)` per feature, for a
            `Normalization` layer first (channels_last only); with
            `scaling="series"`, the reference of each series' level and
            scale.
        scaling: `"global"`, `"series"` or `"auto"` (default), as in
            `nbof_classifier` (`"auto"` decides on `codebook_data`, and is
            `"global"` without it); with `"series"` each series' level and
            scale (2·D numbers) join the features of every segment, or
            without a quantizer of every valid step before the front-end
            (channels_last only).
        front_end: `"auto"` (default): `"kernels"` for one feature per
            step, None for several (and with channels_first); None (the
            paper's network on the features as they are), `"conv"`,
            `"window"` or `"kernels"`: local features of each step first
            (see `local_front_end`; channels_last only), for raw series,
            where one value per step says little on its own.
        front_end_filters, window_size, max_steps, front_end_compression:
            Of the front-end (see `nbof_classifier`); the compression
            `"auto"` (default) is asinh(10 · r) with the kernels, as in
            `nbof_classifier`.
        num_codewords: None (no quantizer), K codewords of each quantizer
            (channels_last only), or `"auto"` (default): `NUM_CODEWORDS`
            (32) with the kernels, None with any other front-end.
        num_segments: S, the segments' number, with `num_codewords` only;
            `"auto"` (default) is `NUM_SEGMENTS` = 8, or the number of
            steps the front-end leaves where that is fewer. The
            histograms segment the front-end's steps and the means the
            window's: with a front-end stride s their boundaries differ by
            up to one block of s steps.
        codebook_data: Optional training sequences (an array), with
            `num_codewords` only: each codebook starts at the k-means
            centres of the vectors its quantizer sees for them (see
            `fit_codebook`).
        seed: Seed of k-means (with `codebook_data`).
        name: Model name; default e.g. `"C_TABL"`.

    Input: (T, D) windows of D features per step, T fixed (with
    `num_codewords` T may be None: the bilinear layers then map the S
    segments, whatever the length). The bilinear layers map every one of
    the T steps: series of different lengths enter padded, and with
    `mask_value` the padding enters as zeros (with a quantizer, it is in
    no histogram and no mean, and the segments after a short series' end
    are zeros). With one feature per step (a raw univariate
    series) the first W1 is D' × 1: every hidden feature is a scaled copy
    of the series, and the shape of the series is left to W2's weights per
    step alone. Raw univariate series therefore get local histograms by
    default (`front_end="auto"`: the kernels, `num_codewords="auto"`: 32;
    C(TABL) in `benchmarks/bench_ucr.py`, above 1-NN DTW on its univariate
    and its multivariate sets, and above `front_end="conv"`:
    benchmarks/RESULTS.md, "Ready-made classifiers on UCR/UEA sets", the
    columns "C(TABL)" and "C(TABL), conv"); name them for a multivariate
    raw series too.

    Returns:
        An uncompiled `keras.Model`; hidden layers are named `bl_1`, `bl_2`
        and the last layer `tabl` or `bl_out` (with `num_codewords`, the
        quantizers `quantizer` or `quantizer_1`, `quantizer_2`, …, the
        means `segment_means`, and their concatenation `segments`). Compile it with
        `compile_as_in_paper` and train with `class_weights(y)` for the
        paper's setup.
    """
    validation.check_choice("config", config, tuple(CONFIGS))
    validation.check_choice("kind", kind, KINDS)
    validation.check_positive_int("num_classes", num_classes)
    validation.check_rate("dropout", dropout)
    constraint = None
    if max_norm is not None:
        constraint = keras.constraints.MaxNorm(
            validation.check_positive_float("max_norm", max_norm)
        )
    common = dict(data_format=data_format, kernel_constraint=constraint)
    features = input_shape[-1] if data_format == "channels_last" else None
    front_end = resolve_front_end(front_end, features) if features is not None or front_end != "auto" else None
    num_codewords = resolve_num_codewords(num_codewords, front_end)
    front_end_compression = kernels_default(front_end_compression, front_end, COMPRESSION)
    auto_segments = isinstance(num_segments, str) and num_segments == "auto"
    if num_codewords is None:
        if not auto_segments:
            raise ValueError(
                f"Argument `num_segments` needs `num_codewords` (a quantizer); received "
                f"num_segments={num_segments!r} with num_codewords=None."
            )
        if codebook_data is not None:
            raise ValueError(
                "Argument `codebook_data` needs `num_codewords` (a quantizer to fit); received an "
                f"{type(codebook_data).__name__} with num_codewords=None."
            )
    else:
        validation.check_positive_int("num_codewords", num_codewords)
    if not auto_segments:
        try:
            validation.check_positive_int("num_segments", num_segments)
        except ValueError:
            raise ValueError(
                f"Argument `num_segments` must be a positive integer or 'auto'; received "
                f"num_segments={num_segments!r}."
            ) from None
    scaling = resolve_scaling(scaling, codebook_data, mask_value)
    extras = {"mask_value": mask_value, "normalization": normalization,
              "front_end": None if front_end is None else front_end.kind, "num_codewords": num_codewords,
              "scaling": None if scaling == "global" else scaling}
    given = [argument for argument, value in extras.items() if value is not None]
    if data_format != "channels_last" and given:
        raise ValueError(
            f"Argument `{given[0]}` needs data_format='channels_last'; received "
            f"data_format={data_format!r}."
        )
    # Without a quantizer each series' statistics join its steps before the
    # front-end, as features of every valid step (the mask kept); with one,
    # they join the segments.
    per_step = num_codewords is None
    inputs, sequence, statistics = scaled_inputs(input_shape, mask_value, normalization, scaling, name="window",
                                                 statistics_per_step=per_step)
    steps = sequence
    if statistics is not None and per_step:
        steps = keras.layers.Concatenate(name="steps_and_statistics")([sequence, statistics])
    # Resolved for the input's width: the statistics widen the steps.
    h = local_front_end(steps, None if front_end is None else front_end.kind, front_end_filters, window_size,
                        max_steps, split_dilations=num_codewords is not None, compression=front_end_compression)
    if num_codewords is not None:
        # An unknown length takes NUM_SEGMENTS; the dilations' outputs
        # all have the same steps.
        length = (h[0] if isinstance(h, list) else h).shape[1]
        segments = num_segments if not auto_segments else min(NUM_SEGMENTS, length or NUM_SEGMENTS)
        histograms = quantize(h, num_codewords, output_mode="segment_histograms", num_segments=segments)
        means = SegmentMean(segments, name="segment_means")(sequence)
        h = keras.layers.Concatenate(name="segments")(histograms + [means])
    if statistics is not None and not per_step:
        repeated = keras.layers.RepeatVector(h.shape[1], name="statistics_per_segment")(statistics)
        h = keras.layers.Concatenate(name="segments_and_statistics")([h, repeated])
    for k, (units, steps) in enumerate(CONFIGS[config], start=1):
        h = BilinearLayer(units, steps, activation="relu", name=f"bl_{k}", **common)(h)
        h = keras.layers.Dropout(dropout, name=f"dropout_{k}")(h)
    last = TABL if kind == "TABL" else BilinearLayer
    outputs = last(num_classes, 1, squeeze=True, name="tabl" if kind == "TABL" else "bl_out",
                   **common)(h)
    model = keras.Model(inputs, outputs, name=name or f"{config}_{kind}")
    if codebook_data is not None:
        fit_codebook(model, codebook_data, seed)
    return model


def resolve_num_codewords(num_codewords, front_end):
    """`tabl_network`'s `num_codewords`: `"auto"` is `NUM_CODEWORDS` with
    the kernels (`front_end`, a resolved `FrontEnd` or None), None
    otherwise; anything else as given (checked by the builder)."""
    return kernels_default(num_codewords, front_end, NUM_CODEWORDS)


def compile_as_in_paper(model, learning_rate=0.01):
    """Adam at the paper's 0.01 on cross-entropy from logits, with accuracy."""
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def class_weights(labels):
    """{class: N / (K · N_class)}, the class-weighted loss of the paper, for
    `fit(..., class_weight=...)`; classes absent from `labels` get none."""
    labels = np.asarray(labels)
    classes, counts = np.unique(labels, return_counts=True)
    return {int(c): float(len(labels) / (len(classes) * n)) for c, n in zip(classes, counts)}
