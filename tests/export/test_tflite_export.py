"""TFLite export of recurrent models, Keras' own layers included: builtins
only, dynamic batch and length, masking, streaming, quantization."""

import gc
import os
import re

import keras
import numpy as np
import pytest

from keras_relrec.export import ExportError
from keras_relrec.export import export_saved_model
from keras_relrec.export import export_tflite
from keras_relrec.export import plan_export
from keras_relrec.export import run_sequence
from keras_relrec.export import run_streaming
from keras_relrec.layers import CoupledLSTMCell
from keras_relrec.layers import PeepholeLSTMCell
from tests.export.saved_model_stream import stream_saved_model

D = 3
ATOL = 1e-5
BATCHES = (1, 3)
LENGTHS = (1, 7, 500)


def sequential(*layers, dtype="float32"):
    shape = (None, D) if dtype == "float32" else (None,)
    inputs = keras.Input(shape, dtype=dtype, name="sequence")
    x = inputs
    for layer in layers:
        x = layer(x)
    return keras.Model(inputs, x)


MODELS = {
    "lstm_cell_sequences": lambda: sequential(keras.layers.RNN(keras.layers.LSTMCell(4), return_sequences=True)),
    "gru_cell_last": lambda: sequential(keras.layers.RNN(keras.layers.GRUCell(4))),
    "simple_rnn_cell": lambda: sequential(keras.layers.RNN(keras.layers.SimpleRNNCell(4), return_sequences=True)),
    "lstm": lambda: sequential(keras.layers.LSTM(4), keras.layers.Dense(2)),
    "gru_reset_before": lambda: sequential(keras.layers.GRU(4, reset_after=False, return_sequences=True)),
    "gru": lambda: sequential(keras.layers.GRU(4)),
    "simple_rnn": lambda: sequential(keras.layers.SimpleRNN(4, return_sequences=True)),
    "stacked_cells": lambda: sequential(
        keras.layers.RNN([keras.layers.LSTMCell(4), keras.layers.GRUCell(3)], return_sequences=True)
    ),
    "masked_ours_stacked": lambda: sequential(
        keras.layers.Masking(0.0),
        keras.layers.RNN(PeepholeLSTMCell(4), return_sequences=True),
        keras.layers.RNN(CoupledLSTMCell(5, use_peepholes=True), return_sequences=True),
        keras.layers.Dense(2),
    ),
    # A masked frame repeats the stack's output, the last cell's: not the
    # first state, even when the widths agree.
    "masked_stacked_cells": lambda: sequential(
        keras.layers.Masking(0.0),
        keras.layers.RNN([keras.layers.LSTMCell(4), keras.layers.GRUCell(4)], return_sequences=True),
    ),
    "masked_stacked_cells_last": lambda: sequential(
        keras.layers.Masking(0.0), keras.layers.RNN([keras.layers.GRUCell(5), keras.layers.LSTMCell(3)])
    ),
    "embedding_mask_zero": lambda: sequential(
        keras.layers.Embedding(10, D, mask_zero=True), keras.layers.LSTM(4), dtype="int32"
    ),
    "masked_lstm_last": lambda: sequential(keras.layers.Masking(0.0), keras.layers.LSTM(4)),
    "bidirectional_concat": lambda: sequential(
        keras.layers.Masking(0.0),
        keras.layers.Bidirectional(keras.layers.LSTM(4, return_sequences=True)),
    ),
    "bidirectional_gru_sum": lambda: sequential(
        keras.layers.Bidirectional(keras.layers.GRU(4), merge_mode="sum")
    ),
    "go_backwards": lambda: sequential(keras.layers.LSTM(4, go_backwards=True, return_sequences=True)),
}
STREAMING = [
    name for name in MODELS if not name.startswith(("bidirectional", "go_backwards"))
]


