"""The `keras-relrec` command: export, inspect, and one-line failures."""

import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_relrec_cli as cli
from keras_relrec.export.runtime import tflite_inspect
from keras_relrec.layers import CoupledLSTMCell
from tests.export.test_tflite_export import Erfinv


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    inputs = keras.Input((None, 3), name="sequence")
    h = keras.layers.RNN(CoupledLSTMCell(4, use_peepholes=True), return_sequences=True)(inputs)
    model = keras.Model(inputs, keras.layers.Dense(2)(h))
    model.save(folder / "ok.keras")
    pooled = keras.Model(inputs, keras.layers.GlobalAveragePooling1D(name="pool")(h))
    pooled.save(folder / "pooled.keras")
    odd = keras.Model(inputs, Erfinv(name="odd_math")(h))
    odd.save(folder / "odd.keras")
    doubled = keras.Model(inputs, keras.layers.Lambda(lambda x: 2.0 * x, name="double")(h))
    doubled.save(folder / "lambda.keras")
    a, b = keras.Input((None, 3), name="left"), keras.Input((None, 2), name="right")
    joined = keras.layers.Concatenate()([a, b])
    two = keras.Model([a, b], keras.layers.LSTM(4)(joined))
    two.save(folder / "two_inputs.keras")
    (folder / "a_file").write_text("not a folder")
    return folder


def run(argv, capsys):
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_export_and_inspect(saved, capsys):
    out_path = saved / "ok.tflite"
    code, out, err = run(["export", str(saved / "ok.keras"), "--tflite", str(out_path), "--streaming"], capsys)
    assert code == 0, err
    assert "signatures: step, initial_state" in out or "signatures: initial_state, step" in out
    code, out, err = run(["inspect", str(out_path)], capsys)
    assert code == 0, err
    assert "signature 'step':" in out and "signature 'initial_state':" in out
    assert "WHILE" not in out  # one step: no loop
    assert "CUSTOM" not in out
    assert "_state_0" in out and "_state_1" in out and "FULLY_CONNECTED" in out


def calibration_file(folder, model):
    """A .npy array for the one-input model, a .npz by input name for the other."""
    rng = np.random.default_rng(1)
    if model == "ok.keras":
        np.save(folder / "calibration.npy", rng.normal(size=(8, 5, 3)).astype("float32"))
        return folder / "calibration.npy"
    np.savez(folder / "calibration.npz", left=rng.normal(size=(6, 5, 3)).astype("float32"),
             right=rng.normal(size=(6, 5, 2)).astype("float32"))
    return folder / "calibration.npz"


@pytest.mark.parametrize("model, quantize", [("ok.keras", "int8"), ("two_inputs.keras", "int8"),
                                             ("ok.keras", "int16x8")])
def test_export_quantized_with_calibration(saved, capsys, tmp_path, model, quantize):
    out_path = tmp_path / f"{quantize}.tflite"
    # 16x8 quantizes a recurrent model's step (its calibrator sees no loop).
    streaming = ["--streaming"] if quantize == "int16x8" else []
    code, out, err = run(
        ["export", str(saved / model), "--tflite", str(out_path), "--quantize", quantize,
         "--calibration", str(calibration_file(tmp_path, model)), *streaming],
        capsys,
    )
    assert code == 0, err
    assert out_path.stat().st_size > 0


@pytest.mark.parametrize(
    "argv, reason",
    [
        (["export", "missing.keras", "--tflite", "x.tflite"], "no such file: missing.keras"),
        (["inspect", "missing.tflite"], "no such file: missing.tflite"),
        (["export", "{saved}/pooled.keras", "--tflite", "{saved}/x.tflite", "--streaming"], "layer 'pool'"),
        (["export", "{saved}/ok.keras", "--tflite", "{saved}/x.tflite", "--quantize", "int8"], "--calibration"),
        (["export", "{saved}/ok.keras", "--tflite", "{saved}/x.tflite", "--quantize", "int16x8"], "--calibration"),
        (["export", "{saved}/ok.keras"], "nothing to do"),
        (["export", "{saved}/ok.keras", "--tflite", "{saved}/x.tflite", "--float-io"],
         "--float-io applies with --quantize int8 or int16x8 alone"),
        (["export", "{saved}/ok.keras", "--tflite", "{saved}/x.tflite", "--float-io", "--quantize", "float16"],
         "--float-io applies with --quantize int8 or int16x8 alone"),
        (["export", "{saved}/odd.keras", "--tflite", "{saved}/x.tflite"], "layer 'odd_math' (Erfinv)"),
        (["inspect", "{saved}/ok.keras"], "not a readable .tflite file"),
        (["export", "{saved}/ok.keras", "--saved-model", "{saved}/a_file/sm"], "cannot write the SavedModel"),
        (["export", "{saved}/ok.keras", "--tflite", "{saved}/a_file/x.tflite"], "Not a directory"),
        (["export", "{saved}/lambda.keras", "--tflite", "{saved}/x.tflite"],
         "cannot load {saved}/lambda.keras in safe mode: it holds Python code (such as a Lambda layer's function), "
         "which Keras runs only with safe_mode=False; if you trust the file, give --unsafe"),
    ],
)
def test_failures_exit_non_zero_with_one_line(saved, capsys, argv, reason):
    argv, reason = [a.format(saved=saved) for a in argv], reason.format(saved=saved)
    code, out, err = run(argv, capsys)
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("keras-relrec: error: ")
    assert reason in err


