"""`keras_relrec.save_model`: the archive `model.save` writes, replaced onto
the name atomically (a killed save: tests/contract/test_file_writes.py);
wrong arguments refused before anything is written."""

import os
import zipfile

import keras
import numpy as np
import pytest

import keras_relrec
from keras_relrec.layers import PeepholeLSTMCell
from tests.contract.file_writer_worker import shared_objects_numbered


def small_model():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((None, 3))
    return keras.Model(inputs, keras.layers.RNN(PeepholeLSTMCell(4), return_sequences=True)(inputs))


def members(path):
    """The archive's entries and their bytes, but the save's time
    (metadata.json), and config.json with Keras' shared objects' ids (their
    addresses) numbered."""
    with zipfile.ZipFile(path) as archive:
        return {name: shared_objects_numbered(archive.read(name)) if name == "config.json" else archive.read(name)
                for name in archive.namelist() if name != "metadata.json"}


def test_the_file_is_the_one_model_save_writes(tmp_path):
    model = small_model()
    model.save(tmp_path / "keras.keras")
    assert keras_relrec.save_model(model, tmp_path / "ours.keras") == tmp_path / "ours.keras"
    assert members(tmp_path / "ours.keras") == members(tmp_path / "keras.keras")
    x = np.random.default_rng(0).normal(size=(2, 5, 3)).astype("float32")
    reloaded = keras.saving.load_model(tmp_path / "ours.keras")
    np.testing.assert_array_equal(reloaded.predict(x, verbose=0), model.predict(x, verbose=0))
    assert sorted(os.listdir(tmp_path)) == ["keras.keras", "ours.keras"]  # no temporary left


def test_an_existing_file_is_replaced(tmp_path):
    first, second = small_model(), keras.Sequential([keras.Input((None, 3)), keras.layers.GRU(2)])
    keras_relrec.save_model(first, str(tmp_path / "m.keras"))
    keras_relrec.save_model(second, str(tmp_path / "m.keras"))
    assert len(keras.saving.load_model(tmp_path / "m.keras").layers) == len(second.layers)
    assert os.listdir(tmp_path) == ["m.keras"]


@pytest.mark.parametrize(("model", "path", "message"), [
    ("layer", "m.keras", r"Argument `model` must be a Keras model; received GRU"),
    ("model", "m.h5", r"Argument `path` must end in `\.keras`.*received path='m\.h5'"),
    ("model", 3, r"Argument `path` must be a str or a path; received int"),
    ("model", "folder.keras", r"Argument `path` must name a file; received path='folder\.keras', an existing folder"),
])
def test_wrong_arguments_are_refused_before_anything_is_written(tmp_path, monkeypatch, model, path, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder.keras").mkdir()
    model = keras.layers.GRU(2) if model == "layer" else small_model()
    with pytest.raises(ValueError, match=message):
        keras_relrec.save_model(model, path)
    assert os.listdir(tmp_path) == ["folder.keras"] and not os.listdir(tmp_path / "folder.keras")
