"""export_tflite(target="micro"): files that TensorFlow Lite for
Microcontrollers runs, run in the tflite-micro interpreter (the same C++
runtime as on a chip) and compared with Keras."""

import re
import subprocess
import sys

import keras
import numpy as np
import pytest
from tflite_micro.python.tflite_micro import runtime

from keras_relrec.export import export_tflite
from keras_relrec.export import micro
from keras_relrec.export import run_sequence
from keras_relrec.export.export_error import ExportError
from keras_relrec.layers import CoupledLSTMCell
from keras_relrec.layers import PeepholeLSTMCell
from keras_relrec.layers import RelationalMemoryCell
from keras_relrec.layers import TransformerXL

ATOL = 1e-5
# The contract suite runs every cell of ours in TFLM behind a mask; here
# Keras' own cells, and a relational memory of the size a microcontroller
# holds (21 KB), in a model with a head, and a stream that goes on.
CELLS = {
    "LSTMCell": lambda: keras.layers.LSTMCell(6),
    "GRUCell": lambda: keras.layers.GRUCell(6),
    "RelationalMemoryCell": lambda: RelationalMemoryCell(mem_slots=2, head_size=4, num_heads=2),
}


def masked_model(cell, length=None):
    """Masking → RNN(cell) → Dense: a padded frame keeps the states."""
    inputs = keras.Input((length, 3), name="sequence")
    hidden = keras.layers.RNN(cell, return_sequences=True)(keras.layers.Masking(0.0)(inputs))
    return keras.Model(inputs, keras.layers.Dense(2, name="head")(hidden))


def frames(batch=1, length=12, seed=0):
    x = np.random.default_rng(seed).normal(size=(batch, length, 3)).astype("float32")
    x[:, 5] = 0.0  # a padded frame
    return x


@pytest.mark.parametrize("name", CELLS)
def test_the_step_runs_in_tflite_micro_as_in_keras(name, tmp_path):
    model = masked_model(CELLS[name]())
    path = tmp_path / "step.tflite"
    summary = export_tflite(model, path, streaming=True, target="micro")
    # One subgraph, the step, at batch 1: what a microcontroller build runs.
    assert summary["subgraphs"] == 1 and list(summary["signatures"]) == ["step"]
    shapes = [shape for side in summary["signatures"]["step"].values() for shape, _ in side.values()]
    assert all(shape[0] == 1 for shape in shapes), shapes
    assert "REDUCE_ANY" not in summary["ops"]  # the Masking layer's mask, as a max
    states, _ = micro.read_initial_state(path)
    inputs = micro.io_order(path.read_bytes())["inputs"]
    assert set(states) == set(inputs) - {"sequence"} and all(not v.any() for v in states.values())
    assert summary["micro"]["arena_bytes"] > 0
    x = frames()
    # The arena the export measured (the streamer's default measures it again).
    streamer = micro.MicroStreamer(path, arena_size=4 * summary["micro"]["arena_bytes"])
    result = streamer.run(x)
    np.testing.assert_allclose(result["output"], model.predict(x, verbose=0), atol=ATOL)
    # A stream goes on from the states a call returned.
    first = streamer.run(x[:, :7])
    rest = streamer.run(x[:, 7:], states={k: v for k, v in first.items() if k != "output"})
    np.testing.assert_allclose(np.concatenate([first["output"], rest["output"]], 1), result["output"], atol=ATOL)


def test_sequence_mode_runs_at_a_fixed_batch_and_length(tmp_path):
    model = masked_model(PeepholeLSTMCell(6))
    path = tmp_path / "serve.tflite"
    summary = export_tflite(model, path, target="micro", batch_size=2, length=12)
    assert list(summary["signatures"]) == ["serve"]
    assert summary["signatures"]["serve"]["inputs"]["sequence"][0] == (2, 12, 3)
    x = frames(batch=2)
    np.testing.assert_allclose(micro.run_sequence(path, x)["output"], model.predict(x, verbose=0), atol=ATOL)
    # LiteRT runs the same file.
    np.testing.assert_allclose(run_sequence(path, x)["output"], model.predict(x, verbose=0), atol=ATOL)
    with pytest.raises(ValueError, match="length"):
        export_tflite(model, tmp_path / "none.tflite", target="micro")
    with pytest.raises(ValueError, match="batch_size=0"):
        export_tflite(model, tmp_path / "none.tflite", target="micro", batch_size=0, length=3)
    with pytest.raises(ValueError, match="target='tpu'"):
        export_tflite(model, tmp_path / "none.tflite", target="tpu")
    with pytest.raises(ValueError, match="Input 'sequence' must have shape"):
        micro.run_sequence(path, x[:1])


def test_the_arena_reported_is_the_smallest_that_runs(tmp_path):
    path = tmp_path / "step.tflite"
    arena = export_tflite(masked_model(CoupledLSTMCell(6)), path, streaming=True, target="micro")["micro"][
        "arena_bytes"]
    content = path.read_bytes()
    runtime.Interpreter.from_bytes(content, arena_size=arena).invoke()
    with pytest.raises(RuntimeError):
        runtime.Interpreter.from_bytes(content, arena_size=arena - 16)


