"""A compiled model's training state made before its first step, so that
TensorFlow traces that step once."""

import keras

from keras_relrec.utils import keras_internals


def build_training_state(model, x, y=None, sample_weight=None):
    """Makes the variables of a compiled model's training (the optimizer's
    slots, the compiled metrics' and loss's) before its first step.

    Keras on TensorFlow makes them inside the trace of the first training
    step, unless the model was compiled under a distribution strategy; a
    `tf.function` that made variables is traced a second time, so the
    first `fit` or `train_on_batch` traces the whole step, forward and
    backward, twice. Made beforehand, they are traced once: the first step
    of a small Transformer-XL in about half the time in TensorFlow's graph
    (`benchmarks/RESULTS.md`, "bench_first_step"). Keras' JAX and torch
    trainers make them before the first step themselves; there, and for a
    model whose state exists, this does nothing. A step that makes no
    variables (plain SGD without momentum, a loss without metrics) is
    traced once anyway; there this only adds a symbolic pass over the
    model. The values are those the first step would have made (zeros):
    training is unchanged.

    Args:
        model: A compiled `keras.Model`.
        x: A batch of the model's inputs, as `fit` takes them (arrays,
            or Keras tensors: only their shapes and dtypes are read; the
            batch size may be None).
        y: The targets of that batch, if the loss takes any.
        sample_weight: Sample weights, if training uses them.

    Returns:
        `model`.

    Example:

    ```python
    import keras
    import numpy as np
    from keras_relrec.models import build_training_state

    inputs = keras.Input((10, 4))
    model = keras.Model(inputs, keras.layers.Dense(1)(keras.layers.LSTM(8)(inputs)))
    model.compile(optimizer="adam", loss="mse", metrics=["mae"])
    x, y = np.zeros((32, 10, 4), "float32"), np.zeros((32, 1), "float32")
    build_training_state(model, x, y).fit(x, y, epochs=1, verbose=0)
    ```
    """
    if not isinstance(model, keras.Model):
        raise ValueError(f"Argument `model` must be a keras.Model; received model={model!r}.")
    if getattr(model, "optimizer", None) is None:
        raise ValueError(
            f"Argument `model` must be compiled: model {model.name!r} has no optimizer. Call "
            "model.compile(optimizer=..., loss=...) first."
        )
    keras_internals.symbolic_build(model, (x, y, sample_weight))
    return model
