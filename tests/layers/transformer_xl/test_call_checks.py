"""Call arguments the Transformer-XL family refuses by name (masks, shared
relative biases, recalled memory offsets), and the warning of a stateful
call that cuts a segment short. Token ids: tests/contract/test_token_ids.py."""

import re
import warnings

import keras
import numpy as np
import pytest

from keras_relrec.layers import RelativeMultiHeadAttention
from keras_relrec.layers import TransformerXL
from keras_relrec.layers import TransformerXLBlock

BACKBONE = {"num_layers": 1, "num_heads": 2, "head_size": 4, "hidden_dim": 8, "intermediate_dim": 16,
            "segment_len": 4, "mem_len": 4, "vocabulary_size": 20}
WRONG_MASKS = {"length": np.ones((2, 5), bool), "rank": np.ones((2, 4, 1), bool), "batch": np.ones((3, 4), bool)}


@pytest.mark.parametrize("kind", WRONG_MASKS)
@pytest.mark.parametrize(("layer", "inputs"), [
    (lambda: RelativeMultiHeadAttention(2, 4), np.ones((2, 4, 8), "float32")),
    (lambda: TransformerXL(**BACKBONE), np.ones((2, 4), "int32")),
], ids=["attention", "transformer_xl"])
def test_a_mask_of_another_shape_is_refused(layer, inputs, kind):
    with pytest.raises(ValueError, match=r"expects `mask` of shape \(batch, steps\) = \(2, 4\)"):
        layer()(inputs, mask=WRONG_MASKS[kind])


@pytest.mark.parametrize("shape", [(2, 5), (1, 4)], ids=["head_size", "broadcast_over_heads"])
def test_shared_relative_biases_of_another_shape_are_refused(shape):
    attention = RelativeMultiHeadAttention(2, 4, shared_relative_biases=True)
    bias = np.zeros(shape, "float32")
    with pytest.raises(ValueError, match=r"`relative_biases` \(u, v\), each of shape \(num_heads, head_size\) = "
                                         r"\(2, 4\); received shapes \[" + re.escape(str(shape))):
        attention(np.ones((1, 3, 8), "float32"), relative_biases=(bias, bias))


@pytest.mark.parametrize(("offsets", "match"), [
    (np.full((1, 2), 50, "int32"), r"`memory_offsets` in 1\.\.max_offset=4 .*holding 50"),
    (np.zeros((1, 2), "int32"), r"`memory_offsets` in 1\.\.max_offset=4 .*holding 0"),
    (50, r"`memory_offsets`, a tensor of the memory's shape \(batch, slots\); received memory_offsets=50"),
], ids=["beyond_max_offset", "not_before_the_segment", "scalar"])
def test_recalled_memory_offsets_out_of_the_table_are_refused(offsets, match):
    block = TransformerXLBlock(2, 4, 16)
    with pytest.raises(ValueError, match=match):
        block(np.ones((1, 3, 8), "float32"), memory=np.ones((1, 2, 8), "float32"), memory_offsets=offsets,
              max_offset=4)


def test_offsets_within_the_table_run():
    block = TransformerXLBlock(2, 4, 16)
    outputs, _ = block(np.ones((1, 3, 8), "float32"), memory=np.ones((1, 2, 8), "float32"),
                       memory_offsets=np.array([[4, 1]], "int32"), max_offset=4)
    assert np.isfinite(np.asarray(outputs)).all()


def test_a_stateful_call_after_one_cut_short_warns_once():
    """A stream's last call may be short; a call going on from it (no
    reset_state() between) is warned of, once per layer."""
    tokens = keras.Input((None,), batch_size=1, dtype="int32")
    layer = TransformerXL(**BACKBONE, stateful=True)
    keras.Model(tokens, layer(tokens))
    ids = np.arange(8, dtype="int32")[None]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        layer(ids[:, :4])  # whole segments
        layer(ids[:, :5])  # a stream's last call, short
        layer.reset_state()
        layer(ids[:, :3])
        layer.reset_state()
    layer(ids[:, :5])
    with pytest.warns(UserWarning, match=r"goes on from a call whose length was not a multiple of "
                                         r"segment_len=4.*reset_state"):
        layer(ids[:, 5:])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        layer(ids[:, 5:])  # once per layer