def test_an_op_tflite_micro_lacks_fails_the_export_naming_op_and_layer(tmp_path):
    inputs = keras.Input((4, 3), name="sequence")
    ranked = keras.layers.Lambda(lambda x: keras.ops.top_k(x, 2)[0], name="ranks")(inputs)
    model = keras.Model(inputs, ranked)
    path = tmp_path / "ranks.tflite"
    with pytest.raises(ExportError, match=r"^layer 'ranks' \(Lambda\) needs the op TOPK_V2, which "
                                          "TensorFlow Lite for Microcontrollers lacks; export for "
                                          "target='litert', which runs every builtin op$"):
        export_tflite(model, path, target="micro")
    assert not path.exists()
    # The same model's LiteRT file is fine; `compatibility` says TFLM's no,
    # naming the op it stops at.
    export_tflite(model, path)
    verdict = micro.compatibility(path.read_bytes())
    assert not verdict["runs"] and re.search(r"the op TOPK_V2", verdict["reason"]), verdict


def test_token_ids_run_whole_sequences_in_tflite_micro(tmp_path):
    """Transformer-XL on token ids in sequence mode (the contract streams
    them): the embedding as a one-hot product, no SELECT."""
    inputs = keras.Input((4,), dtype="int32", name="tokens")
    backbone = TransformerXL(num_layers=1, num_heads=1, head_size=4, hidden_dim=4, intermediate_dim=4,
                             segment_len=2, mem_len=2, vocabulary_size=5)
    model = keras.Model(inputs, backbone(inputs))
    path = tmp_path / "txl.tflite"
    summary = export_tflite(model, path, target="micro")
    assert "GATHER" not in summary["ops"], summary["ops"]  # the lookup's, with its int32 SELECT_V2
    ids = np.array([[1, 4, 0, 2]], "int32")
    np.testing.assert_allclose(micro.run_sequence(path, ids)["output"], model.predict(ids, verbose=0), atol=ATOL)


def test_the_command_line_exports_for_micro_and_inspect_reports_it(tmp_path):
    model = masked_model(PeepholeLSTMCell(4))
    model.save(tmp_path / "m.keras")
    command = [sys.executable, "-m", "keras_relrec_cli"]
    done = subprocess.run([*command, "export", str(tmp_path / "m.keras"), "--tflite", str(tmp_path / "m.tflite"),
                           "--streaming", "--target", "micro"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "tflite-micro: runs in a tensor arena of" in done.stdout
    assert micro.initial_state_path(tmp_path / "m.tflite").is_file()
    done = subprocess.run([*command, "inspect", str(tmp_path / "m.tflite")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # A verdict per runtime, the tensors by name with their positions' order.
    lines = [" ".join(line.split()) for line in done.stdout.splitlines()]
    assert "tflite-micro: runs, tensor arena" in " ".join(lines), done.stdout
    inputs = micro.io_order((tmp_path / "m.tflite").read_bytes())["inputs"]
    assert f"'step' inputs by position: {', '.join(inputs)}" in lines, done.stdout
    for verdict in ("LiteRT / TF Lite: runs from 2.", "tflite-runtime 2.14: runs", "GPU / NPU delegate: ready"):
        assert any(line.startswith(verdict) for line in lines), done.stdout


@pytest.fixture(scope="module")
def small_file(tmp_path_factory):
    """The bytes of a small valid .tflite file."""
    path = tmp_path_factory.mktemp("small") / "dense.tflite"
    export_tflite(keras.Sequential([keras.Input((4, 3)), keras.layers.Dense(2)]), path)
    return path.read_bytes()


@pytest.mark.parametrize(
    "cut, reason",
    [
        (lambda c: b"", "it is empty, not a TFLite flatbuffer"),
        (lambda c: c[:6], "truncated: 6 bytes"),
        (lambda c: np.random.default_rng(3).bytes(2048), "not a TFLite flatbuffer: no file identifier b'TFL3'"),
        (lambda c: c[: len(c) // 2], "truncated or corrupt"),
        (lambda c: c[:-1], "truncated or corrupt"),
    ],
)
@pytest.mark.parametrize("as_path", [False, True])
def test_a_file_that_is_not_a_whole_flatbuffer_is_refused_by_name(small_file, tmp_path, cut, reason, as_path):
    content = cut(small_file)
    given = tmp_path / "bad.tflite" if as_path else content
    if as_path:
        given.write_bytes(content)
    what = str(given) if as_path else "Argument `path_or_content` (bytes)"
    with pytest.raises(ValueError, match=re.escape(f"{what} is not a readable .tflite file: {reason}")):
        micro.MicroInterpreter(given, "serve")


def test_the_micro_check_of_an_unreadable_file_says_one_line(small_file):
    # TFLM's Python loader fails on a truncated file: the child's traceback must not become the message.
    with pytest.raises(ExportError) as info:
        micro.check(small_file[: len(small_file) // 2])
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    assert message.startswith("the tflite-micro interpreter cannot run the file: it does not load: ")
