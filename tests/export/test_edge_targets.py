"""Edge targets: fully integer int8 (int8 inputs, outputs and states), the
accelerator target (static shapes, no loop), files for an older runtime run
in tflite-runtime 2.14, tensor names for runtimes without signatures, and
the streaming runner that allocates once."""

import os
import pathlib
import re

import keras
import numpy as np
import pytest

from keras_relrec.export import Streamer
from keras_relrec.export import export_tflite
from keras_relrec.export import micro
from keras_relrec.export import run_sequence
from keras_relrec.export import run_streaming
from keras_relrec.export.export_error import ExportError
from keras_relrec.export.runtime import tflite_inspect
from keras_relrec.export.tflite import accelerator
from keras_relrec.export.tflite import quantization
from keras_relrec.layers import CoupledLSTMCell
from keras_relrec.layers import PeepholeLSTMCell
from tests.export import old_runtime_worker

ROOT = pathlib.Path(__file__).parents[2]
FEATURES, CLASSES = 6, 5


def speaker_model(units=8):
    """The deploy tutorial's architecture: Masking, Normalization, two
    recurrent layers of our cells and a softmax."""
    keras.utils.set_random_seed(1)
    inputs = keras.Input((None, FEATURES), name="frames")
    h = keras.layers.Masking(0.0)(inputs)
    h = keras.layers.Normalization(mean=np.full(FEATURES, 0.1), variance=np.full(FEATURES, 2.0))(h)
    h = keras.layers.RNN(PeepholeLSTMCell(units), return_sequences=True)(h)
    h = keras.layers.RNN(CoupledLSTMCell(units, use_peepholes=True))(h)
    # Weights of a trained model's spread: clear answers, not near ties.
    head = keras.layers.Dense(CLASSES, activation="softmax", kernel_initializer=keras.initializers.RandomNormal(0, 2))
    return keras.Model(inputs, head(h))


def stream(length, batch=1, seed=0):
    return np.random.default_rng(seed).normal(size=(batch, length, FEATURES)).astype("float32")


def keras_per_step(model, x):
    """The model's output after each frame: the model on every prefix."""
    return np.stack([model.predict(x[:, : t + 1], verbose=0) for t in range(x.shape[1])], 1)


@pytest.fixture(scope="module")
def integer_files(tmp_path_factory):
    """The speaker model as fully integer step files for LiteRT and TFLM,
    calibrated on streams of the kind it is fed."""
    folder = tmp_path_factory.mktemp("int8")
    model = speaker_model()
    calibration = stream(20, batch=32, seed=1)
    summaries = {
        target: export_tflite(model, folder / f"{target}.tflite", streaming=True, quantize="int8",
                              representative_data=calibration, target=target)
        for target in ("micro", "accelerator")
    }
    float_path = folder / "float.tflite"
    export_tflite(model, float_path, streaming=True, target="micro")
    return model, folder, summaries, float_path


def _damaged(sidecar, how):
    """`how` done to the `.initial_state.npz` at `sidecar` (its fingerprint
    kept where the archive stays readable)."""
    if how == "random bytes":
        sidecar.write_bytes(np.random.default_rng(0).bytes(300))
        return
    if how == "truncated":
        sidecar.write_bytes(sidecar.read_bytes()[:200])
        return
    entries = dict(np.load(sidecar))
    first = next(name for name in entries if not name.startswith("_"))
    if how == "a state missing":
        del entries[first]
    elif how == "a state too many":
        entries["spare_state"] = entries[first]
    else:  # a NaN state
        entries[first] = np.full(entries[first].shape, np.nan, entries[first].dtype)
    np.savez(sidecar, **entries)


@pytest.mark.parametrize("how", ["random bytes", "truncated", "a state missing", "a state too many",
                                 "a NaN state"])
def test_a_damaged_initial_state_file_is_named_by_both_runners(integer_files, tmp_path, how):
    """Both runners read the file beside a fixed-batch step through one
    reader: a file they cannot use is a one-line ValueError that names it
    and what is wrong, before any frame runs."""
    _, _, _, float_path = integer_files
    path = tmp_path / "float.tflite"
    path.write_bytes(float_path.read_bytes())
    sidecar = micro.initial_state_path(path)
    sidecar.write_bytes(micro.initial_state_path(float_path).read_bytes())
    _damaged(sidecar, how)
    problem = {"random bytes": "is not a readable .npz", "truncated": "is not a readable .npz",
               "a state missing": "it lacks", "a state too many": r"it holds \['spare_state'\], which the step",
               "a NaN state": "holds a state that is not finite"}[how]
    for runner in (Streamer, micro.MicroStreamer):
        with pytest.raises(ValueError, match=re.escape(str(sidecar)) + ".*" + problem) as caught:
            runner(path)
        assert "\n" not in str(caught.value), runner


