"""A keras-tuner HyperModel of the Deep Recurrent Relation Transformer."""

from keras_tuner.engine import hyperparameters as hp_types

from keras_relrec.layers.relation_transformer import interaction_transformer
from keras_relrec.layers.relation_transformer import pairwise_relation
from keras_relrec.layers.relation_transformer import region_map
from keras_relrec.models import drrt_classifier
from keras_relrec.tuning import hyper_model


class HyperDRRT(hyper_model.SequenceHyperModel):
    """The two-input DRRT classifier (Belanger Nzakimuena, "Deep Recurrent
    Relation Transformer", 2022), or the Deep Relation
    Transformer without local recurrence (`drrt_classifier`), as a
    keras-tuner HyperModel. `x` is a list of the two inputs (or a dict by
    `input_names`).

    Compiled with Adam at `learning_rate` on sparse categorical
    cross-entropy from logits, with accuracy.

    Hyperparameters (names are stable):

    | name | type | default space | default |
    |---|---|---|---|
    | feature_units | Choice | 16, 32, 64 | 32 |
    | window_size | Choice | 3, 5, 8 | 5 |
    | relation_units | Choice | 16, 32, 64 | 32 |
    | regions | Choice | 1, 2, 4 | 2 |
    | fusion | Choice | sum, maxout, concat | sum |
    | pairwise | Choice | concat, concat_relu, dot | concat |
    | local_recurrence | Boolean | False, True | True |
    | num_blocks | Int | 1 to 2 | 1 |
    | dropout | Float | 0.0 to 0.5, step 0.1 | 0.0 |
    | learning_rate | Float | 1e-4 to 1e-2, log | 0.001 |

    `regions` K splits both inputs' positions equally; `window_size` is M of
    both local recurrences (features and maps).

    Args:
        input_shapes: ((n, d_1), (m, d_2)), one example of each input.
        num_classes: Number of classes.
        feature_units, window_size, relation_units, regions, fusion,
            pairwise, local_recurrence, num_blocks, dropout, learning_rate:
            Of `drrt_classifier` and Adam; each a fixed value, a keras-tuner
            hyperparameter object or `None` for the default space above.
        mask_value, input_names, seed: Of `drrt_classifier`.
        name, tunable: As `keras_tuner.HyperModel`.

    Example:

    ```python
    hypermodel = HyperDRRT(((100, 3), (100, 3)), num_classes=4, local_recurrence=True)
    tuner = keras_tuner.BayesianOptimization(hypermodel, objective="val_accuracy", max_trials=20)
    tuner.search([accelerometer, gyroscope], y, validation_split=0.25, epochs=30)
    ```
    """

    def __init__(self, input_shapes, num_classes, feature_units=None, window_size=None, relation_units=None,
                 regions=None, fusion=None, pairwise=None, local_recurrence=None, num_blocks=None, dropout=None,
                 learning_rate=None, mask_value=None, input_names=("a", "b"), seed=None, name=None,
                 tunable=True):
        if not (isinstance(input_shapes, (list, tuple)) and len(input_shapes) == 2):
            raise ValueError("Argument `input_shapes` must be ((n, d_1), (m, d_2)), one example of each input; "
                             f"received input_shapes={input_shapes!r}.")
        self.input_shapes = tuple(hyper_model.check_structure(s, num_classes) for s in input_shapes)
        self.num_classes = num_classes
        self.mask_value, self.input_names, self.seed = mask_value, input_names, seed
        if not isinstance(regions, (hp_types.HyperParameter, type(None))):
            # A fixed K, refused now rather than in every trial.
            region_map.check_fits(region_map.check_regions(regions), self.input_shapes[0][0],
                                  self.input_shapes[1][0])
        super().__init__(
            dict(feature_units=feature_units, window_size=window_size, relation_units=relation_units,
                 regions=regions, fusion=fusion, pairwise=pairwise, local_recurrence=local_recurrence,
                 num_blocks=num_blocks, dropout=dropout, learning_rate=learning_rate),
            name=name, tunable=tunable,
        )

    def space(self):
        return {
            "feature_units": hp_types.Choice("feature_units", [16, 32, 64], default=32),
            "window_size": hp_types.Choice("window_size", [3, 5, 8], default=5),
            "relation_units": hp_types.Choice("relation_units", [16, 32, 64], default=32),
            "regions": hp_types.Choice("regions", [1, 2, 4], default=2),
            "fusion": hp_types.Choice("fusion", list(interaction_transformer.FUSIONS), default="sum"),
            "pairwise": hp_types.Choice("pairwise", list(pairwise_relation.PAIRWISE), default="concat"),
            "local_recurrence": hp_types.Boolean("local_recurrence", default=True),
            "num_blocks": hp_types.Int("num_blocks", 1, 2, default=1),
            "dropout": hp_types.Float("dropout", 0.0, 0.5, step=0.1, default=0.0),
            "learning_rate": hyper_model.learning_rate(),
        }

    def build_model(self, hp):
        return drrt_classifier(
            self.input_shapes,
            self.num_classes,
            feature_units=self.value(hp, "feature_units"),
            window_size=self.value(hp, "window_size"),
            relation_units=self.value(hp, "relation_units"),
            regions=self.value(hp, "regions"),
            fusion=self.value(hp, "fusion"),
            pairwise=self.value(hp, "pairwise"),
            local_recurrence=self.value(hp, "local_recurrence"),
            num_blocks=self.value(hp, "num_blocks"),
            dropout=self.value(hp, "dropout"),
            mask_value=self.mask_value,
            input_names=self.input_names,
            seed=self.seed,
        )
