"""The HyperModels of keras_relrec.tuning: documented spaces, fixed values
and hyperparameter objects, searches with each keras-tuner tuner whose best
model reloads and exports, the per-trial k-means codebook, TABL's class
weights. Backend-neutral: the tests marked `jax` run again on JAX in make
check, those marked `jax_slow` (every search) in make test-slow, with
KERAS_RELREC_SLOW_TESTS=1 (every best model then exports)."""

import inspect
import math
import os
import pathlib
import re
import subprocess
import sys

import keras
import keras_tuner
import numpy as np
import pytest

from keras_relrec import tuning
from tests.tuning.registry import ENTRIES

HERE = pathlib.Path(__file__).parent
entries = pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.id)
TUNERS = ("RandomSearch", "Hyperband", "BayesianOptimization")
# make check searches each tuner once, on three families, on TensorFlow and
# again on JAX; make test-slow every pair, and every pair again on JAX.
QUICK = {("HyperRelationalMemory", "RandomSearch"), ("HyperTABL", "Hyperband"),
         ("HyperNBoF", "BayesianOptimization")}
SEARCHES = [pytest.param(e, t, id=f"{e.id}-{t}",
                         marks=[pytest.mark.jax if (e.id, t) in QUICK else pytest.mark.slow, pytest.mark.jax_slow])
            for e in ENTRIES for t in TUNERS]
# On another backend the best model exports through a TensorFlow process of
# its own (15 s): make check takes that path for one of its searches, and
# make test-slow (KERAS_RELREC_SLOW_TESTS=1) for every search.
EXPORTED_ON_EVERY_BACKEND = ("HyperRelationalMemory", "RandomSearch")


def test_every_hypermodel_has_an_entry():
    public = {name for name, obj in vars(tuning).items() if inspect.isclass(obj)}
    assert public == {e.id for e in ENTRIES}


def documented_table(cls):
    """{name: (type, space, default)} from the docstring's table."""
    rows = [line.strip() for line in cls.__doc__.splitlines() if line.strip().startswith("|")]
    assert rows[0].split("|")[1:-1] == [" name ", " type ", " default space ", " default "], cls.__name__
    cells = [[c.strip() for c in row.split("|")[1:-1]] for row in rows[2:]]
    return {name: (kind, space, default) for name, kind, space, default in cells}


def scalar(text, segment_len=None):
    """A table cell as a value: numbers, True/False, multiples of L."""
    if re.fullmatch(r"\d*L", text):
        return int(text[:-1] or 1) * segment_len
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(text, text)


@entries
def test_docstring_table_is_the_default_space(entry):
    """Every tunable argument left to its default registers the documented
    name, type, range and default (so `tune_new_entries=False` users can
    rely on the table)."""
    hp = keras_tuner.HyperParameters()
    entry.cls(**entry.structure).build(hp)
    table = documented_table(entry.cls)
    assert [p.name for p in hp.space] and {p.name for p in hp.space} == set(table)
    length = entry.structure.get("segment_len")
    for p in hp.space:
        kind, space, default = table[p.name]
        assert type(p).__name__ == kind, p.name
        assert p.default == scalar(default, length), p.name
        if kind == "Choice" and " and every " not in space:
            assert list(p.values) == [scalar(v, length) for v in space.split(", ")], p.name
        if kind in ("Int", "Float"):
            low, high = space.split(",")[0].split(" to ")
            assert (p.min_value, p.max_value) == (scalar(low), scalar(high)), p.name
            assert ("log" in space) == (p.sampling == "log"), p.name


@entries
def test_fixed_values_and_hyperparameter_objects(entry):
    """Fixed values are used as given and not registered; a hyperparameter
    object is registered under the argument's stable name with its range."""
    hp = keras_tuner.HyperParameters()
    entry.hypermodel().build(hp)
    assert {p.name for p in hp.space} == set(entry.tuned)
    for name, given in entry.tuned.items():
        registered = hp._hps[name][0]
        assert type(registered) is type(given)
        assert getattr(registered, "values", None) == getattr(given, "values", None)


