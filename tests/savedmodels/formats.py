"""The three formats of a trained model in savedmodels/, loaded and run the
same way for every model's test: `<stem>.keras`, `<stem>_savedmodel/` (its
`serve` endpoint) and `<stem>.tflite`; the `.keras` model exported for
microcontrollers, run in the tflite-micro interpreter; and the Use block of
the model's card, run as a reader would."""

import pathlib
import re
import tempfile

import keras
import numpy as np

from keras_relrec.export import run_sequence


def accuracy(logits, y):
    return float((np.asarray(logits).argmax(-1) == y).mean())


def keras_logits(folder, stem, x):
    model = keras.saving.load_model(folder / f"{stem}.keras", safe_mode=True)
    return model.predict(x, verbose=0)


def saved_model_logits(folder, stem, input_name, x):
    """`serve` on `x`, fed as `input_name`; or on `x` as it is, a dict of
    the model's inputs by name (`input_name` None)."""
    import tensorflow as tf

    loaded = tf.saved_model.load(str(folder / f"{stem}_savedmodel"))
    return loaded.serve(x if input_name is None else {input_name: x})["output"]


def tflite_logits(folder, stem, x):
    return run_sequence(folder / f"{stem}.tflite", x)["output"]


def micro_logits(folder, stem, x):
    """The `.keras` model exported with target="micro" (batch 1, the length
    of `x`), every example run through one tflite-micro interpreter."""
    from keras_relrec.export import export_tflite
    from keras_relrec.export import micro

    model = keras.saving.load_model(folder / f"{stem}.keras", safe_mode=True)
    with tempfile.TemporaryDirectory() as directory:
        path = f"{directory}/{stem}_micro.tflite"
        arena = export_tflite(model, path, target="micro", length=x.shape[1])["micro"]["arena_bytes"]
        runner = micro.MicroInterpreter(path, "serve", arena_size=4 * arena)
    (name,) = runner.order["inputs"]
    return np.concatenate([runner(**{name: x[k : k + 1]})["output"] for k in range(len(x))])


def run_card_use(folder, monkeypatch):
    """Runs the first python block of `folder`'s CARD.md, the Use section
    that opens it, from the repository root (its paths are relative to it),
    and checks that the input it feeds the model, `x` (an array or a dict by
    input name), has the model's shapes and dtypes.

    Returns:
        The block's variables (`model`, `x`, `logits`, ...).
    """
    card = (folder / "CARD.md").read_text()
    title, use = card.split("\n\n", 2)[:2]
    assert title.startswith("# ") and use == "## Use", f"{folder.name}'s card must open with a Use section"
    block = re.search(r"```python\n(.*?)```", card, re.DOTALL).group(1)
    monkeypatch.chdir(pathlib.Path(__file__).parents[2])
    variables = {}
    exec(compile(block, str(folder / "CARD.md"), "exec"), variables)
    model, x = variables["model"], variables["x"]
    fed = x if isinstance(x, dict) else {model.inputs[0].name: x}
    for tensor in model.inputs:
        shape = fed[tensor.name].shape
        assert len(shape) == len(tensor.shape) and all(d in (None, s) for d, s in zip(tensor.shape, shape)), (
            f"{folder.name}: the card feeds {tensor.name} of shape {shape}; the model takes {tensor.shape}"
        )
        assert fed[tensor.name].dtype == tensor.dtype, f"{folder.name}: {tensor.name} is {fed[tensor.name].dtype}"
    return variables
