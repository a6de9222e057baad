"""Decoding with the memories kept as keys and values in a ring of slots
(`key_value_cache`, `call_with_cache`) against the paper's segment
recurrence in float64 NumPy: a prompt fills the memories (some slots still
empty), then segments of 1 to segment_len positions follow for long enough
that the ring wraps around several times."""

import numpy as np
import pytest

from keras_relrec.layers import SegmentCacheTransformer
from tests.layers.transformer_xl.numpy_reference import backbone_call_np
from tests.layers.transformer_xl.test_transformer_xl_equations import D
from tests.layers.transformer_xl.test_transformer_xl_equations import make_backbone

ATOL = 1e-5


@pytest.mark.parametrize(("options", "lengths"), [
    ({}, [1] * 9),
    ({"pre_lnorm": True, "tie_relative_biases": True}, [1] * 9),
    ({"same_length": True, "clamp_len": 2}, [1] * 9),
    ({"mem_len": 2}, [3, 1, 2, 3, 3]),  # segments longer than the memory
    ({"segment_len": 2, "mem_len": 5, "same_length": True}, [2, 1, 2, 2, 1, 2]),
], ids=["tokens", "tied-pre-ln", "same-length-clamped", "short-memory", "segments"])
def test_decoding_matches_the_segment_recurrence(options, lengths, precision):
    rng = np.random.default_rng(3)
    model = make_backbone(**options)
    batch = 2
    prompt = rng.normal(size=(batch, 2, D))
    valid = np.ones((batch, 2), bool)
    states = [precision.array(s) for s in model.get_initial_state(batch)]
    _, states = model.streaming_step(precision.array(prompt), states)
    _, want_states = backbone_call_np(model, prompt, valid, [np.asarray(s, "float64")
                                                             for s in model.get_initial_state(batch)])
    cache = model.key_value_cache(states)
    for k, length in enumerate(lengths):
        x = rng.normal(size=(batch, length, D))
        got, cache = model.call_with_cache(precision.array(x), cache)
        want, want_states = backbone_call_np(model, x, np.ones((batch, length), bool), want_states)
        precision.assert_close(got, want, atol=ATOL, err_msg=f"segment {k} of {length} positions")


def test_tokens_decode_as_they_stream():
    model = make_backbone(vocabulary_size=11, same_length=True)
    tokens = np.random.default_rng(4).integers(0, 11, size=(3, 8))
    states = model.get_initial_state(3)
    cache = model.key_value_cache(states)
    for t in range(8):
        want, states = model.streaming_step(tokens[:, t : t + 1], states)
        got, cache = model.call_with_cache(tokens[:, t : t + 1], cache)
        np.testing.assert_allclose(got, want, atol=ATOL)


def test_what_decoding_refuses_says_why():
    model = make_backbone(segment_len=3)
    cache = model.key_value_cache(model.get_initial_state(1))
    with pytest.raises(ValueError, match="segment of 1 to segment_len=3"):
        model.call_with_cache(np.zeros((1, 4, D), "float32"), cache)
    with pytest.raises(ValueError, match="expects the 8 tensors of key_value_cache; received 7"):
        model.call_with_cache(np.zeros((1, 1, D), "float32"), cache[:-1])
    for layer in (make_backbone(mem_len=0),
                  SegmentCacheTransformer(1, 1, 2, 4, 4, segment_len=2, num_slots=2, top_k=1)):
        with pytest.raises(ValueError, match="needs a memory of projected positions, a FifoMemory with mem_len > 0"):
            layer.key_value_cache([])


def test_states_and_inputs_that_do_not_fit_the_cache_say_so():
    model = make_backbone()
    states = model.get_initial_state(2)
    with pytest.raises(ValueError, match="expects 3 states"):
        model.key_value_cache(states[1:])
    with pytest.raises(ValueError, match="state 'memory_0' of shape"):
        model.key_value_cache([states[0][:, :2], *states[1:]])
    cache = model.key_value_cache(states)
    with pytest.raises(ValueError, match="batch size 2 for inputs of batch size 1"):
        model.call_with_cache(np.zeros((1, 1, D), "float32"), cache)
    with pytest.raises(ValueError, match="expects inputs"):
        model.call_with_cache(np.zeros((2, 1), "int32"), cache)
