"""The segment loop takes its memory as a policy: the loop with either
policy against the equations in float64 NumPy (the reference the presets
are held to, tests/layers/transformer_xl/numpy_reference.py), each preset
is the loop with its policy (same weights, same numbers), a policy belongs
to one layer, and a policy written outside the package runs in the loop."""

import contextlib

import keras
import numpy as np
import pytest

from keras_relrec.layers import FifoMemory
from keras_relrec.layers import MemoryPolicy
from keras_relrec.layers import SegmentCache
from keras_relrec.layers import SegmentCacheTransformer
from keras_relrec.layers import SegmentRecurrence
from keras_relrec.layers import TransformerXL
from keras_relrec.ops import loops
from keras_relrec.ops.relative_attention import update_memory
from tests.layers.transformer_xl.numpy_reference import backbone_np
from tests.layers.transformer_xl.numpy_reference import cache_np
from tests.layers.transformer_xl.numpy_reference import random_weights

L, D = 3, 6
BACKBONE = {"num_layers": 2, "num_heads": 2, "head_size": 3, "hidden_dim": D, "intermediate_dim": 10,
            "segment_len": L}


def outputs_with_weights_of(preset, layer, x, mask):
    """`layer` given `preset`'s weights, and both layers' outputs."""
    preset(x[:, :L]), layer(x[:, :L])
    random_weights(preset, 4)
    layer.set_weights(preset.get_weights())
    return [keras.ops.convert_to_numpy(m(x, mask=mask)) for m in (preset, layer)]


@pytest.mark.parametrize(("preset", "policy"), [
    (lambda: TransformerXL(**BACKBONE, mem_len=4, same_length=True), lambda: FifoMemory(4)),
    (lambda: SegmentCacheTransformer(**BACKBONE, num_slots=3, top_k=2, query="standard", summary="mlp"),
     lambda: SegmentCache(3, 2, query="standard", summary="mlp")),
], ids=["fifo", "cache"])
def test_each_preset_is_the_loop_with_its_policy(preset, policy):
    preset = preset()
    layer = SegmentRecurrence(**BACKBONE, memory=policy(), same_length=preset.get_config().get("same_length", False))
    x = np.random.default_rng(0).normal(size=(2, 4 * L + 1, D)).astype("float32")
    mask = np.ones(x.shape[:2], bool)
    mask[1, 5:9] = False
    got, want = outputs_with_weights_of(preset, layer, x, mask)
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert layer.streaming_state_specs() == preset.streaming_state_specs()
    again = SegmentRecurrence.from_config(layer.get_config())
    assert type(again._memory) is type(layer._memory)
    assert again.get_config() == layer.get_config()


def test_a_policy_belongs_to_one_layer():
    memory = FifoMemory(4)
    SegmentRecurrence(**BACKBONE, memory=memory)
    with pytest.raises(ValueError, match="already belongs to a SegmentRecurrence"):
        SegmentRecurrence(**BACKBONE, memory=memory)
    with pytest.raises(ValueError, match=r"`memory` must be a memory policy .* received 'fifo'"):
        SegmentRecurrence(**BACKBONE, memory="fifo")
    with pytest.raises(ValueError, match=r"same_length.*SegmentCache\(num_slots=2"):
        SegmentRecurrence(**BACKBONE, memory=SegmentCache(2, 1), same_length=True)


class PreviousSegment(MemoryPolicy):
    """Each layer attends to its inputs of the previous segment: a memory
    written outside the package, which on whole segments is
    Transformer-XL's with mem_len = L."""

    def state_specs(self):
        return [(f"previous_{n}", (self.segment_len, self.hidden_dim), self.state_dtype)
                for n in range(self.num_layers)] + [("previous_mask", (self.segment_len,), "float32")]

    def read(self, hidden, mask, states, stack, training):
        return [{"memory": memory, "memory_mask": states[-1]} for memory in states[:-1]]

    def update(self, states, layer_inputs, outputs, mask, steps):
        return [update_memory(memory, inputs) for memory, inputs in zip(states[:-1], layer_inputs)] + [
            update_memory(states[-1], self.segment_valid(outputs, mask))]


