"""`save_model`: Keras' `.keras` file, written so that a killed save never
leaves a broken one."""

import os

import keras

from keras_relrec.utils import atomic_files


def save_model(model, path):
    """Saves `model` to the `.keras` file `path` as `model.save(path)` does,
    atomically.

    Keras' own save writes the file in place, so a process killed while it
    writes leaves a truncated file that does not load where a good one
    was. Here the file is written beside `path` under a hidden name,
    flushed to disk and renamed onto `path` (one atomic step,
    `keras_relrec.utils.atomic_files`): `path` holds the old file or the
    new one, whole, whenever the process stops. The archive holds what
    `model.save` writes (its `metadata.json` carries the time of the save).

    Args:
        model: A Keras model (functional, sequential or subclassed).
        path: The file to write, a `str` or path-like ending in `.keras`
            (Keras' suffix for the format). An existing file there is
            replaced; a folder is refused.

    Returns:
        `path`.

    Example:

    ```python
    import keras
    import keras_relrec

    model = keras.Sequential([keras.Input((None, 3)), keras.layers.GRU(4)])
    keras_relrec.save_model(model, "model.keras")
    reloaded = keras.saving.load_model("model.keras")
    ```
    """
    if not isinstance(model, keras.Model):
        raise ValueError(
            f"Argument `model` must be a Keras model; received {type(model).__name__}. Wrap a layer in "
            "`keras.Sequential([keras.Input(shape), layer])` to save it."
        )
    try:
        name = os.fsdecode(path)
    except TypeError:
        raise ValueError(f"Argument `path` must be a str or a path; received {type(path).__name__}.") from None
    if not name.endswith(".keras"):
        raise ValueError(f"Argument `path` must end in `.keras`, Keras' suffix for the format; received path={name!r}.")
    if os.path.isdir(name):
        raise ValueError(f"Argument `path` must name a file; received path={name!r}, an existing folder. Give a file "
                         "name, such as model.keras inside it.")
    with atomic_files.replacing(name) as temp:
        model.save(temp)
    return path
