"""Keeps a weight in [0, 1]."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_relrec")
class UnitInterval(keras.constraints.Constraint):
    """Clips a weight to [0, 1] after every optimizer update.

    The mixing weights of `TwoDAttention` (τ) and of TABL (λ) are defined
    on [0, 1]; their authors clip them after each update, which is what a
    Keras constraint does.
    """

    def __call__(self, w):
        return ops.clip(w, 0.0, 1.0)

    def get_config(self):
        return {}
