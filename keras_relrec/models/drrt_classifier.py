"""The Deep Recurrent Relation Transformer as a two-input classifier."""

import keras
import numpy as np

from keras_relrec.layers import InteractionTransformer
from keras_relrec.layers import LocalRecurrence
from keras_relrec.layers import SegmentMean
from keras_relrec.layers.relation_transformer import region_map
from keras_relrec.models.front_end import resolve_scaling
from keras_relrec.models.front_end import scaled_inputs
from keras_relrec.utils import validation


def drrt_classifier(
    input_shapes,
    num_classes,
    feature_units=32,
    window_size=5,
    relation_units=32,
    regions=2,
    fusion="sum",
    pairwise="concat",
    local_recurrence=True,
    map_window_size=None,
    map_units=None,
    confine_regional_maps=True,
    num_blocks=1,
    hidden_units=(64, 32),
    dropout=0.0,
    feature_activation="tanh",
    mask_value=None,
    normalization=None,
    scaling="global",
    input_names=("a", "b"),
    seed=None,
    name=None,
):
    """DRRT (Belanger Nzakimuena, "Deep Recurrent Relation Transformer",
    2022), or the Deep Relation Transformer without local recurrence, for
    two sequences; outputs logits.

    ```
    x_1 (n, d_1) → [Masking] → [scaling] → LR(SimpleRNNCell) → Dense(σ)  = A'   eqs. (1)–(2)
    x_2 (m, d_2) → [Masking] → [scaling] → LR(SimpleRNNCell) → Dense(σ)  = B'
    [A', B'] → InteractionTransformer × num_blocks → [Z_ab, Z_ba]   eqs. (3)–(15)
    average fusion: (mean_i Z_ab,i + mean_j Z_ba,j) / 2           over the valid positions (0 for none)
    [, SeriesStatistics of x_1 and of x_2]
    → Dense(ReLU) → [Dropout] → Dense(ReLU) → [Dropout] → Dense(num_classes)
    ```

    Z_ab has n rows and Z_ba m, so "average fusion" averages each over its
    positions and then the two vectors. With `local_recurrence=False` (the
    Deep Relation Transformer, the DRRT's baseline) the features are
    Dense(σ) of each step alone and the relation maps have no recurrence.

    Args:
        input_shapes: ((n, d_1), (m, d_2)): one example of each input. The
            lengths must be known when the maps have a recurrence.
        num_classes: Number of classes.
        feature_units: d, the width of A' and B' (eqs. 1–2).
        window_size: M of the features' local recurrence.
        relation_units, regions, fusion, pairwise: Of every
            `InteractionTransformer` (see it).
        local_recurrence: True (default) for DRRT, False for DRT.
        map_window_size: M of the recurrence over the maps (default
            `window_size`); ignored for DRT.
        map_units: The width of that recurrence (default the maps' widths;
            see `InteractionTransformer`).
        confine_regional_maps: Whether the regional maps stay within their
            region after that recurrence (default), or eqs. 10–11 sum over
            every pair as written (see `InteractionTransformer`).
        num_blocks: Interaction transformers one after the other.
        hidden_units: The widths of the classifier's two hidden layers.
        dropout: Rate after each hidden layer.
        feature_activation: σ_A' of eq. (2) (default tanh).
        mask_value: Steps whose features all equal it are padding (a
            `Masking` layer on each input); `None` (default) for none.
        normalization: None (default), or one `(mean, variance)` per
            feature for each input, `[(mean_1, variance_1), (mean_2,
            variance_2)]` (statistics of the valid training steps).
        scaling: `"global"` (default): each input standardized by its
            `normalization`, where given; `"series"`: each series by
            itself, its level and scale joining the fused vector
            (`scaled_inputs`); `"auto"` is `"global"` here (the builder
            sees no data; `train_classifier` chooses from its own).
        input_names: Names of the two inputs (and of the export's inputs).
        seed: Seed of the dropout.
        name: Model name; default `"drrt"` or `"drt"`.

    Returns:
        An uncompiled `keras.Model` [x_1, x_2] → logits; its layers are
        named `features_a`, `features_b` (and `local_a`, `local_b`),
        `interaction_<k>`, `average_fusion`, `hidden_1`, `hidden_2`,
        `logits`.
    """
    if not (isinstance(input_shapes, (list, tuple)) and len(input_shapes) == 2
            and all(isinstance(s, (list, tuple)) and len(s) == 2 for s in input_shapes)):
        raise ValueError(
            "Argument `input_shapes` must be ((n, d_1), (m, d_2)), one example of each input; received "
            f"input_shapes={input_shapes!r}."
        )
    validation.check_positive_int("num_classes", num_classes)
    validation.check_positive_int("feature_units", feature_units)
    validation.check_positive_int("window_size", window_size)
    validation.check_bool("local_recurrence", local_recurrence)
    validation.check_positive_int("num_blocks", num_blocks)
    if not (isinstance(hidden_units, (list, tuple)) and len(hidden_units) == 2):
        raise ValueError(f"Argument `hidden_units` must be two widths; received hidden_units={hidden_units!r}.")
    for units in hidden_units:
        validation.check_positive_int("hidden_units", units)
    validation.check_rate("dropout", dropout)
    # An equal split into more regions than positions leaves regions empty.
    region_map.check_fits(region_map.check_regions(regions), input_shapes[0][0], input_shapes[1][0])
    if not (isinstance(input_names, (list, tuple)) and len(input_names) == 2
            and all(isinstance(n, str) and n for n in input_names) and input_names[0] != input_names[1]):
        raise ValueError(
            f"Argument `input_names` must be two different names; received input_names={input_names!r}."
        )
    if normalization is not None and not (
            isinstance(normalization, (list, tuple)) and len(normalization) == 2
            and all(isinstance(pair, (list, tuple)) and len(pair) == 2
                    and all(np.size(part) in (1, shape[-1]) for part in pair) and np.all(np.asarray(pair[1]) > 0)
                    for pair, shape in zip(normalization, input_shapes))):
        raise ValueError(
            "Argument `normalization` must be None or one (mean, variance) for each input, each a number or one "
            f"per feature of that input, the variances positive; received normalization={normalization!r}."
        )
    scaling = resolve_scaling(scaling)
    map_window = (map_window_size or window_size) if local_recurrence else None
    inputs, features, statistics = [], [], []
    for k, (shape, side) in enumerate(zip(input_shapes, "ab")):
        x, h, amplitude = scaled_inputs(tuple(shape), mask_value, None if normalization is None else normalization[k],
                                        scaling, name=input_names[k], suffix=f"_{side}")
        inputs.append(x)
        if amplitude is not None:
            statistics.append(amplitude)
        if local_recurrence:
            cell = keras.layers.SimpleRNNCell(feature_units, name=f"local_{side}_cell")
            h = LocalRecurrence(cell, window_size, name=f"local_{side}")(h)
        features.append(keras.layers.Dense(feature_units, activation=feature_activation, name=f"features_{side}")(h))
    for k in range(num_blocks):
        features = InteractionTransformer(relation_units, regions=regions, fusion=fusion, pairwise=pairwise,
                                          map_window_size=map_window, map_units=map_units,
                                          confine_regional_maps=confine_regional_maps,
                                          name=f"interaction_{k}")(features)
    # Zeros for an input without a valid position (GlobalAveragePooling1D's
    # 0/0 would make the logits NaN), so that the other input still decides.
    pooled = [keras.layers.Flatten(name=f"mean_{side}")(SegmentMean(1, name=f"masked_mean_{side}")(z))
              for z, side in zip(features, "ab")]
    h = keras.layers.Average(name="average_fusion")(pooled)
    if statistics:
        h = keras.layers.Concatenate(name="fusion_and_statistics")([h] + statistics)
    for k, units in enumerate(hidden_units, start=1):
        h = keras.layers.Dense(units, activation="relu", name=f"hidden_{k}")(h)
        if dropout:
            h = keras.layers.Dropout(dropout, seed=seed, name=f"dropout_{k}")(h)
    logits = keras.layers.Dense(num_classes, name="logits")(h)
    return keras.Model(inputs, logits, name=name or ("drrt" if local_recurrence else "drt"))
