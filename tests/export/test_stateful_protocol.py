"""The export plan and the stateful-layer protocol: a layer that is not a
`keras.layers.RNN` streams through the protocol beside RNNs; state names stay
unique in nested models; masked stacks hold their real previous output."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from keras_relrec.export import ExportError
from keras_relrec.export import StatefulLayer
from keras_relrec.export import export_saved_model
from keras_relrec.export import export_tflite
from keras_relrec.export import plan_export
from keras_relrec.export import run_sequence
from keras_relrec.export import run_streaming
from keras_relrec.layers import PeepholeLSTMCell
from keras_relrec.layers import TransformerXL
from tests.export.saved_model_stream import stream_saved_model
from tests.export.saved_model_stream import ungated_state_reads

ATOL = 1e-5


@keras.saving.register_keras_serializable(package="keras_relrec_tests")
class CausalConvolution(keras.layers.Layer):
    """y_t = Σ_k x_{t−k} W_k, k < K: a causal convolution over time. Not an
    RNN: its state, for streaming, is the last K − 1 frames."""

    def __init__(self, units, kernel_size, **kwargs):
        super().__init__(**kwargs)
        self.units, self.kernel_size = units, kernel_size

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(self.kernel_size, input_shape[-1], self.units), name="kernel")

    def call(self, inputs):
        padded = ops.pad(inputs, [[0, 0], [self.kernel_size - 1, 0], [0, 0]])
        return ops.conv(padded, self.kernel, padding="valid")

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.units,)

    def get_config(self):
        return {**super().get_config(), "units": self.units, "kernel_size": self.kernel_size}

    # The three methods of keras_relrec.layers.StreamingLayer, without subclassing it.
    def streaming_state_specs(self):
        return [("window", (self.kernel_size - 1, self.kernel.shape[1]), self.compute_dtype)]

    def streaming_initial_state(self, batch_size):
        return [ops.zeros((batch_size, self.kernel_size - 1, self.kernel.shape[1]), self.compute_dtype)]

    def streaming_step(self, inputs, states, mask=None):
        window = ops.concatenate([states[0], inputs], axis=1)
        return ops.conv(window, self.kernel, padding="valid"), [window[:, 1 - self.kernel_size :]]


def causal_model():
    inputs = keras.Input((None, 3), name="sequence")
    h = CausalConvolution(4, 3, name="conv")(inputs)
    h = keras.layers.RNN(PeepholeLSTMCell(5), return_sequences=True, name="rnn")(h)
    return keras.Model(inputs, keras.layers.Dense(2, name="head")(h))


def test_a_layer_that_is_not_an_rnn_streams_through_the_protocol(tmp_path):
    model = causal_model()
    assert isinstance(model.get_layer("conv"), StatefulLayer)
    plan = plan_export(model)
    assert plan.can_stream
    assert list(plan.state_specs()) == ["conv_window", "rnn_state_0", "rnn_state_1"]
    assert tuple(plan.state_specs()["conv_window"].shape) == (None, 2, 3)

    x = np.random.default_rng(0).normal(size=(2, 9, 3)).astype("float32")
    want = model.predict(x, verbose=0)
    summary = export_tflite(model, tmp_path / "step.tflite", streaming=True)
    assert not [op for op in summary["ops"] if op.startswith("CUSTOM")]
    np.testing.assert_allclose(run_streaming(tmp_path / "step.tflite", x)["output"], want, atol=ATOL)
    # A stream cut in two goes on from the states the first half ended in.
    first = run_streaming(tmp_path / "step.tflite", x[:, :4])
    states = {k: v for k, v in first.items() if k != "output"}
    second = run_streaming(tmp_path / "step.tflite", x[:, 4:], states=states)
    np.testing.assert_allclose(np.concatenate([first["output"], second["output"]], 1), want, atol=ATOL)
    # Sequence mode runs the layer's own call.
    export_tflite(model, tmp_path / "serve.tflite")
    np.testing.assert_allclose(run_sequence(tmp_path / "serve.tflite", x)["output"], want, atol=ATOL)


def test_saved_model_step_through_the_protocol(tmp_path):
    model = causal_model()
    export_saved_model(model, tmp_path / "sm")
    loaded = tf.saved_model.load(str(tmp_path / "sm"))
    x = np.random.default_rng(1).normal(size=(3, 6, 3)).astype("float32")
    np.testing.assert_allclose(stream_saved_model(loaded, x), model.predict(x, verbose=0), atol=ATOL)
    # A state of another batch size is refused, not broadcast, and the
    # refusal names the state whichever op the runtime schedules first.
    (step,) = loaded.step._list_all_concrete_functions()
    assert ungated_state_reads(step, ["conv_window", "rnn_state_0", "rnn_state_1"]) == []
    bad = {**loaded.initial_state(tf.constant(3)), "conv_window": np.zeros((1, 2, 3), "float32")}
    with pytest.raises(tf.errors.InvalidArgumentError, match="conv_window"):
        loaded.step({"sequence": x[:, 0], **bad})


def encoder(name, width):
    inputs = keras.Input((None, width))
    outputs = keras.layers.LSTM(4, return_sequences=True, name="lstm")(inputs)
    return keras.Model(inputs, outputs, name=name)


def test_nested_models_whose_layers_share_a_name_get_unique_state_names(tmp_path):
    inputs = keras.Input((None, 3), name="sequence")
    h = encoder("first", 3)(inputs)
    h = encoder("second", 4)(h)
    model = keras.Model(inputs, keras.layers.LSTM(2, return_sequences=True, name="lstm")(h))
    names = list(plan_export(model).state_specs())
    assert names == ["first_lstm_state_0", "first_lstm_state_1", "second_lstm_state_0",
                     "second_lstm_state_1", "lstm_state_0", "lstm_state_1"]
    export_tflite(model, tmp_path / "step.tflite", streaming=True)
    x = np.random.default_rng(2).normal(size=(2, 7, 3)).astype("float32")
    np.testing.assert_allclose(
        run_streaming(tmp_path / "step.tflite", x)["output"], model.predict(x, verbose=0), atol=ATOL
    )


def test_a_stateful_layer_called_twice_cannot_stream():
    inputs = keras.Input((None, 3), name="sequence")
    shared = keras.layers.LSTM(3, return_sequences=True, name="shared_lstm")
    model = keras.Model(inputs, shared(shared(inputs)))
    with pytest.raises(ExportError, match="layer 'shared_lstm' is called 2 times"):
        plan_export(model).require_streaming()


def test_a_masked_stack_holds_its_real_previous_output(tmp_path):
    """A masked frame repeats the stack's output, the last cell's: for cells
    whose output is their first state, the last cell's first state; no
    state is added."""
    inputs = keras.Input((None, 3), name="sequence")
    masked = keras.layers.Masking(0.0)(inputs)
    stack = keras.layers.RNN([keras.layers.LSTMCell(4), keras.layers.GRUCell(3)],
                             return_sequences=True, name="stack")
    plan = plan_export(keras.Model(inputs, stack(masked)))
    assert list(plan.state_specs()) == ["stack_state_0", "stack_state_1", "stack_state_2"]


@keras.saving.register_keras_serializable(package="keras_relrec_tests")
class DoubledOutputCell(keras.layers.Layer):
    """h_t = tanh(x_t W + h_{t−1} U), output 2 h_t: the output is not the
    state, so a masked frame must repeat 2 h, not h."""

    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units, self.state_size, self.output_size = units, [units], units

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units), name="kernel")
        self.recurrent_kernel = self.add_weight(shape=(self.units, self.units), name="recurrent_kernel")

    def call(self, inputs, states):
        h = ops.tanh(ops.matmul(inputs, self.kernel) + ops.matmul(states[0], self.recurrent_kernel))
        return 2.0 * h, [h]

    def get_config(self):
        return {**super().get_config(), "units": self.units}


def test_a_masked_cell_whose_output_is_not_its_state_carries_its_output(tmp_path):
    inputs = keras.Input((None, 3), name="sequence")
    masked = keras.layers.Masking(0.0)(inputs)
    rnn = keras.layers.RNN(DoubledOutputCell(4), return_sequences=True, name="doubled")
    model = keras.Model(inputs, rnn(masked))
    specs = plan_export(model).state_specs()
    assert list(specs) == ["doubled_state_0", "doubled_output"]
    assert tuple(specs["doubled_output"].shape) == (None, 4)
    export_tflite(model, tmp_path / "step.tflite", streaming=True)
    x = np.random.default_rng(3).normal(size=(3, 8, 3)).astype("float32")
    x[0, -2:] = 0.0
    x[2, 1] = 0.0
    np.testing.assert_allclose(
        run_streaming(tmp_path / "step.tflite", x)["output"], model.predict(x, verbose=0), atol=ATOL
    )


def test_the_plan_prints_as_a_summary():
    inputs = keras.Input((None, 3), name="sequence")
    hidden = keras.layers.LSTM(4, return_sequences=True, name="lstm")(keras.layers.Masking(0.0)(inputs))
    plan = plan_export(keras.Model(inputs, keras.layers.Dense(2, name="head")(hidden)))
    assert str(plan) == repr(plan) == (
        "ExportPlan\n"
        "  inputs:\n"
        "    sequence: (None, None, 3) float32\n"
        "  outputs: 1\n"
        "  stateful layers:\n"
        "    lstm (LSTM): lstm_state_0 (None, 4) float32, lstm_state_1 (None, 4) float32\n"
        "  sequence mode: lstm in the builtins-only loop\n"
        "  streaming: yes, one frame a step"
    )
    pooled = plan_export(keras.Model(inputs, keras.layers.GlobalAveragePooling1D(name="pool")(hidden)))
    lines = str(pooled).splitlines()
    assert lines[-1] == f"  streaming: no, {pooled.streaming_refusal}"
    assert lines[-1].startswith("  streaming: no, layer 'pool' (GlobalAveragePooling1D) is not known to act")
    protocol = plan_export(keras.Model(inputs, CausalConvolution(2, 3, name="conv")(inputs)))
    assert str(protocol).splitlines()[-4:] == [
        "  stateful layers:",
        "    conv (CausalConvolution): conv_window (None, 2, 3) float32",
        "  sequence mode: no keras.layers.RNN (a layer that loops does so in its own call)",
        "  streaming: yes, one frame a step",
    ]
    features = keras.Input((None, 4), name="features")
    segments = TransformerXL(num_layers=1, num_heads=1, head_size=4, hidden_dim=4, intermediate_dim=4,
                             segment_len=2, mem_len=2, name="txl")
    assert str(plan_export(keras.Model(features, segments(features)))).splitlines()[-3:] == [
        "    txl (TransformerXL): txl_memory_0 (None, 2, 4) float32, txl_memory_mask (None, 2) float32",
        "  sequence mode: no keras.layers.RNN (a layer that loops does so in its own call)",
        "  streaming: yes, 2 frames a step (a chunk)",
    ]


class WrongStates(CausalConvolution):
    """`CausalConvolution` whose `method` returns what `wrong` makes of its
    states: one too many, one of another shape or another dtype."""

    def __init__(self, method, wrong, **kwargs):
        super().__init__(4, 3, **kwargs)
        self.method, self.wrong = method, wrong

    def _spoilt(self, states):
        if self.wrong == "count":
            return states + states
        if self.wrong == "shape":
            return [states[0][:, 1:]]
        return [ops.cast(states[0], "int32")]

    def streaming_initial_state(self, batch_size):
        states = super().streaming_initial_state(batch_size)
        return self._spoilt(states) if self.method == "streaming_initial_state" else states

    def streaming_step(self, inputs, states, mask=None):
        outputs, states = super().streaming_step(inputs, states, mask)
        return outputs, self._spoilt(states) if self.method == "streaming_step" else states


@pytest.mark.parametrize("method", ["streaming_step", "streaming_initial_state"])
@pytest.mark.parametrize(("wrong", "message"), [
    ("count", r"must return its 1 states \['conv_window'\] \(its streaming_state_specs\(\)\); it "
              r"returned 2\."),
    ("shape", r"must return state 'conv_window' of shape \(None, 2, 3\) \(batch first\) and dtype float32, as "
              r"its streaming_state_specs\(\) give it; it returned shape \(.*, 1, 3\) and dtype float32\."),
    ("dtype", r"must return state 'conv_window' of shape .* it returned shape .* and dtype int32\."),
])
def test_a_layer_of_ones_own_must_return_its_states_as_specified(method, wrong, message, tmp_path):
    """A user's streaming layer whose step (or initial state) returns
    states other than its specs: the export names the method and the state
    before writing anything."""
    inputs = keras.Input((None, 3), name="sequence")
    model = keras.Model(inputs, WrongStates(method, wrong, name="conv")(inputs))
    with pytest.raises(ValueError, match=rf"WrongStates\.{method} " + message):
        export_tflite(model, tmp_path / "step.tflite", streaming=True)
    assert not (tmp_path / "step.tflite").exists()
