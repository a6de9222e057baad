"""Generation with the memories gives the tokens the whole model would
choose: in segment mode always (each position sees what it sees in
training), in token mode when the memory covers the whole stream."""

import keras
import numpy as np
import pytest

from keras_relrec.layers import TransformerXL
from keras_relrec.models import TransformerXLGenerator
from tests.layers.float64 import float64_policy
from tests.layers.float64 import float64_types

VOCABULARY = 7


def language_model(mem_len, segment_len=3, dtype=None):
    backbone = TransformerXL(2, 2, 4, 8, 16, segment_len=segment_len, mem_len=mem_len,
                             vocabulary_size=VOCABULARY, embeddings_initializer="random_normal",
                             bias_initializer="random_normal", dtype=dtype)
    head = keras.layers.Dense(VOCABULARY, kernel_initializer=keras.initializers.RandomNormal(stddev=2.0),
                              dtype=dtype)
    head(backbone(np.zeros((1, 3), "int32")))
    return backbone, head


def greedy_under_the_whole_model(backbone, head, tokens, start):
    """Each token after `start` is the argmax of the whole model's logits at
    the position before it."""
    logits = np.asarray(head(backbone(tokens)))
    np.testing.assert_array_equal(tokens[:, start:], np.argmax(logits[:, start - 1 : -1], -1))


@pytest.mark.parametrize("prompt_length", [3, 5])
def test_segment_mode_chooses_what_the_whole_model_chooses(prompt_length):
    backbone, head = language_model(mem_len=4)
    prompt = np.random.default_rng(0).integers(0, VOCABULARY, size=(2, prompt_length))
    tokens = TransformerXLGenerator(backbone, head).generate(prompt, 8, mode="segment")
    assert tokens.shape == (2, prompt_length + 8)
    np.testing.assert_array_equal(tokens[:, :prompt_length], prompt)
    greedy_under_the_whole_model(backbone, head, tokens, prompt_length)


def test_token_mode_with_a_memory_of_the_whole_stream_is_full_attention():
    backbone, head = language_model(mem_len=16)
    prompt = np.random.default_rng(1).integers(0, VOCABULARY, size=(2, 4))
    tokens = TransformerXLGenerator(backbone, head).generate(prompt, 9)
    greedy_under_the_whole_model(backbone, head, tokens, 4)


def test_sampling_is_seeded_and_checked():
    backbone, head = language_model(mem_len=4)
    generator = TransformerXLGenerator(backbone, head)
    prompt = np.ones((3, 2), "int32")
    a = generator.generate(prompt, 6, sampling="sample", temperature=2.0, seed=3)
    b = generator.generate(prompt, 6, sampling="sample", temperature=2.0, seed=3)
    np.testing.assert_array_equal(a, b)
    assert a.min() >= 0 and a.max() < VOCABULARY
    for kwargs, name in [({"mode": "window"}, "mode"), ({"sampling": "top"}, "sampling"),
                         ({"temperature": 0.0}, "temperature"), ({"max_new_tokens": -1}, "max_new_tokens"),
                         ({"top_k": 0, "sampling": "sample"}, "top_k"), ({"top_k": 2}, "top_k"),
                         ({"top_k": VOCABULARY + 1, "sampling": "sample"}, "top_k")]:
        with pytest.raises(ValueError, match=name):
            generator.generate(prompt, **{"max_new_tokens": 2, **kwargs})
    with pytest.raises(ValueError, match="prompt"):
        generator.generate(np.full((1, 2), VOCABULARY), 2)
    with pytest.raises(ValueError, match="jit_compile"):
        TransformerXLGenerator(backbone, head, jit_compile="xla")
    with pytest.raises(ValueError, match="vocabulary_size"):
        TransformerXLGenerator(TransformerXL(1, 1, 2, 4, 4, segment_len=2, mem_len=2), head)


def test_a_head_that_is_not_a_layer_is_refused():
    backbone, _ = language_model(mem_len=4)
    with pytest.raises(ValueError, match=r"`head`, a Keras layer .*received head=None"):
        TransformerXLGenerator(backbone, None)


def greedy_by_steps(generator, prompt, count):
    """Token mode written out with `step` (the streaming step, from the
    memories, one round trip a token): the greedy tokens."""
    states = generator.initial_state(len(prompt))
    logits, states = generator.step(prompt, states)
    tokens = [prompt]
    for _ in range(count):
        token = np.argmax(logits[:, -1], -1)[:, None]
        tokens.append(token)
        logits, states = generator.step(token, states)
    return np.concatenate(tokens, axis=1)


