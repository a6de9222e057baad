"""The README's quick start runs as written."""

import os
import pathlib
import re

import numpy as np

ROOT = pathlib.Path(__file__).parent.parent


def test_readme_quick_start_runs(tmp_path, monkeypatch):
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README has no python block"
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(blocks[0], "README.md", "exec"), namespace)
    assert os.path.isfile("model.keras")
    assert os.path.isfile(os.path.join("model_savedmodel", "saved_model.pb"))
    x = namespace["x"]
    diff = abs(namespace["reloaded"].predict(x, verbose=0) - namespace["model"].predict(x, verbose=0))
    assert diff.max() <= 1e-5


def test_readme_transformer_xl_example_runs():
    """The Transformer-XL example: two calls going on from the states give
    the outputs of one call over both."""
    text = (ROOT / "README.md").read_text()
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", text, flags=re.S) if "TransformerXL(" in b]
    namespace = {}
    exec(compile(block, "README.md", "exec"), namespace)
    whole, *_ = namespace["backbone"](namespace["tokens"])
    joined = np.concatenate([namespace["outputs"], namespace["more"]], axis=1)
    np.testing.assert_allclose(joined, whole, atol=1e-5)
