"""Every tutorial runs in its tiny configuration, so none can rot."""

import importlib.util
import pathlib

ROOT = pathlib.Path(__file__).parent.parent


def load_tutorial(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tutorials" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_timing_with_peepholes_tiny(tmp_path):
    tutorial = load_tutorial("timing_with_peepholes")
    results = tutorial.main(["--tiny", "--output-dir", str(tmp_path)])
    assert [r["model"] for r in results] == list(tutorial.MODELS)
    for r in results:
        assert r["mae_steps"] >= 0.0 and 0.0 <= r["exact"] <= 1.0
    # The coupled cell has three gate blocks to the LSTM's four.
    params = {r["model"]: r["params"] for r in results}
    assert params["CoupledLSTMCell + peepholes"] < params["LSTM"] < params["PeepholeLSTMCell"]
    assert (tmp_path / "timing_learning_curves.png").stat().st_size > 1000
    assert "| PeepholeLSTMCell |" in (tmp_path / "timing_results.md").read_text()
