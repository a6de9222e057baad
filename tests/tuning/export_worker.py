"""Exports a tuned model with the package's TFLite export and checks that
LiteRT gives its outputs. Imported on TensorFlow; run as a script (on
TensorFlow) for a model a JAX search saved:

    python tests/tuning/export_worker.py FOLDER   # FOLDER/best.keras, FOLDER/arrays.npz
"""

import pathlib
import sys

import numpy as np

ATOL = 1e-5


def export_and_compare(model, x, expected, path):
    from keras_relrec.export import export_tflite
    from keras_relrec.export import run_sequence

    summary = export_tflite(model, path)
    assert not [op for op in summary["ops"] if op.startswith("CUSTOM")], summary["ops"]
    names = [t.name for t in model.inputs]
    feed = dict(zip(names, x)) if isinstance(x, list) else x
    np.testing.assert_allclose(run_sequence(path, feed)["output"], expected, atol=ATOL)


if __name__ == "__main__":
    import keras

    import keras_relrec  # noqa: F401  (registers the layers for loading)

    folder = pathlib.Path(sys.argv[1])
    arrays = np.load(folder / "arrays.npz")
    x = [arrays[k] for k in sorted(arrays.files) if k.startswith("x")]
    model = keras.saving.load_model(folder / "best.keras")
    export_and_compare(model, x if len(x) > 1 else x[0], arrays["expected"], folder / "best.tflite")
