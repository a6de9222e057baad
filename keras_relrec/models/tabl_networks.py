"""The A, B and C networks of Tran et al. (2019), in BL and TABL form."""

import keras
import numpy as np

from keras_relrec.layers import TABL
from keras_relrec.layers import BilinearLayer
from keras_relrec.models.front_end import WINDOW_SIZE
from keras_relrec.models.front_end import local_front_end
from keras_relrec.models.front_end import sequence_inputs
from keras_relrec.utils import validation

# Hidden layers (D', T') of each configuration; the last layer maps to
# (num_classes, 1). For FI-2010's 40 × 10 input: A = 40×10 → 3×1,
# B = → 120×5 → 3×1, C = → 60×10 → 120×5 → 3×1.
CONFIGS = {"A": (), "B": ((120, 5),), "C": ((60, 10), (120, 5))}
KINDS = ("TABL", "BL")


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
    front_end=None,
    front_end_filters=32,
    window_size=WINDOW_SIZE,
    max_steps="auto",
    front_end_compression=None,
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
            `Normalization` layer first (channels_last only).
        front_end: None (default, the paper's network on the features as
            they are), `"conv"`, `"window"` or `"kernels"`: local features
            of each step first (see `local_front_end`; channels_last
            only), for raw series, where one value per step says little on
            its own.
        front_end_filters, window_size, max_steps, front_end_compression:
            Of the front-end (see `nbof_classifier`); the compression
            defaults to None here (none).
        name: Model name; default e.g. `"C_TABL"`.

    Input: (T, D) windows of D features per step, T fixed. The bilinear
    layers map every one of the T steps: series of different lengths
    enter padded, and with `mask_value` the padding enters as zeros. With
    one feature per step (a raw univariate series) the first W1 is D' × 1:
    every hidden feature is a scaled copy of the series, and the shape of
    the series is left to W2's weights per step alone, so give raw series
    `front_end="conv"` (as `benchmarks/bench_ucr.py` does).

    Returns:
        An uncompiled `keras.Model`; hidden layers are named `bl_1`, `bl_2`
        and the last layer `tabl` or `bl_out`. Compile it with
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
    extras = {"mask_value": mask_value, "normalization": normalization, "front_end": front_end}
    given = [argument for argument, value in extras.items() if value is not None]
    if data_format != "channels_last" and given:
        raise ValueError(
            f"Argument `{given[0]}` needs data_format='channels_last'; received "
            f"data_format={data_format!r}."
        )
    inputs, h = sequence_inputs(input_shape, mask_value, normalization, name="window")
    h = local_front_end(h, front_end, front_end_filters, window_size, max_steps,
                        compression=front_end_compression)
    for k, (units, steps) in enumerate(CONFIGS[config], start=1):
        h = BilinearLayer(units, steps, activation="relu", name=f"bl_{k}", **common)(h)
        h = keras.layers.Dropout(dropout, name=f"dropout_{k}")(h)
    last = TABL if kind == "TABL" else BilinearLayer
    outputs = last(num_classes, 1, squeeze=True, name="tabl" if kind == "TABL" else "bl_out",
                   **common)(h)
    return keras.Model(inputs, outputs, name=name or f"{config}_{kind}")


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