def test_unknown_or_bad_arguments_name_the_culprit():
    with pytest.raises(ValueError, match="num_classes"):
        tuning.HyperTABL((10, 6), 0)
    with pytest.raises(ValueError, match="input_shape"):
        tuning.HyperRelationalMemory((5,), 3)
    with pytest.raises(ValueError, match="pooling"):
        tuning.HyperRTransformer((None, 2), 3)
    with pytest.raises(ValueError, match="head_units"):
        tuning.HyperRelationalMemory((5, 3), 3, head_units=0).build(keras_tuner.HyperParameters())
    with pytest.raises(TypeError, match="units"):
        tuning.HyperTABL((10, 6), 3, units=4)


def test_a_fixed_number_of_regions_must_fit_the_inputs():
    """Refused when the HyperModel is made, not in every trial."""
    with pytest.raises(ValueError, match=r"`regions` must be at most .* regions=7 where A has 4 and B has 4"):
        tuning.HyperDRRT(((4, 2), (4, 2)), num_classes=2, regions=7)
    tuning.HyperDRRT(((4, 2), (4, 2)), num_classes=2, regions=4)


def make_tuner(name, hypermodel, directory, objective="val_accuracy", **kwargs):
    common = dict(objective=objective, directory=str(directory), project_name="p", seed=1, overwrite=True,
                  **kwargs)
    if name == "Hyperband":
        return keras_tuner.Hyperband(hypermodel, max_epochs=2, factor=2, hyperband_iterations=1, **common)
    return getattr(keras_tuner, name)(hypermodel, max_trials=2, **common)


@pytest.mark.parametrize("entry, tuner_name", SEARCHES)
def test_search_and_the_best_model(entry, tuner_name, tmp_path):
    """A search records every trial; the best model reloads with the
    weights of its best epoch (it scores the recorded objective) and exports
    to builtins-only TFLite that gives its outputs."""
    x, y = entry.make_data(24, 0)
    x_val, y_val = entry.make_data(12, 1)
    tuner = make_tuner(tuner_name, entry.hypermodel(), tmp_path, objective="val_loss")
    tuner.search(x, y, validation_data=(x_val, y_val), epochs=2, batch_size=8, verbose=0)
    trials = tuner.oracle.trials.values()
    assert trials and all(t.status == "COMPLETED" for t in trials)
    best_trial = tuner.oracle.get_best_trials(1)[0]
    best = tuner.get_best_models(1)[0]
    loss = best.evaluate(x_val, y_val, batch_size=8, verbose=0, return_dict=True)["loss"]
    np.testing.assert_allclose(loss, best_trial.score, rtol=1e-4)
    if (keras.backend.backend() == "tensorflow" or (entry.id, tuner_name) == EXPORTED_ON_EVERY_BACKEND
            or os.environ.get("KERAS_RELREC_SLOW_TESTS")):
        assert_exports(best, x_val[:2] if not isinstance(x_val, list) else [v[:2] for v in x_val], tmp_path)


def assert_exports(model, x, tmp_path):
    """Exports with the package's TFLite export, on TensorFlow directly, on
    another backend through a `.keras` file loaded in a TensorFlow process."""
    expected = model.predict(x, verbose=0)
    if keras.backend.backend() == "tensorflow":
        from tests.tuning.export_worker import export_and_compare

        export_and_compare(model, x, expected, tmp_path / "best.tflite")
        return
    model.save(tmp_path / "best.keras")
    np.savez(tmp_path / "arrays.npz", expected=expected, **{f"x{k}": v for k, v in enumerate(keras.tree.flatten(x))})
    result = subprocess.run([sys.executable, str(HERE / "export_worker.py"), str(tmp_path)], capture_output=True,
                            text=True, env={**os.environ, "KERAS_BACKEND": "tensorflow",
                                            "PYTHONPATH": str(HERE.parent.parent)})
    assert result.returncode == 0, result.stderr[-3000:]