@pytest.mark.parametrize("options", [{}, {"same_length": True, "clamp_len": 2}], ids=["default", "same-length"])
def test_the_compiled_loop_chooses_what_the_streaming_step_chooses(options):
    """The memory (4 positions) is shorter than the stream: the cache's ring
    wraps around three times."""
    backbone = TransformerXL(2, 2, 4, 8, 16, segment_len=3, mem_len=4, vocabulary_size=VOCABULARY,
                             embeddings_initializer="random_normal", bias_initializer="random_normal", **options)
    head = keras.layers.Dense(VOCABULARY, kernel_initializer=keras.initializers.RandomNormal(stddev=2.0))
    head(backbone(np.zeros((1, 3), "int32")))
    prompt = np.random.default_rng(2).integers(0, VOCABULARY, size=(3, 5))
    generator = TransformerXLGenerator(backbone, head)
    np.testing.assert_array_equal(generator.generate(prompt, 12), greedy_by_steps(generator, prompt, 12))


@pytest.mark.parametrize("top_k", [None, 3])
def test_sampling_draws_from_the_tempered_softmax(top_k):
    """4,000 rows with one prompt, one token each: the frequencies follow
    softmax(logits / T) (over the top k), within 5 standard errors."""
    backbone, head = language_model(mem_len=4)
    prompt = np.tile(np.array([[1, 4]]), (4000, 1))
    logits = np.asarray(head(backbone(prompt[:1])), "float64")[0, -1] / 1.5
    if top_k:
        logits = np.where(logits >= np.sort(logits)[-top_k], logits, -np.inf)
    want = np.exp(logits - logits.max())
    want /= want.sum()
    tokens = TransformerXLGenerator(backbone, head).generate(prompt, 1, sampling="sample", temperature=1.5,
                                                             top_k=top_k, seed=5)[:, -1]
    got = np.bincount(tokens, minlength=VOCABULARY) / len(tokens)
    np.testing.assert_array_less(np.abs(got - want), 5 * np.sqrt(want * (1 - want) / len(tokens)) + 1e-12)
    assert (got[want == 0] == 0).all()


@pytest.mark.jax
@pytest.mark.parametrize("mode", ["token", "segment"])
@pytest.mark.parametrize(("mem_len", "segment_len"), [(0, 3), (4, 1)], ids=["no-memory", "segments-of-one"])
def test_without_memory_and_with_segments_of_one(mode, mem_len, segment_len):
    backbone, head = language_model(mem_len=mem_len, segment_len=segment_len)
    prompt = np.random.default_rng(6).integers(0, VOCABULARY, size=(2, 4))
    generator = TransformerXLGenerator(backbone, head)
    tokens = generator.generate(prompt, 5, mode=mode)
    assert tokens.shape == (2, 9)
    if mode == "segment":
        greedy_under_the_whole_model(backbone, head, tokens, 4)
    else:
        np.testing.assert_array_equal(tokens, greedy_by_steps(generator, prompt, 5))


@pytest.mark.jax
def test_float64_generates_what_the_streaming_step_chooses():
    """Under the float64 policy (64-bit types on JAX): every index of the
    loop stays int32."""
    with float64_policy():
        backbone, head = language_model(mem_len=4)
        prompt = np.random.default_rng(7).integers(0, VOCABULARY, size=(2, 4))
        generator = TransformerXLGenerator(backbone, head)
        np.testing.assert_array_equal(generator.generate(prompt, 6), greedy_by_steps(generator, prompt, 6))
        for mode in ("token", "segment"):
            tokens = generator.generate(prompt, 4, mode=mode, sampling="sample", top_k=3, seed=1)
            assert tokens.dtype == np.int32 and tokens.max() < VOCABULARY


@pytest.mark.jax
def test_layers_of_their_own_float64_dtype_generate_in_float64():
    """Layers built with dtype="float64" under the global float32 policy
    (what `build_hf_transfo_xl(..., dtype="float64")` returns): the
    generator's models keep the layers' dtype, where Keras would cast the
    memories to float32 and the loop would refuse its carry. (On JAX with
    64-bit types on: without them JAX has no float64.)"""
    with float64_types():
        backbone, head = language_model(mem_len=4, dtype="float64")
        prompt = np.random.default_rng(8).integers(0, VOCABULARY, size=(2, 4))
        generator = TransformerXLGenerator(backbone, head)
        logits, states = generator.step(prompt, generator.initial_state(2))
        assert logits.dtype == np.float64
        # Every state as the backbone specifies it: its memories float64.
        specified = [np.dtype(dtype) for _, _, dtype in backbone.streaming_state_specs()]
        assert [s.dtype for s in states] == specified and np.dtype("float64") in specified
        np.testing.assert_array_equal(generator.generate(prompt, 5), greedy_by_steps(generator, prompt, 5))
        greedy_under_the_whole_model(backbone, head, generator.generate(prompt, 5, mode="segment"), 4)


def test_a_temperature_float32_cannot_hold_is_refused():
    backbone, head = language_model(mem_len=4)
    with pytest.raises(ValueError, match="temperature.*float32"):
        TransformerXLGenerator(backbone, head).generate(np.ones((1, 2), "int32"), 2, sampling="sample",
                                                        temperature=1e-50)