def test_micro_streamer_names_the_batch_and_frames_it_was_given(integer_files):
    _, _, _, float_path = integer_files
    streamer = micro.MicroStreamer(float_path)
    with pytest.raises(ValueError, match=re.escape(
            f"Input 'frames' must have shape (1, time, {FEATURES}): the file's step takes a batch of 1 and frames "
            f"of shape ({FEATURES},); received shape (2, 7, {FEATURES}); feed 1 stream(s) at a time, or export "
            "with batch_size=2.")):
        streamer.run(stream(7, batch=2))
    with pytest.raises(ValueError, match=re.escape(f"received shape (1, 7, {FEATURES + 1}).")):
        streamer.run(np.zeros((1, 7, FEATURES + 1), "float32"))


@pytest.mark.parametrize("how", ["random bytes", "empty", "truncated"])
def test_every_runner_names_a_tflite_file_it_cannot_read(integer_files, tmp_path, how):
    """The runners of `.tflite` files (LiteRT's and TFLM's, by frame and by
    sequence): a file that does not read is a one-line ValueError naming
    it, not the runtime's own message."""
    _, _, _, float_path = integer_files
    path = tmp_path / "float.tflite"
    content = float_path.read_bytes()
    path.write_bytes({"random bytes": np.random.default_rng(0).bytes(len(content)), "empty": b"",
                      "truncated": content[: len(content) // 2]}[how])
    x = stream(3)
    runners = {"Streamer": lambda: Streamer(path), "run_streaming": lambda: run_streaming(path, x),
               "run_sequence": lambda: run_sequence(path, x), "MicroStreamer": lambda: micro.MicroStreamer(path),
               "micro.run_sequence": lambda: micro.run_sequence(path, x)}
    for name, runner in runners.items():
        with pytest.raises(ValueError, match=re.escape(f"{path} is not a readable .tflite file: ")) as caught:
            runner()
        assert "\n" not in str(caught.value), name


def test_streamer_refuses_a_batch_of_no_streams(integer_files):
    _, _, _, float_path = integer_files
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match=rf"Argument `batch_size` must be a positive integer; received "
                                             rf"batch_size={re.escape(repr(bad))}"):
            Streamer(float_path, batch_size=bad)


def test_fully_integer_step_keeps_int8_states(integer_files):
    model, folder, summaries, _ = integer_files
    summary = summaries["micro"]
    step = summary["signatures"]["step"]
    assert {dtype for side in step.values() for _, dtype in side.values()} == {"int8"}
    # Every input and output has its scale and zero point; a state's input
    # and output agree, so the integers go straight back in.
    params = summary["quantization"]["step"]
    assert set(params["inputs"]) == set(step["inputs"]) and set(params["outputs"]) == set(step["outputs"])
    for name in params["inputs"]:
        if name != "frames":
            assert params["inputs"][name] == params["outputs"][name], name
    assert summaries["accelerator"]["accelerator"]["integer_only"]
    # The initial states beside the file are integers: the zero point.
    states, _ = micro.read_initial_state(folder / "micro.tflite")
    for name, value in states.items():
        assert value.dtype == np.int8 and np.all(value == params["inputs"][name]["zero_point"]), name
    # In LiteRT and in TFLM, frame by frame: the states stay int8, the
    # probabilities within 0.05 of Keras' (float32) after every frame, and
    # both runtimes compute the same integers (to two steps of the scale:
    # their kernels round differently).
    x = stream(24, seed=2)
    want = keras_per_step(model, x)
    streamer = Streamer(folder / "micro.tflite")
    lite = streamer.run(x)
    assert all(v.dtype == np.int8 for v in streamer.states.values())
    tflm = micro.MicroStreamer(folder / "micro.tflite", arena_size=4 * summary["micro"]["arena_bytes"]).run(x)
    assert all(tflm[name].dtype == np.int8 for name in states)
    np.testing.assert_allclose(lite, want, atol=0.05)
    np.testing.assert_allclose(tflm["output"], lite, atol=params["outputs"]["output"]["scale"] * 2.01)


def test_int8_drift_over_1000_steps(integer_files):
    """Fed 1,000 frames without a reset, the int8 states do not drift away
    from float32's: the error of the last 100 frames stays within that of a
    short stream's bound and the answers agree."""
    _, folder, _, float_path = integer_files
    x = stream(1000, seed=3)
    reference = Streamer(float_path).run(x)
    int8 = Streamer(folder / "micro.tflite").run(x)
    error = np.abs(int8 - reference).max(-1)[0]
    assert error.max() < 0.05, error.max()
    assert error[-100:].mean() < 2 * error[:100].mean() + 0.005, (error[:100].mean(), error[-100:].mean())
    # The same answer wherever float32's is clear (the top probability
    # leads by 0.05: random weights leave near ties).
    top = np.sort(reference, -1)
    clear = top[..., -1] - top[..., -2] > 0.05
    assert (int8.argmax(-1) == reference.argmax(-1))[clear].mean() > 0.95


@pytest.fixture(scope="module")
def int16x8_file(tmp_path_factory, integer_files):
    """The speaker model's step in TFLite's 16x8 mode for TFLM: int16
    frames, probabilities and states, int8 weights."""
    model = integer_files[0]
    path = tmp_path_factory.mktemp("int16x8") / "micro.tflite"
    summary = export_tflite(model, path, streaming=True, quantize="int16x8",
                            representative_data=stream(20, batch=32, seed=1), target="micro")
    return path, summary


def test_16x8_step_keeps_int16_states_and_follows_keras(integer_files, int16x8_file):
    """Every input, output and state is int16 (symmetric: zero point 0); in
    LiteRT and in TFLM, frame by frame and across a padded frame, the
    probabilities stay within 0.002 of Keras' (int8: 0.05)."""
    model = integer_files[0]
    path, summary = int16x8_file
    step = summary["signatures"]["step"]
    assert {dtype for side in step.values() for _, dtype in side.values()} == {"int16"}
    params = summary["quantization"]["step"]
    assert all(q["zero_point"] == 0 for side in params.values() for q in side.values())
    for name in params["inputs"]:
        if name != "frames":  # the same parameters, to the converter's rounding
            assert params["inputs"][name]["scale"] == pytest.approx(params["outputs"][name]["scale"], rel=1e-6), name
    states, _ = micro.read_initial_state(path)
    assert all(value.dtype == np.int16 and not value.any() for value in states.values())
    x = stream(24, seed=2)
    x[:, 5] = 0.0  # a padded frame keeps the states
    want = keras_per_step(model, x)
    lite = Streamer(path).run(x)
    tflm = micro.MicroStreamer(path, arena_size=4 * summary["micro"]["arena_bytes"]).run(x)
    assert all(tflm[name].dtype == np.int16 for name in states)
    np.testing.assert_allclose(lite, want, atol=0.002)
    np.testing.assert_allclose(tflm["output"], lite, atol=params["outputs"]["output"]["scale"] * 2.01)


def test_16x8_drifts_less_than_int8_over_1000_steps(integer_files, int16x8_file):
    """Fed 1,000 frames without a reset, the 16x8 file stays closer to
    float32 than the int8 file, and gives float32's answer wherever that is
    clear."""
    _, folder, _, float_path = integer_files
    x = stream(1000, seed=3)
    reference = Streamer(float_path).run(x)
    outputs = {name: Streamer(path).run(x) for name, path in (("int8", folder / "micro.tflite"),
                                                              ("16x8", int16x8_file[0]))}
    errors = {name: np.abs(output - reference).max(-1)[0] for name, output in outputs.items()}
    assert errors["16x8"].max() < 0.01 and errors["16x8"].mean() < errors["int8"].mean() / 5, errors
    top = np.sort(reference, -1)
    clear = top[..., -1] - top[..., -2] > 0.05
    assert (outputs["16x8"].argmax(-1) == reference.argmax(-1))[clear].mean() > 0.99


def test_16x8_of_a_recurrent_loop_says_to_export_the_step(tmp_path):
    with pytest.raises(ExportError, match=r"16x8 calibrator records no ranges inside a recurrent loop \(WHILE\): "
                                          r"export streaming=True"):
        export_tflite(speaker_model(), tmp_path / "loop.tflite", quantize="int16x8",
                      representative_data=stream(8, batch=4, seed=1))


def test_16x8_masks_are_numbers(tmp_path):
    """16x8 quantizes no comparison and TFLM runs no int16 REDUCE_MAX: the
    mask of padding is computed as a number (sums and tanhs) and the states
    kept by arithmetic; the float32 file keeps its comparisons."""
    model = speaker_model()
    calibration = stream(8, batch=4, seed=1)
    ops16 = export_tflite(model, tmp_path / "a.tflite", streaming=True, quantize="int16x8",
                          representative_data=calibration, target="micro")["ops"]
    assert not {"GREATER", "REDUCE_MAX", "SELECT_V2", "NOT_EQUAL"} & set(ops16), ops16
    assert "TANH" in ops16
    ops32 = export_tflite(model, tmp_path / "b.tflite", streaming=True, target="micro")["ops"]
    assert "REDUCE_MAX" in ops32


def test_streamer_gives_what_the_signature_runner_gives(tmp_path):
    model = speaker_model()
    path = tmp_path / "step.tflite"
    export_tflite(model, path, streaming=True)
    x = stream(9, batch=2)
    streamer = Streamer(path, batch_size=2)
    np.testing.assert_allclose(streamer.run(x), run_streaming(path, x)["output"], atol=1e-6)
    np.testing.assert_allclose(streamer.run(x)[:, -1], model.predict(np.concatenate([x, x], 1), verbose=0),
                               atol=1e-5)
    streamer.reset()
    np.testing.assert_allclose(streamer.run(x)[:, -1], model.predict(x, verbose=0), atol=1e-5)
    with pytest.raises(ValueError, match="Input 'frames' must have shape"):
        streamer(x[:1, 0])
    fixed = tmp_path / "fixed.tflite"
    export_tflite(model, fixed, streaming=True, target="micro")
    with pytest.raises(ValueError, match="batch is fixed at 1; received batch_size=2"):
        Streamer(fixed, batch_size=2)


def test_tensors_are_named_for_runtimes_without_signatures(tmp_path):
    path = tmp_path / "step.tflite"
    export_tflite(speaker_model(), path, streaming=True, target="micro")
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=str(path))
    order = micro.io_order(path.read_bytes())
    # Positions as io_order says, each tensor named <signature>/<name>.
    names = [detail["name"] for detail in interpreter.get_input_details()]
    assert names == [f"step/{name}" for name in order["inputs"]]
    outputs = [detail["name"] for detail in interpreter.get_output_details()]
    assert "step/output" in outputs and not any("StatefulPartitionedCall" in n for n in outputs), outputs


def test_accelerator_target_unrolls_the_loop(tmp_path):
    model = speaker_model()
    path = tmp_path / "gpu.tflite"
    summary = export_tflite(model, path, target="accelerator", length=12)
    assert "WHILE" not in summary["ops"] and summary["subgraphs"] == 1
    assert summary["signatures"]["serve"]["inputs"]["frames"][0] == (1, 12, FEATURES)
    assert summary["accelerator"]["ready"], summary["accelerator"]["reasons"]
    x = stream(12)
    x[:, 4] = 0.0  # a padded frame
    np.testing.assert_allclose(run_sequence(path, x)["output"], model.predict(x, verbose=0), atol=1e-5)
    # Fully integer: int8 in, int8 out, every op on integers, or (the
    # converter now and then keeps a step's SPLIT in float) a refusal.
    int8 = tmp_path / "npu.tflite"
    try:
        summary = export_tflite(model, int8, target="accelerator", length=12, quantize="int8",
                                representative_data=stream(12, batch=32, seed=1))
    except ExportError as error:
        # Named: the layer, and a tensor.
        assert re.search(r"layer '\w+' \(\w+\) keeps float tensors in the integer file \(e\.g\. '", str(error)), error
        return
    assert summary["accelerator"]["integer_only"]
    q = summary["quantization"]["serve"]
    frame_q, output_q = ((q[side][name]["scale"], q[side][name]["zero_point"])
                         for side, name in (("inputs", "frames"), ("outputs", "output")))
    probabilities = quantization.dequantize(run_sequence(int8, quantization.quantize(x, frame_q))["output"], output_q)
    np.testing.assert_allclose(probabilities, model.predict(x, verbose=0), atol=0.05)


def test_inspect_says_why_a_phone_file_is_not_for_a_delegate(tmp_path):
    """The default target's file keeps its loop and dynamic shapes: the
    delegate verdict names both."""
    path = tmp_path / "litert.tflite"
    export_tflite(speaker_model(), path)
    verdict = accelerator.compatibility(path.read_bytes())
    assert not verdict["ready"] and not verdict["integer_only"]
    assert verdict["reasons"][0] == "control flow (WHILE), which no delegate runs"
    assert verdict["reasons"][1].startswith("dynamic shapes")
    line = tflite_inspect.runtime_verdicts(path.read_bytes(), accelerator=verdict)["GPU / NPU delegate"]
    assert "WHILE" in line and "dynamic shapes" in line


def old_runtime(path, signature, inputs):
    """Runs `path` in tflite-runtime 2.14 (`make check` installs it in its own
    environment): {output: array} or {"error": what the runtime said}."""
    python = os.environ.get("OLD_RUNTIME_PYTHON")
    if python is None:
        pytest.skip("OLD_RUNTIME_PYTHON is unset: `make check` sets it to tflite-runtime 2.14's environment")
    return old_runtime_worker.run_in(python, path, signature, inputs)


def test_runtime_option_keeps_a_file_within_tflite_runtime_2_14(tmp_path):
    model = speaker_model(units=48)  # dense kernels large enough to be quantized
    x = stream(10, batch=2)
    new, old = tmp_path / "new.tflite", tmp_path / "old.tflite"
    summary = export_tflite(model, new, quantize="dynamic_int8")
    # Per-channel int8 weights need FULLY_CONNECTED version 12 (2.17).
    assert summary["op_versions"]["FULLY_CONNECTED"] == 12 and summary["min_runtime"] == "2.17.0"
    assert "needs 2.17.0" in tflite_inspect.runtime_verdicts(new.read_bytes())["tflite-runtime 2.14"]
    assert "FULLY_CONNECTED" in old_runtime(new, "serve", {"frames": x})["error"]
    summary = export_tflite(model, old, quantize="dynamic_int8", runtime="2.14")
    assert tflite_inspect.version_tuple(summary["min_runtime"]) <= (2, 14, 0)
    got = old_runtime(old, "serve", {"frames": x})
    np.testing.assert_allclose(got["output"], run_sequence(old, x)["output"], atol=1e-5)
    np.testing.assert_allclose(got["output"], model.predict(x, verbose=0), atol=0.02)
    with pytest.raises(ValueError, match="runtime"):
        export_tflite(model, old, runtime="latest")


SHIPPED = sorted(ROOT.glob("savedmodels/*/*.tflite"))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_shipped_files_in_tflite_runtime_2_14(path, tmp_path):
    """Each shipped file runs in tflite-runtime 2.14 and gives LiteRT's
    outputs when its op versions say it does, and fails to load there
    naming an op when they say it needs a newer runtime."""
    from ai_edge_litert.interpreter import Interpreter

    content = path.read_bytes()
    signature = "step" if "step" in Interpreter(model_content=content).get_signature_list() else "serve"
    runner = Interpreter(model_content=content).get_signature_runner(signature)
    # The model's own test sequences where it ships some, else random inputs.
    data = {k: v for npz in path.parent.glob("*.npz") for k, v in np.load(npz).items()} if signature == "serve" else {}
    rng = np.random.default_rng(0)
    inputs = {}
    for name, detail in runner.get_input_details().items():
        shape = [2 if d < 0 and k == 0 else 32 if d < 0 else d for k, d in enumerate(detail["shape_signature"])]
        if name in data:
            value = data[name][:2].reshape((2,) + data[name].shape[1:] + (1,) * (len(shape) - data[name].ndim))
        elif np.issubdtype(detail["dtype"], np.integer):
            value = rng.integers(0, 4, shape)
        else:
            value = rng.normal(size=shape)
        inputs[name] = value.astype(detail["dtype"])
    copy = tmp_path / path.name  # the worker writes beside the file
    copy.write_bytes(content)
    got = old_runtime(copy, signature, inputs)
    if tflite_inspect.runs_on(content, "2.14"):
        want = runner(**inputs)
        assert "error" not in got, got
        for name, value in want.items():
            np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-5, err_msg=name)
    else:
        assert "Didn't find op for builtin opcode" in got["error"], got
