"""Every weight importer of `keras_relrec.migrate` is all or nothing: a state
dict with one bad array (another shape, strings, a NaN, an inf, or the key
missing) raises a `ValueError` naming the key and what is wrong, and leaves
every weight of the model bit-identical. A new importer joins by one entry
in `IMPORTERS`."""

import dataclasses
import pathlib
from collections.abc import Callable

import numpy as np
import pytest

from keras_relrec.layers import RelationalMemoryCell
from keras_relrec.layers import RTransformerBlock
from keras_relrec.layers import TransformerXL
from keras_relrec.migrate import load_hf_transfo_xl
from keras_relrec.migrate import load_r_transformer_block
from keras_relrec.migrate import load_sonnet_relational_memory
from tests.migrate.test_hf_transfo_xl import params
from tests.migrate.test_sonnet_relational_memory import CONFIG as SONNET_CONFIG
from tests.migrate.test_sonnet_relational_memory import sonnet_variables
from tests.migrate.weights import weights_bytes

GOLDENS = pathlib.Path(__file__).parents[1] / "goldens"


@dataclasses.dataclass
class Importer:
    """id; make() → a small built model; state_dict() → a valid state dict
    for it; load(model, state_dict); ignored: the keys of that state dict
    the importer does not load (so corrupting them is no error)."""

    id: str
    make: Callable
    state_dict: Callable
    load: Callable
    ignored: tuple = ()


def hf_model():
    model = TransformerXL(num_layers=2, num_heads=2, head_size=8, hidden_dim=16, intermediate_dim=32,
                          segment_len=4, mem_len=6, vocabulary_size=11, tie_relative_biases=False)
    model(np.zeros((1, 4), "int32"))
    return model


def sonnet_cell():
    cell = RelationalMemoryCell(**SONNET_CONFIG)
    cell.build((None, 5))
    return cell


def r_transformer_block():
    block = RTransformerBlock(2, 3, num_local_layers=2, cell="gru")
    block(np.zeros((1, 7, 8), "float32"))
    return block


R_TRANSFORMER = params(np.load(GOLDENS / "r_transformer_block_gru.npz"))

IMPORTERS = [
    Importer("hf_transfo_xl", hf_model, lambda: params(np.load(GOLDENS / "transfo_xl_model_postln.npz")),
             load_hf_transfo_xl, ignored=("pos_emb.inv_freq",)),
    Importer("sonnet_relational_memory", sonnet_cell,
             lambda: sonnet_variables(np.random.default_rng(0), features=5, mlp_layers=2, gate_width=8,
                                      **SONNET_CONFIG),
             load_sonnet_relational_memory),
    Importer("r_transformer", r_transformer_block, lambda: dict(R_TRANSFORMER), load_r_transformer_block,
             ignored=tuple(k for k in R_TRANSFORMER if ".local_rnn.output." in k)),
]


def with_nan(array):
    array = np.array(array, "float64")
    array.flat[-1] = np.nan
    return array


def with_inf(array):
    array = np.array(array, "float64")
    array.flat[0] = -np.inf
    return array


# (corruption, what the error must say): each replaces the array of one key,
# or (None) removes the key.
CORRUPTIONS = {
    "wrong_shape": (lambda a: np.zeros(np.shape(a) + (1,)), "shape"),
    "strings": (lambda a: np.full(np.shape(a), "a"), "dtype"),
    "nan": (with_nan, "non-finite"),
    "inf": (with_inf, "non-finite"),
    "missing": (None, "no key|missing"),
}

importers = pytest.mark.parametrize("importer", IMPORTERS, ids=lambda i: i.id)


@importers
def test_a_valid_state_dict_sets_every_weight(importer):
    """So that 'unchanged' below means the importer wrote nothing."""
    model = importer.make()
    before = weights_bytes(model)
    importer.load(model, importer.state_dict())
    assert all(a != b for a, b in zip(before, weights_bytes(model)))


@importers
@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_one_bad_array_raises_and_writes_nothing(importer, corruption):
    corrupt, problem = CORRUPTIONS[corruption]
    model, valid = importer.make(), importer.state_dict()
    before = weights_bytes(model)
    # Every key in turn, so that the last one the importer reads is among them.
    for key in (k for k in valid if k not in importer.ignored):
        state_dict = dict(valid)
        if corrupt is None:
            del state_dict[key]
        else:
            state_dict[key] = corrupt(valid[key])
        with pytest.raises(ValueError, match=problem) as error:
            importer.load(model, state_dict)
        assert f"'{key}'" in str(error.value)
        assert weights_bytes(model) == before, key