def make_input(model, batch, length, seed=0):
    rng = np.random.default_rng(seed)
    if model.inputs[0].dtype == "int32":
        x = rng.integers(1, 10, size=(batch, length)).astype("int32")
    else:
        x = rng.normal(size=(batch, length, D)).astype("float32")
    if length > 2:
        x[0, -2:] = 0  # padding at the end of the first sequence
        x[-1, 1] = 0  # and a gap inside the last one
    return x


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Each model and its sequence-mode file, converted once."""
    folder = tmp_path_factory.mktemp("tflite")
    cache = {}

    def get(name):
        if name not in cache:
            keras.utils.set_random_seed(0)
            model = MODELS[name]()
            path = folder / f"{name}.tflite"
            summary = export_tflite(model, path)
            cache[name] = (model, path, summary)
        return cache[name]

    return get


@pytest.mark.parametrize("name", list(MODELS))
def test_sequence_mode_is_builtins_only_and_matches_keras(name, exported):
    model, path, summary = exported(name)
    assert not [op for op in summary["ops"] if op.startswith("CUSTOM")]
    assert "WHILE" in summary["ops"]
    (shape, _), = summary["signatures"]["serve"]["inputs"].values()
    assert shape[:2] == (-1, -1), "batch and length must be dynamic"
    for batch in BATCHES:
        for length in LENGTHS:
            x = make_input(model, batch, length)
            got = run_sequence(path, x)["output"]
            np.testing.assert_allclose(got, model.predict(x, verbose=0), atol=ATOL,
                                       err_msg=f"batch {batch}, length {length}")


@pytest.mark.parametrize("name", STREAMING)
def test_streaming_frame_by_frame_matches_full_sequence(name, tmp_path):
    keras.utils.set_random_seed(0)
    model = MODELS[name]()
    path = tmp_path / "step.tflite"
    summary = export_tflite(model, path, streaming=True)
    assert set(summary["signatures"]) == {"step", "initial_state"}
    assert not [op for op in summary["ops"] if op.startswith("CUSTOM")]
    x = make_input(model, 3, 9)
    frames = run_streaming(path, x)["output"]
    full = model.predict(x, verbose=0)
    if full.ndim == frames.ndim:  # the model returns sequences
        np.testing.assert_allclose(frames, full, atol=ATOL)
    else:  # the output for a prefix is the step output at its last frame
        np.testing.assert_allclose(frames[:, -1], full, atol=ATOL)
        np.testing.assert_allclose(frames[:, 4], model.predict(x[:, :5], verbose=0), atol=ATOL)


@pytest.mark.parametrize("name", ["bidirectional_concat", "go_backwards"])
def test_layers_that_need_the_future_cannot_stream(name, tmp_path):
    model = MODELS[name]()
    layer = [x for x in model.layers if "bidirectional" in x.name or "lstm" in x.name][0]
    with pytest.raises(ExportError, match=f"layer '{layer.name}'"):
        export_tflite(model, tmp_path / "x.tflite", streaming=True)


def test_time_mixing_layer_cannot_stream(tmp_path):
    model = sequential(
        keras.layers.LSTM(4, return_sequences=True), keras.layers.GlobalAveragePooling1D()
    )
    with pytest.raises(ExportError, match="global_average_pooling1d"):
        export_tflite(model, tmp_path / "x.tflite", streaming=True)


@keras.saving.register_keras_serializable(package="keras_relrec_tests")
class LastStep(keras.layers.Layer):
    """A user's layer that reads across time (the last step)."""

    def call(self, x):
        return x[:, -1]


# A head after the recurrent layer: what the refusal tells the user to do.
SEQUENCE_OR_END_AT_THE_RECURRENT_LAYER = (
    r"export it in sequence mode \(streaming=False\), or stream the model without '{name}', ending at its "
    r"last recurrent \(stateful\) layer \(the step returns that layer's output at each frame\), and apply "
    r"'{name}' outside"
)
HEADS = {
    "pooling": (lambda: keras.layers.GlobalAveragePooling1D(name="head"), ""),
    "lambda": (lambda: keras.layers.Lambda(lambda x: x[:, -1], name="head"),
               r", or, if its function acts on each step alone, write it as a layer class that sets "
               r"acts_per_step = True$"),
    "custom": (lambda: LastStep(name="head"), r", or, if it acts on each step alone, set acts_per_step = True "
               r"on its class$"),
}


@pytest.mark.parametrize("head", list(HEADS))
@pytest.mark.parametrize("export", ["tflite", "saved_model"])
def test_a_head_across_time_says_how_to_export(head, export, tmp_path):
    make_head, extra = HEADS[head]
    model = sequential(keras.layers.LSTM(4, return_sequences=True), make_head())
    expected = SEQUENCE_OR_END_AT_THE_RECURRENT_LAYER.format(name="head") + (extra or "$")
    with pytest.raises(ExportError, match=r"^layer 'head' \(\w+\) is not known to act on each time step alone, "
                                          r"so the model cannot stream frame by frame; " + expected):
        if export == "tflite":
            export_tflite(model, tmp_path / "x.tflite", streaming=True)
        else:
            export_saved_model(model, tmp_path / "sm", streaming=True)


@pytest.mark.parametrize("before", [lambda: [], lambda: [keras.layers.LSTM(4, return_sequences=True)]],
                         ids=["first", "between"])