@pytest.mark.parametrize(("layer", "inputs", "message"), [
    (dict(mem_len=4), keras.Input((None,), dtype="int32"),
     r"^TransformerXL expects inputs \(batch, steps, 6\); received input of shape \(None, None\) with "
     r"vocabulary_size=None\. Pass vocabulary_size=\.\.\. to embed token ids, or give \(batch, steps, 6\) "
     r"features\.$"),
    (dict(mem_len=4), keras.Input((None, 5)),
     r"^TransformerXL expects inputs \(batch, steps, 6\); received input of shape \(None, None, 5\)\. Give 6 "
     r"features a step \(hidden_dim\), e\.g\. through keras\.layers\.Dense\(6\)\.$"),
    (dict(mem_len=4, vocabulary_size=11), keras.Input((None, D)),
     r"^TransformerXL expects inputs \(batch, steps\) token ids; received input of shape \(None, None, 6\) "
     r"with vocabulary_size=11\. Give token ids, or leave vocabulary_size out to take \(batch, steps, 6\) "
     r"features\.$"),
], ids=["token_ids_without_vocabulary", "features_of_another_width", "features_with_a_vocabulary"])
def test_inputs_of_the_wrong_kind_say_which_argument_to_change(layer, inputs, message):
    with pytest.raises(ValueError, match=message):
        TransformerXL(**BACKBONE, **layer)(inputs)


def test_a_policy_from_outside_runs_in_the_loop():
    x = np.random.default_rng(1).normal(size=(2, 4 * L, D)).astype("float32")
    mask = np.ones(x.shape[:2], bool)
    mask[0, 4] = False
    want, got = outputs_with_weights_of(TransformerXL(**BACKBONE, mem_len=L),
                                        SegmentRecurrence(**BACKBONE, memory=PreviousSegment()), x, mask)
    np.testing.assert_allclose(got, want, atol=1e-6)


class NoMemoryForAnyBlock(MemoryPolicy):
    """`read` answers for no block: the loop must refuse it, not run none."""

    def state_specs(self):
        return []

    def read(self, hidden, mask, states, stack, training):
        return []

    def update(self, states, layer_inputs, outputs, mask, steps):
        return []


def test_a_policy_must_answer_for_every_block():
    layer = SegmentRecurrence(**BACKBONE, memory=NoMemoryForAnyBlock())
    with pytest.raises(ValueError, match=r"one dict of call arguments per block \(2; .*returned 0"):
        layer(np.zeros((1, L, D), "float32"))


class WrongUpdate(PreviousSegment):
    """`PreviousSegment` whose `update` returns what `wrong` makes of its
    states: one too few, one of another shape or another dtype."""

    def __init__(self, wrong, **kwargs):
        super().__init__(**kwargs)
        self.wrong = wrong

    def update(self, states, layer_inputs, outputs, mask, steps):
        new = super().update(states, layer_inputs, outputs, mask, steps)
        if self.wrong == "count":
            return new[:-1]
        if self.wrong == "shape":
            return [new[0][:, 1:]] + new[1:]
        return [keras.ops.cast(new[0], "int32")] + new[1:]


@pytest.mark.parametrize(("wrong", "message"), [
    ("count", r"WrongUpdate\.update must return its 3 states \['previous_0', 'previous_1', 'previous_mask'\] "
              r"\(its state_specs\(\)\); it returned 2\."),
    ("shape", rf"WrongUpdate\.update must return state 'previous_0' of shape \(1, {L}, {D}\) \(batch first\) "
              rf"and dtype float32, as its state_specs\(\) give it; it returned shape \(1, {L - 1}, {D}\) and "
              r"dtype float32\."),
    ("dtype", r"state 'previous_0' of shape .* and dtype float32, .*returned shape .* and dtype int32\."),
])
def test_a_policy_update_must_return_its_states_as_specified(wrong, message):
    """Nothing else may go on to the next segment: a state left out, of
    another shape (batch included) or of another dtype."""
    layer = SegmentRecurrence(**BACKBONE, memory=WrongUpdate(wrong))
    with pytest.raises(ValueError, match=message):
        layer(np.zeros((1, 2 * L, D), "float32"))


class WithPolicySettings:
    """`layer`'s attributes, and its memory policy's (mem_len, query,
    summary, ...), as the NumPy reference reads a preset's."""

    def __init__(self, layer):
        self.layer = layer

    def __getattr__(self, name):
        try:
            return getattr(self.layer, name)
        except AttributeError:
            return getattr(self.layer._memory, name)


@pytest.mark.parametrize(("memory", "reference"), [
    (lambda: FifoMemory(4), lambda model, x, valid: backbone_np(model, x, valid)),
    (lambda: SegmentCache(3, 2, query="compute_first", summary="mlp"),
     lambda model, x, valid: cache_np(model, x, valid)[0]),
], ids=["fifo", "cache"])
def test_matches_the_equations(memory, reference, precision):
    layer = SegmentRecurrence(**BACKBONE, memory=memory(), tie_relative_biases=True)
    layer(np.zeros((1, L, D), "float32"))
    random_weights(layer, 5)
    x = np.random.default_rng(2).normal(size=(2, 5 * L - 1, D))
    valid = np.ones(x.shape[:2], bool)
    valid[0, 3:6] = False  # a whole segment
    valid[1, 7] = False
    got = layer(precision.array(x), mask=valid)
    precision.assert_close(got, reference(WithPolicySettings(layer), x, valid), atol=1e-5)


