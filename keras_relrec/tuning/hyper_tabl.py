"""A keras-tuner HyperModel of the TABL networks."""

from keras_tuner.engine import hyperparameters as hp_types

from keras_relrec.models import tabl_networks
from keras_relrec.tuning import hyper_model


class HyperTABL(hyper_model.SequenceHyperModel):
    """The A, B and C networks of Tran et al., "Temporal Attention-Augmented
    Bilinear Network for Financial Time-Series Data Analysis" (IEEE TNNLS
    2019), with a TABL or bilinear last layer (`tabl_network`), as a
    keras-tuner HyperModel.

    Compiled with Adam at `learning_rate` on sparse categorical
    cross-entropy from logits, with accuracy; `fit` weights the loss by
    class as the paper does (`class_weights(y)`) unless `class_weight` is
    given (with `y` left out, as for a `tf.data.Dataset`, no weights are
    applied unless given).

    Hyperparameters (names are stable):

    | name | type | default space | default |
    |---|---|---|---|
    | config | Choice | A, B, C | C |
    | kind | Choice | TABL, BL | TABL |
    | dropout | Float | 0.0 to 0.5, step 0.1 | 0.1 |
    | max_norm | Choice | 0.0, 3.0, 5.0, 7.0 | 0.0 |
    | learning_rate | Float | 1e-4 to 1e-2, log | 0.01 |

    `max_norm` 0.0 is no max-norm constraint; 3, 5 and 7 are the paper's.
    `tabl_network`'s other arguments keep their defaults: the paper's
    network on the steps for several features per step; for one feature
    per step, local histograms over MiniRocket's kernels, whose codebooks
    start at random here (`fit_codebook` sets them by k-means).

    Args:
        input_shape: One example, (T, D) with `"channels_last"` or (D, T)
            with `"channels_first"`.
        num_classes: Number of classes.
        config, kind, dropout, max_norm, learning_rate: Of `tabl_network` and
            Adam; each a fixed value, a keras-tuner hyperparameter object or
            `None` for the default space above.
        data_format: `"channels_last"` (default) or `"channels_first"`.
        name, tunable: As `keras_tuner.HyperModel`.

    Example:

    ```python
    tuner = keras_tuner.Hyperband(HyperTABL((10, 40), 3), objective="val_accuracy", max_epochs=20)
    tuner.search(x, y, validation_data=(x_val, y_val))
    ```
    """

    def __init__(self, input_shape, num_classes, config=None, kind=None, dropout=None, max_norm=None,
                 learning_rate=None, data_format="channels_last", name=None, tunable=True):
        self.input_shape = hyper_model.check_structure(input_shape, num_classes)
        self.num_classes = num_classes
        self.data_format = data_format
        super().__init__(
            dict(config=config, kind=kind, dropout=dropout, max_norm=max_norm, learning_rate=learning_rate),
            name=name, tunable=tunable,
        )

    def space(self):
        return {
            "config": hp_types.Choice("config", list(tabl_networks.CONFIGS), default="C"),
            "kind": hp_types.Choice("kind", list(tabl_networks.KINDS), default="TABL"),
            "dropout": hp_types.Float("dropout", 0.0, 0.5, step=0.1, default=0.1),
            "max_norm": hp_types.Choice("max_norm", [0.0, 3.0, 5.0, 7.0], default=0.0),
            "learning_rate": hyper_model.learning_rate(default=0.01),
        }

    def build_model(self, hp):
        max_norm = self.value(hp, "max_norm")
        return tabl_networks.tabl_network(
            config=self.value(hp, "config"),
            kind=self.value(hp, "kind"),
            input_shape=self.input_shape,
            num_classes=self.num_classes,
            dropout=self.value(hp, "dropout"),
            max_norm=max_norm or None,
            data_format=self.data_format,
        )

    def fit(self, hp, model, x=None, y=None, class_weight=None, **kwargs):
        if class_weight is None and y is not None:
            class_weight = tabl_networks.class_weights(y)
        return model.fit(x, y, class_weight=class_weight, **kwargs)