def test_a_layer_across_time_before_the_last_recurrent_one_says_to_export_in_sequence_mode(before):
    # Between two recurrent layers too: streaming without it would cut the model.
    model = sequential(*before(), keras.layers.Conv1D(4, 3, name="conv"), keras.layers.LSTM(4))
    with pytest.raises(ExportError, match=r"^layer 'conv' \(Conv1D\) is not known to act on each time step "
                                          r"alone, so the model cannot stream frame by frame; export it in "
                                          r"sequence mode \(streaming=False\)$"):
        plan_export(model).require_streaming()


def test_an_operation_across_time_says_how_to_export():
    inputs = keras.Input((None, D), name="sequence")
    model = keras.Model(inputs, keras.ops.mean(keras.layers.LSTM(4, return_sequences=True)(inputs), axis=1))
    with pytest.raises(ExportError, match=r"^operation '\w+' \(Mean\) works across the time axis, so the model "
                                          r"cannot stream frame by frame; export it in sequence mode"):
        plan_export(model).require_streaming()


@pytest.mark.parametrize("frozen_before", [False, True])
def test_the_conversion_leaves_the_collector_as_it_was(frozen_before, tmp_path):
    """The conversion freezes what exists for TensorFlow's full collection
    inside it, and thaws it after; a program's own frozen objects stay
    frozen (and the conversion freezes nothing of its own)."""
    model = MODELS["gru"]()
    if frozen_before:
        gc.freeze()
    frozen = gc.get_freeze_count()
    try:
        export_tflite(model, tmp_path / "m.tflite")
        after = gc.get_freeze_count()
    finally:
        gc.unfreeze()
    # Frozen objects may still be freed by their reference counts.
    assert (0 < after <= frozen) if frozen_before else after == 0


def test_saved_model_has_serve_and_step(tmp_path):
    import tensorflow as tf

    model = MODELS["masked_ours_stacked"]()
    assert export_saved_model(model, tmp_path / "sm") == ["serve", "step", "initial_state"]
    loaded = tf.saved_model.load(str(tmp_path / "sm"))
    x = make_input(model, 3, 6)
    serve = loaded.serve({"sequence": x})["output"]
    np.testing.assert_allclose(serve, model.predict(x, verbose=0), atol=ATOL)
    np.testing.assert_allclose(stream_saved_model(loaded, x), serve, atol=ATOL)



def test_a_saved_model_replaces_only_a_saved_model(tmp_path):
    """The folder is swapped in whole: an earlier SavedModel is replaced,
    a folder that holds anything else is refused, untouched."""
    model = MODELS["masked_ours_stacked"]()
    export_saved_model(model, tmp_path / "sm", streaming=False)
    assert export_saved_model(model, tmp_path / "sm") == ["serve", "step", "initial_state"]
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "model.keras").write_text("keep")
    with pytest.raises(ValueError, match=r"Argument `path` must be a new folder.*\['model.keras'\]"):
        export_saved_model(model, tmp_path / "mine")
    assert os.listdir(tmp_path / "mine") == ["model.keras"]


@pytest.mark.parametrize("quantize", ["float16", "dynamic_int8", "int8"])
@pytest.mark.parametrize("streaming", [False, True])
def test_quantized_exports_run_and_stay_close(quantize, streaming, tmp_path):
    keras.utils.set_random_seed(0)
    model = sequential(
        keras.layers.RNN(PeepholeLSTMCell(16), return_sequences=True), keras.layers.Dense(4)
    )
    calibration = make_input(model, 32, 10, seed=1)
    path = tmp_path / "q.tflite"
    summary = export_tflite(
        model, path, streaming=streaming, quantize=quantize,
        representative_data=calibration if quantize == "int8" else None,
    )
    assert not [op for op in summary["ops"] if op.startswith("CUSTOM")]
    held_out = make_input(model, 4, 10, seed=2)
    want = model.predict(held_out, verbose=0)
    run = run_streaming if streaming else run_sequence
    got = run(path, held_out)["output"]
    # Bounds from the quantization step sizes, generous against flakiness but
    # far below the output scale (about 1): a broken export misses them.
    bound = {"float16": 1e-2, "dynamic_int8": 0.1, "int8": 0.2}[quantize]
    assert np.abs(got - want).max() < bound


def test_float32_file_is_close_to_the_weights_size(tmp_path):
    model = sequential(keras.layers.RNN(PeepholeLSTMCell(128), return_sequences=True))
    summary = export_tflite(model, tmp_path / "m.tflite")
    weights = sum(w.size * 4 for w in model.get_weights())
    assert summary["size_bytes"] <= 1.1 * weights


