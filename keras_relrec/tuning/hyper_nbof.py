"""A keras-tuner HyperModel of the neural bag-of-features classifiers."""

import itertools

from keras_tuner.engine import hyperparameters as hp_types

from keras_relrec.models import nbof_classifiers
from keras_relrec.tuning import hyper_model
from keras_relrec.utils import keras_internals


class HyperNBoF(hyper_model.SequenceHyperModel):
    """NBoF and attention NBoF (`nbof_classifier`: Passalis et al., neural
    bag-of-features; Tran et al., 2-D attention, IEEE Access 2022), as a
    keras-tuner HyperModel.

    The quantizer's codebook is fitted by k-means in every trial's `fit`, on
    that trial's training sequences `x` as the quantizer sees them (after the
    trial's input attention), padding left out: nothing is shared between
    trials, and validation data never reaches k-means (with
    `validation_split`, k-means sees the part `fit` trains on). When `x` is not an
    array (a `tf.data.Dataset`), pass the sequences as `codebook_data=` to
    `fit`.

    Compiled with Adam at `learning_rate` on sparse categorical
    cross-entropy from logits, with accuracy.

    Hyperparameters (names are stable):

    | name | type | default space | default |
    |---|---|---|---|
    | num_codewords | Choice | 8, 16, 32, 64, 128 | 32 |
    | attention | Choice | none and every "+"-joined set of input, codeword, temporal | none |
    | scale | Choice | per_dimension, per_codeword | per_dimension |
    | hidden_units | Choice | 32, 64, 128 | 64 |
    | dropout | Float | 0.0 to 0.5, step 0.1 | 0.2 |
    | learning_rate | Float | 1e-4 to 1e-2, log | 0.001 |

    The attention sets are "none", "input", "codeword", "temporal",
    "input+codeword", "input+temporal", "codeword+temporal",
    "input+codeword+temporal"; those with "temporal" only when the number of
    steps is fixed (temporal attention has a weight per pair of steps).

    Args:
        input_shape: (steps, features) of one example; steps may be `None`
            (no temporal attention then).
        num_classes: Number of classes.
        num_codewords, attention, scale, hidden_units, dropout,
            learning_rate: Of `nbof_classifier` and Adam; each a fixed value
            (`attention` as a "+"-joined string or a collection), a
            keras-tuner hyperparameter object or `None` for the default
            space above.
        mask_value, normalization: Of `nbof_classifier`.
        seed: Seed of the dropout and of k-means.
        name, tunable: As `keras_tuner.HyperModel`.

    Example:

    ```python
    hypermodel = HyperNBoF((29, 12), num_classes=9)
    tuner = keras_tuner.BayesianOptimization(hypermodel, objective="val_accuracy", max_trials=20)
    tuner.search(x, y, validation_split=0.2, epochs=30)
    ```
    """

    def __init__(self, input_shape, num_classes, num_codewords=None, attention=None, scale=None,
                 hidden_units=None, dropout=None, learning_rate=None, mask_value=0.0, normalization=None,
                 seed=None, name=None, tunable=True):
        self.input_shape = hyper_model.check_structure(input_shape, num_classes)
        self.num_classes = num_classes
        self.mask_value, self.normalization, self.seed = mask_value, normalization, seed
        super().__init__(
            dict(num_codewords=num_codewords, attention=attention, scale=scale, hidden_units=hidden_units,
                 dropout=dropout, learning_rate=learning_rate),
            name=name, tunable=tunable,
        )

    def space(self):
        kinds = [k for k in nbof_classifiers.ATTENTIONS if k != "temporal" or self.input_shape[0] is not None]
        sets = ["none"] + ["+".join(c) for n in range(1, len(kinds) + 1) for c in itertools.combinations(kinds, n)]
        return {
            "num_codewords": hp_types.Choice("num_codewords", [8, 16, 32, 64, 128], default=32),
            "attention": hp_types.Choice("attention", sets, default="none"),
            "scale": hp_types.Choice("scale", ["per_dimension", "per_codeword"], default="per_dimension"),
            "hidden_units": hp_types.Choice("hidden_units", [32, 64, 128], default=64),
            "dropout": hp_types.Float("dropout", 0.0, 0.5, step=0.1, default=0.2),
            "learning_rate": hyper_model.learning_rate(),
        }

    def build_model(self, hp):
        attention = self.value(hp, "attention")
        if isinstance(attention, str):
            attention = () if attention == "none" else tuple(attention.split("+"))
        return nbof_classifiers.nbof_classifier(
            self.input_shape,
            self.num_classes,
            num_codewords=self.value(hp, "num_codewords"),
            attention=attention,
            scale=self.value(hp, "scale"),
            mask_value=self.mask_value,
            normalization=self.normalization,
            # The search space of the paper's models: the raw steps and
            # the full temporal W.
            front_end=None,
            temporal_rank=None,
            hidden_units=self.value(hp, "hidden_units"),
            dropout=self.value(hp, "dropout"),
            seed=self.seed,
        )

    def fit(self, hp, model, x=None, y=None, codebook_data=None, **kwargs):
        if codebook_data is None:
            if not hasattr(x, "shape"):
                raise ValueError(
                    "HyperNBoF.fit fits the codebook on the training sequences: with `x` of type "
                    f"{type(x).__name__}, pass them as `codebook_data=` (an array) to `search`."
                )
            codebook_data = x
            if kwargs.get("validation_split"):
                codebook_data, _ = keras_internals.train_validation_split(x, kwargs["validation_split"])
        nbof_classifiers.fit_codebook(model, codebook_data, seed=self.seed)
        return model.fit(x, y, **kwargs)
