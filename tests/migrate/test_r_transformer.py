"""The R-Transformer importer refuses a bad array before it writes any
weight (its goldens, which it is held to, are in
tests/layers/local_recurrence/test_r_transformer_goldens.py)."""

import pathlib

import numpy as np
import pytest

from keras_relrec.layers import RTransformerBlock
from keras_relrec.migrate import load_r_transformer_block
from tests.migrate.test_hf_transfo_xl import params
from tests.migrate.weights import weights_bytes

GOLDENS = pathlib.Path(__file__).parents[1] / "goldens"


@pytest.mark.parametrize("bad, problem", [("a", "holds dtype <U1"), (np.nan, "holds 8 non-finite")])
def test_a_bad_last_array_is_refused_before_any_weight_is_written(bad, problem):
    """Strings or NaN in the last array read: a ValueError naming it, and
    not one of the 20 arrays before it written."""
    golden = np.load(GOLDENS / "r_transformer_block_gru.npz")
    block = RTransformerBlock(2, 3, num_local_layers=2)
    block(golden["x"].astype("float32"))
    load_r_transformer_block(block, params(golden))
    weights = {k: v + 1 for k, v in params(golden).items()}
    weights["connections.1.norm.b_2"] = np.full((8,), bad)
    before = weights_bytes(block)
    with pytest.raises(ValueError, match=f"key 'connections.1.norm.b_2' {problem}"):
        load_r_transformer_block(block, weights)
    assert weights_bytes(block) == before


def test_a_value_beyond_the_variable_dtype_is_refused_before_any_weight_is_written():
    """1e300 is finite in float64 but overflows the float32 variables."""
    golden = np.load(GOLDENS / "r_transformer_block_gru.npz")
    block = RTransformerBlock(2, 3, num_local_layers=2)
    block(golden["x"].astype("float32"))
    weights = params(golden)
    weights["connections.1.norm.b_2"] = np.full((8,), 1e300)
    before = weights_bytes(block)
    with pytest.raises(ValueError, match="overflows its dtype float32"):
        load_r_transformer_block(block, weights)
    assert weights_bytes(block) == before