def test_only_the_given_hyperparameters_are_tuned(tmp_path):
    """`hyperparameters=` with `tune_new_entries=False`: the stable name is
    searched, every other argument takes the table's default."""
    entry = next(e for e in ENTRIES if e.cls is tuning.HyperTABL)
    x, y = entry.make_data(24, 0)
    given = keras_tuner.HyperParameters()
    given.Choice("kind", ["BL"])
    tuner = keras_tuner.RandomSearch(tuning.HyperTABL((10, 6), 3), objective="val_loss", max_trials=2,
                                     hyperparameters=given, tune_new_entries=False, directory=str(tmp_path),
                                     project_name="p", overwrite=True)
    tuner.search(x, y, validation_split=0.25, epochs=1, verbose=0)
    defaults = {"config": "C", "dropout": 0.1, "max_norm": 0.0, "learning_rate": 0.01}
    for trial in tuner.oracle.trials.values():
        assert trial.hyperparameters.values == {"kind": "BL", **defaults}
    best = tuner.get_best_models(1)[0]
    assert "bl_out" in [layer.name for layer in best.layers]
    assert [best.get_layer(f"dropout_{k}").rate for k in (1, 2)] == [0.1, 0.1]  # config C, dropout 0.1
    assert math.isclose(float(keras.ops.convert_to_numpy(best.optimizer.learning_rate)), 0.01, rel_tol=1e-6)


@pytest.mark.jax
def test_nbof_codebook_comes_from_each_trials_training_part():
    """k-means sees the sequences `fit` trains on: with `validation_split`,
    the validation part (here far from the training clusters) moves no
    codeword; each trial's model gets its own codebook."""
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]])
    train = centres[rng.integers(0, 3, (30, 5))] + 0.05 * rng.normal(size=(30, 5, 2))
    validation = 100.0 + rng.normal(size=(10, 5, 2))
    x = np.concatenate([train, validation]).astype("float32")
    y = rng.integers(0, 2, 40)
    hypermodel = tuning.HyperNBoF((5, 2), 2, num_codewords=3, attention="none", hidden_units=4, seed=0)
    codebooks = []
    for _ in range(2):
        hp = keras_tuner.HyperParameters()
        model = hypermodel.build(hp)
        hypermodel.fit(hp, model, x, y, validation_split=0.25, epochs=1, verbose=0)
        codebook = keras.ops.convert_to_numpy(model.get_layer("quantizer").codebook)
        # Before the step of training, k-means put a codeword on each centre.
        distances = np.linalg.norm(codebook[:, None] - centres[None], axis=-1)
        assert np.all(distances.min(axis=0) < 0.5) and np.all(np.abs(codebook) < 10)
        codebooks.append(codebook)
    assert codebooks[0] is not codebooks[1]


@pytest.mark.jax
def test_nbof_fit_on_a_dataset_asks_for_codebook_data():
    hypermodel = tuning.HyperNBoF((5, 2), 2, num_codewords=3, attention="none")
    hp = keras_tuner.HyperParameters()
    with pytest.raises(ValueError, match="codebook_data"):
        hypermodel.fit(hp, hypermodel.build(hp), x=iter([]), epochs=1)


def test_tabl_fit_weights_classes_as_the_paper(monkeypatch):
    """class weight N / (K N_c), computed here from the counts."""
    y = np.array([0, 0, 0, 1, 2, 2])
    hypermodel = tuning.HyperTABL((10, 6), 3, config="A")
    hp = keras_tuner.HyperParameters()
    model = hypermodel.build(hp)
    seen = []
    monkeypatch.setattr(model, "fit", lambda x, y, class_weight=None, **kw: seen.append(class_weight))
    hypermodel.fit(hp, model, np.zeros((6, 10, 6), "float32"), y)
    assert seen[0] == pytest.approx({0: 6 / 9, 1: 6 / 3, 2: 6 / 6})
    hypermodel.fit(hp, model, np.zeros((6, 10, 6), "float32"), y, class_weight={0: 1.0})
    assert seen[1] == {0: 1.0}  # a given weighting is kept
