"""Write the `.keras` files of keras_relrec 0.2 that later releases must load.

Run once, from the repository root, at the 0.2 release (the tests only read
what it wrote; a folder as argument writes there instead):

    KERAS_BACKEND=tensorflow PYTHONPATH=. .venv/bin/python tests/goldens/v0_2/make_v0_2_files.py

It saves one small functional model around `TransformerXL` (token ids, tied
relative biases, `same_length`, `clamp_len`) and one around
`SegmentCacheTransformer` (features, the causal query, the MLP summary,
`explore_recall`, so that its seed generator is saved too), each with
weights drawn from a fixed seed and biases that are not zero, and the
inputs and outputs of each in `outputs.npz`, the paths of its variables in
`variable_paths.json`. `tests/layers/transformer_xl/
test_files_of_0_2.py` loads the files and compares.
"""

import json
import pathlib
import sys

import keras
import numpy as np

import keras_relrec

FOLDER = pathlib.Path(__file__).parent


def models():
    keras.utils.set_random_seed(0)
    tokens = keras.Input((None,), dtype="int32")
    backbone = keras_relrec.layers.TransformerXL(
        num_layers=2, num_heads=2, head_size=3, hidden_dim=6, intermediate_dim=8, segment_len=3, mem_len=4,
        vocabulary_size=11, clamp_len=5, same_length=True, tie_relative_biases=True,
        bias_initializer="random_normal", name="transformer_xl")
    yield "transformer_xl", keras.Model(tokens, keras.layers.Dense(11)(backbone(tokens))), \
        np.random.default_rng(1).integers(0, 11, (2, 10)).astype("int32")
    features = keras.Input((None, 6))
    cache = keras_relrec.layers.SegmentCacheTransformer(
        num_layers=2, num_heads=2, head_size=3, hidden_dim=6, intermediate_dim=8, segment_len=3, num_slots=3,
        top_k=2, summary="mlp", explore_recall=True, seed=3, bias_initializer="random_normal",
        name="segment_cache_transformer")
    yield "segment_cache_transformer", keras.Model(features, cache(features)), \
        np.random.default_rng(2).normal(size=(2, 14, 6)).astype("float32")


def main(folder=FOLDER):
    arrays, paths = {}, {}
    for name, model, inputs in models():
        model.save(folder / f"{name}.keras")
        arrays[f"{name}_inputs"] = inputs
        arrays[f"{name}_outputs"] = model.predict(inputs, verbose=0)
        paths[name] = [variable.path for variable in model.weights]
    np.savez(folder / "outputs.npz", **arrays)
    # The variables' paths: what a LayoutMap, a SavedModel or an optimizer
    # names them by.
    (folder / "variable_paths.json").write_text(json.dumps(paths, indent=1) + "\n")
    print("keras_relrec", keras_relrec.__version__, "wrote", sorted(arrays), "and the variable paths")


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else FOLDER)