def test_bad_arguments(tmp_path):
    model = MODELS["lstm"]()
    with pytest.raises(ValueError, match="quantize"):
        export_tflite(model, tmp_path / "x.tflite", quantize="int4")
    with pytest.raises(ValueError, match="representative_data"):
        export_tflite(model, tmp_path / "x.tflite", quantize="int8")
    with pytest.raises(ValueError, match="streaming"):
        export_saved_model(model, tmp_path / "sm", streaming="yes")
    with pytest.raises(ExportError, match="unroll"):
        export_tflite(
            keras.Sequential([keras.Input((5, D)), keras.layers.LSTM(2, unroll=True)]),
            tmp_path / "x.tflite",
        )


@keras.saving.register_keras_serializable(package="keras_relrec_tests")
class Erfinv(keras.layers.Layer):
    """An op TFLite has no builtin for."""

    def call(self, x):
        return keras.ops.erfinv(keras.ops.tanh(x))


def test_a_layer_without_builtins_is_named(tmp_path):
    model = sequential(keras.layers.LSTM(4, return_sequences=True), Erfinv(name="odd_math"))
    with pytest.raises(ExportError) as info:
        export_tflite(model, tmp_path / "x.tflite")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("layer 'odd_math' (Erfinv) does not convert to TFLite builtins")
    assert "Erfinv" in message.split(":", 1)[1]


def test_a_given_length_fixes_the_length_and_contradictions_are_refused(tmp_path):
    model = MODELS["lstm"]()  # of any length
    summary = export_tflite(model, tmp_path / "five.tflite", length=5)
    assert summary["signatures"]["serve"]["inputs"]["sequence"][0] == (-1, 5, D)
    with pytest.raises(ValueError, match=r"Argument `length` is needed with dynamic_length=False"):
        export_tflite(model, tmp_path / "x.tflite", dynamic_length=False)
    with pytest.raises(ValueError, match=r"`dynamic_length` cannot be True with length=5"):
        export_tflite(model, tmp_path / "x.tflite", dynamic_length=True, length=5)
    with pytest.raises(ValueError, match=r"`dynamic_length` cannot be True with target='accelerator'"):
        export_tflite(model, tmp_path / "x.tflite", dynamic_length=True, target="accelerator", length=5)
    with pytest.raises(ValueError, match=r"streaming=True does not export.*received length=5"):
        export_tflite(model, tmp_path / "x.tflite", streaming=True, length=5)


@pytest.mark.parametrize("name", ["streaming", "dynamic_length", "integer_io"])
def test_flags_must_be_bools(name, tmp_path):
    with pytest.raises(ValueError, match=rf"Argument `{name}` must be a bool; received {name}='yes'"):
        export_tflite(MODELS["lstm"](), tmp_path / "x.tflite", **{name: "yes"})
    assert not (tmp_path / "x.tflite").exists()


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_int8_calibration_on_non_finite_data_is_refused(bad, tmp_path):
    data = np.random.default_rng(0).normal(size=(4, 5, D)).astype("float32")
    data[1, 2, 0] = bad
    with pytest.raises(ValueError, match=r"`representative_data` must hold finite values; input 'sequence' has 1 "):
        export_tflite(MODELS["lstm"](), tmp_path / "x.tflite", quantize="int8", representative_data=data)
    assert not (tmp_path / "x.tflite").exists()


@pytest.mark.parametrize("quantize", ["int8", "int16x8"])
@pytest.mark.parametrize("shape", [(4, 5, D + 1), (4, 5), (4, 5, D, 1)], ids=["width", "no-features", "rank"])
def test_calibration_of_another_shape_than_the_inputs_is_refused(quantize, shape, tmp_path):
    """Named before the converter runs, whose own message names neither."""
    data = np.zeros(shape, "float32")
    with pytest.raises(ValueError, match=rf"`representative_data` must hold arrays of the model's input shape for "
                                         rf"input 'sequence', \(examples, \?, {D}\); received an array of shape "
                                         rf"{re.escape(str(shape))}\."):
        export_tflite(MODELS["lstm"](), tmp_path / "x.tflite", quantize=quantize, representative_data=data,
                      streaming=quantize == "int16x8")
    assert not (tmp_path / "x.tflite").exists()


def test_int8_calibration_of_another_length_than_the_file_is_refused(tmp_path):
    data = np.random.default_rng(0).normal(size=(4, 6, D)).astype("float32")
    with pytest.raises(ValueError, match=r"`representative_data` must hold sequences of the file's length, 5 steps, "
                                         r"for input 'sequence'; received sequences of 6"):
        export_tflite(MODELS["lstm"](), tmp_path / "x.tflite", quantize="int8", representative_data=data, length=5)
    export_tflite(MODELS["lstm"](), tmp_path / "x.tflite", quantize="int8", representative_data=data[:, :5], length=5)