def test_a_saved_model_over_a_file_is_refused_untouched(saved, capsys, tmp_path):
    """A SavedModel is a folder: an existing file at the path, or a link to
    one, stays as it was."""
    mine = tmp_path / "mine.keras"
    mine.write_bytes(b"keep")
    (tmp_path / "link").symlink_to(mine)
    for path in (mine, tmp_path / "link"):
        code, out, err = run(["export", str(saved / "ok.keras"), "--saved-model", str(path)], capsys)
        assert code == 1 and out == ""
        assert err == (f"keras-relrec: error: Argument `path` must be a new folder, an empty one or an earlier "
                       f"SavedModel, which the export replaces whole; received path={str(path)!r}, an existing file "
                       "(a SavedModel is a folder). Give a folder of its own.\n")
    assert mine.read_bytes() == b"keep" and (tmp_path / "link").is_symlink()
    assert sorted(os.listdir(tmp_path)) == ["link", "mine.keras"]


def test_unsafe_loads_a_file_with_python_code_and_warns(saved, capsys, tmp_path):
    out_path = tmp_path / "lambda.tflite"
    code, out, err = run(["export", str(saved / "lambda.keras"), "--tflite", str(out_path), "--unsafe"], capsys)
    assert code == 0, err
    assert err == (f"keras-relrec: warning: --unsafe loads {saved / 'lambda.keras'} with safe_mode=False, which "
                   "runs any Python code the file holds; give it only files you trust\n")
    assert out.startswith(f"wrote {out_path}")


def test_console_script_is_installed(saved):
    script = pathlib.Path(sys.executable).parent / "keras-relrec"
    result = subprocess.run([str(script), "inspect", str(saved / "nothing.tflite")],
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr == f"keras-relrec: error: no such file: {saved / 'nothing.tflite'}\n"


def test_a_command_prints_no_tensorflow_log_lines(saved, tmp_path):
    script = pathlib.Path(sys.executable).parent / "keras-relrec"
    result = subprocess.run([str(script), "export", str(saved / "ok.keras"), "--tflite", str(tmp_path / "x.tflite")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.startswith("wrote ")


def test_help_and_argument_errors_do_not_import_keras():
    code = (
        "import sys, keras_relrec_cli\n"
        "try:\n    keras_relrec_cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "assert keras_relrec_cli.main(['export', 'missing.keras', '--tflite', 'x.tflite']) == 1\n"
        "print(sorted(m for m in ('keras', 'tensorflow') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_a_cut_or_empty_file_and_a_length_without_serve_are_one_line_saying_so(saved, capsys, tmp_path):
    data = (saved / "ok.keras").read_bytes()
    (tmp_path / "cut.keras").write_bytes(data[: len(data) // 2])
    (tmp_path / "empty.tflite").write_bytes(b"")
    for argv, reason in [
        (["export", f"{tmp_path}/cut.keras", "--tflite", f"{tmp_path}/x.tflite"],
         f"cannot load {tmp_path}/cut.keras: it is not a complete .keras archive"),
        (["inspect", f"{tmp_path}/empty.tflite"],
         f"{tmp_path}/empty.tflite is not a readable .tflite file: it is empty, not a TFLite flatbuffer"),
        (["export", f"{saved}/ok.keras", "--tflite", f"{tmp_path}/x.tflite", "--streaming", "--length", "5"],
         "streaming=True does not export"),
    ]:
        code, out, err = run(argv, capsys)
        assert code == 1
        assert err.count("\n") == 1 and reason in err, err


def test_length_fixes_the_serve_length(saved, capsys, tmp_path):
    code, out, err = run(["export", str(saved / "ok.keras"), "--tflite", str(tmp_path / "five.tflite"),
                          "--length", "5"], capsys)
    assert code == 0, err
    summary = tflite_inspect.summarize(tmp_path / "five.tflite")
    assert summary["signatures"]["serve"]["inputs"]["sequence"][0] == (-1, 5, 3)
