"""`.keras` files saved by keras_relrec 0.2 load and answer as they did, their variables under 0.2's paths:
`TransformerXL` and `SegmentCacheTransformer` became presets of
`SegmentRecurrence` with a memory policy, and their files did not change.
The files and their outputs were written by
`tests/goldens/v0_2/make_v0_2_files.py` at 0.2."""

import json
import pathlib

import keras
import numpy as np
import pytest

FOLDER = pathlib.Path(__file__).parents[2] / "goldens" / "v0_2"
ARRAYS = np.load(FOLDER / "outputs.npz")
PATHS = json.loads((FOLDER / "variable_paths.json").read_text())


@pytest.mark.parametrize("name", ["transformer_xl", "segment_cache_transformer"])
def test_file_of_0_2_loads_and_answers_as_it_did(name, tmp_path):
    model = keras.saving.load_model(FOLDER / f"{name}.keras", safe_mode=True)
    inputs, expected = ARRAYS[f"{name}_inputs"], ARRAYS[f"{name}_outputs"]
    # Eager calls: a trace of predict costs more than these small models' work.
    np.testing.assert_allclose(model(inputs), expected, atol=1e-5)
    # The variables keep their paths too (a LayoutMap, a SavedModel and an
    # optimizer name them by these), not only the file's layout.
    assert [variable.path for variable in model.weights] == PATHS[name]
    # Saved by this release, it loads into the same numbers.
    model.save(tmp_path / "again.keras")
    again = keras.saving.load_model(tmp_path / "again.keras", safe_mode=True)
    np.testing.assert_allclose(again(inputs), expected, atol=1e-5)
