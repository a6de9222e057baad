"""Sequence classifiers of the neural bag-of-features family."""

import keras
import numpy as np

from keras_relrec.layers import BoFQuantizer
from keras_relrec.layers import RecurrentBoFCell
from keras_relrec.layers import TwoDAttention
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
    hidden_units=64,
    dropout=0.2,
    codebook_data=None,
    seed=None,
    name=None,
):
    """NBoF, or attention NBoF, for (steps, features) sequences; outputs logits.

    ```
    sequence → [Masking] → [Normalization] → [input attention]
             → BoFQuantizer (memberships Φ)
             → [codeword attention] → [temporal attention]
             → histogram (mean over the valid steps) → Dense(ReLU) → Dropout
             → Dense(num_classes)
    ```

    The attentions are `TwoDAttention` layers (Tran et al., IEEE Access
    2022): input attention over the features of each step, codeword
    attention over the codewords of each step, temporal attention over the
    steps (which needs a fixed number of steps).

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
            valid training steps).
        hidden_units, dropout: The classifier head.
        codebook_data: Optional training sequences (an array): the quantizer's
            codebook is set by k-means on the feature vectors it sees for
            them (after the input attention, if any), skipping padding
            (`fit_codebook`, which also does it later on a built model).
        seed: Seed of the dropout and of k-means.
        name: Model name; default `"nbof"` or `"attention_nbof"`.

    Returns:
        An uncompiled `keras.Model`; its layers are named `quantizer`,
        `input_attention`, `codeword_attention`, `temporal_attention`,
        `histogram`.
    """
    attention = () if attention is None else attention
    if isinstance(attention, str) or set(attention) - set(ATTENTIONS):
        raise ValueError(
            f"Argument `attention` must be a collection of {ATTENTIONS}; received "
            f"attention={attention!r}."
        )
    _check_head(num_classes, hidden_units, dropout)
    inputs, h = _inputs(input_shape, mask_value, normalization)
    if "input" in attention:
        h = TwoDAttention(axis=2, name="input_attention")(h)
    phi = BoFQuantizer(num_codewords, scale=scale, name="quantizer")(h)
    if "codeword" in attention:
        phi = TwoDAttention(axis=2, name="codeword_attention")(phi)
    if "temporal" in attention:
        phi = TwoDAttention(axis=1, name="temporal_attention")(phi)
    histogram = keras.layers.GlobalAveragePooling1D(name="histogram")(phi)
    outputs = _head(histogram, num_classes, hidden_units, dropout, seed)
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
    hidden_units=64,
    dropout=0.2,
    codebook_data=None,
    seed=None,
    name="recurrent_nbof",
):
    """Recurrent NBoF: `RecurrentBoFCell` histograms s_j averaged over the
    valid steps, then the same head as `nbof_classifier`.

    Args: as `nbof_classifier` (without `attention`). The recurrent
    quantizer's layer is named `recurrent_quantizer`.
    """
    _check_head(num_classes, hidden_units, dropout)
    inputs, h = _inputs(input_shape, mask_value, normalization)
    states = keras.layers.RNN(RecurrentBoFCell(num_codewords), return_sequences=True,
                              name="recurrent_quantizer")(h)
    histogram = keras.layers.GlobalAveragePooling1D(name="histogram")(states)
    outputs = _head(histogram, num_classes, hidden_units, dropout, seed)
    model = keras.Model(inputs, outputs, name=name)
    if codebook_data is not None:
        fit_codebook(model, codebook_data, seed)
    return model


def _check_head(num_classes, hidden_units, dropout):
    validation.check_positive_int("num_classes", num_classes)
    validation.check_positive_int("hidden_units", hidden_units)
    validation.check_rate("dropout", dropout)


def _inputs(input_shape, mask_value, normalization):
    inputs = keras.Input(input_shape, name="sequence")
    h = inputs if mask_value is None else keras.layers.Masking(mask_value)(inputs)
    if normalization is not None:
        mean, variance = normalization
        h = keras.layers.Normalization(mean=mean, variance=variance, name="normalization")(h)
    return inputs, h


def fit_codebook(model, data, seed=None):
    """Sets the codebook of an `nbof_classifier` or `recurrent_nbof_classifier`
    to the k-means centres of the vectors its quantizer sees for `data` (after
    the layers before it), padded steps left out.

    Args:
        model: A model from either builder.
        data: Training sequences, an array (examples, steps, features).
        seed: Seed of k-means.
    """
    if not hasattr(data, "shape"):
        raise ValueError(
            "Argument `codebook_data` must be an array of training sequences "
            f"(examples, steps, features); received {type(data).__name__}."
        )
    names = [layer.name for layer in model.layers]
    layer = model.get_layer("quantizer" if "quantizer" in names else "recurrent_quantizer")
    # `layer.input` is a tuple of the call's tensors; the features come first.
    seen = keras.Model(model.inputs, keras.tree.flatten(layer.input)[0]).predict(data, verbose=0)
    data = np.asarray(data)
    valid = np.ones(data.shape[:-1], bool)
    for masking in (m for m in model.layers if isinstance(m, keras.layers.Masking)):
        valid = ~np.all(data == masking.mask_value, axis=-1)
    getattr(layer, "cell", layer).adapt(seen[valid], seed=seed)


def _head(histogram, num_classes, hidden_units, dropout, seed):
    h = keras.layers.Dense(hidden_units, activation="relu", name="hidden")(histogram)
    h = keras.layers.Dropout(dropout, seed=seed, name="dropout")(h)
    return keras.layers.Dense(num_classes, name="logits")(h)