# One block, two segments: what the loop and the draws need.
SMALL = {**BACKBONE, "num_layers": 1, "hidden_dim": 4, "intermediate_dim": 4}


def counted_segments(layer):
    """A list that grows by one at each trace (or eager run) of `layer`'s
    segment."""
    count = []
    run = layer._masked_segment

    def counted(*args, **kwargs):
        count.append(1)
        return run(*args, **kwargs)

    layer._masked_segment = counted
    return count


def traced_segments(layer, x, training=False, within=None, jit_compile=False):
    """How many segments `layer`'s compiled call (`predict_step`, or
    `train_step` with `training`) traces for `x`, and the model."""
    count = counted_segments(layer)
    inputs = keras.Input(x.shape[1:])
    model = keras.Model(inputs, layer(inputs))
    del count[:]  # the symbolic call of the functional model
    with within or contextlib.nullcontext():
        if training:
            model.compile(optimizer="sgd", loss="mse", jit_compile=jit_compile)
            model.train_on_batch(x, np.zeros(x.shape, "float32"))
        else:
            model.predict_on_batch(x)
    return len(count), model


def segments(count):
    return np.random.default_rng(0).normal(size=(2, count * L, 4)).astype("float32")


@pytest.mark.jax
def test_segments_of_a_known_count_are_traced_once():
    """Outside training, a sequence of three segments traces the segment
    once (a loop that XLA and JAX compile once); an export traces each
    (`loops.unrolled`: no WHILE in the files)."""
    def traced(count, **kwargs):
        return traced_segments(TransformerXL(**SMALL, mem_len=2), segments(count), **kwargs)[0]

    assert traced(3) == traced(1) == 1
    assert traced(3, within=loops.unrolled()) == 3


def test_training_segments_share_one_trace_in_the_graph():
    """In TensorFlow's graph the unrolled segments of a training step share
    a trace per segment length (the first step's trace does not grow with
    the count; under XLA each is traced: `test_training_unrolls_and_draws`);
    the steps are the eager steps."""
    x = segments(3)[:, :-1]  # two full segments and a short one
    for stateful in (False, True):  # a stateful layer's states are variables
        models = [keras.Sequential([keras.Input(x.shape[1:], batch_size=len(x)),
                                    TransformerXL(**SMALL, mem_len=2, stateful=stateful)]) for _ in range(2)]
        models[1].set_weights(models[0].get_weights())
        count = counted_segments(models[0].layers[-1])
        for model, run_eagerly in zip(models, (False, True)):
            model.compile(optimizer="sgd", loss="mse", run_eagerly=run_eagerly)
            for _ in range(2):
                model.train_on_batch(x, np.ones(x.shape, "float32"))
        # Two steps of the graph: one trace of each segment length.
        assert len(count) == 2, stateful
        for graph, eager in zip(*(model.get_weights() for model in models)):
            np.testing.assert_allclose(graph, eager, rtol=1e-5, atol=1e-6)


# make check (on TensorFlow and JAX): an unrolled XLA training step each.
@pytest.mark.check
@pytest.mark.jax
@pytest.mark.parametrize("layer", [
    lambda: TransformerXL(**SMALL, mem_len=2, dropout=0.3, attention_dropout=0.2, seed=1),
    lambda: SegmentCacheTransformer(**SMALL, num_slots=2, top_k=1, explore_recall=True, seed=1),
], ids=["dropout", "explore-recall"])
def test_training_unrolls_and_draws(layer):
    """In training the segments are unrolled (a loop's backward pass costs
    later steps more; a seed generator's draws cannot leave JAX's scan, nor
    give XLA shapes inside a WHILE): with dropout or an explored recall the
    XLA step trains, and dropout's draws differ from call to call."""
    x = segments(3)
    count, model = traced_segments(layer(), x, training=True, jit_compile=True)
    assert count >= 3  # a loop: once per trace of the step, one or two
    first, second = (keras.ops.convert_to_numpy(model(x, training=True)) for _ in range(2))
    assert np.all(np.isfinite(first)) and all(np.all(np.isfinite(w)) for w in model.get_weights())
    if isinstance(model.layers[-1], TransformerXL):
        assert not np.allclose(first, second)
