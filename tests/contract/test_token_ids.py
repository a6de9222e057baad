"""Token ids, for every entry that embeds them (`Entry.vocabulary_size`):
an eager call refuses ids below 0 or from vocabulary_size on with a
`ValueError` naming the range and the id, where the embedding would wrap
a negative id to its last row or fail in the backend's gather, and
float ids that are not whole numbers, which a cast would truncate (whole
ones are cast, as Keras' `Embedding` casts them); under a trace
(`predict`) ids are assumed valid, unchecked, as the layers document."""

import keras
import numpy as np
import pytest

from tests.contract.conformance import assert_close
from tests.contract.registry import ENTRIES

TOKEN_ENTRIES = [e for e in ENTRIES if e.vocabulary_size]
token_entries = pytest.mark.parametrize("entry", TOKEN_ENTRIES, ids=lambda e: e.id)


def test_every_layer_that_embeds_tokens_has_a_vocabulary_size():
    """An entry whose layer takes `vocabulary_size` joins these checks."""
    missing = [e.id for e in ENTRIES if not e.vocabulary_size and not e.scores_tokens
               and "vocabulary_size" in e.make_layer().get_config()]
    assert not missing, f"entries without a vocabulary_size: {missing}"


@token_entries
def test_ids_out_of_the_vocabulary_are_refused_eagerly(entry):
    size = entry.vocabulary_size
    ids = np.random.default_rng(0).integers(0, size, size=(2, entry.input_shapes[0][0])).astype("int32")
    layer = entry.make_layer(vocabulary_size=size)
    layer(ids)
    for bad in (-1, size):
        wrong = ids.copy()
        wrong[1, -1] = bad
        with pytest.raises(ValueError, match=rf"token ids in 0\.\.{size - 1} .*received token id {bad}\."):
            layer(wrong)


@token_entries
def test_float_ids_count_only_when_whole(entry):
    size = entry.vocabulary_size
    ids = np.random.default_rng(2).integers(0, size, size=(2, entry.input_shapes[0][0]))
    layer = entry.make_layer(vocabulary_size=size)
    assert_close(layer(ids.astype("float32")), layer(ids.astype("int32")))
    for bad in (0.5, np.nan):
        wrong = ids.astype("float32")
        wrong[1, -1] = bad
        with pytest.raises(ValueError, match=rf"whole-number token ids .*received token id {bad!r} in a float32"):
            layer(wrong)


@token_entries
def test_traced_calls_leave_ids_unchecked(entry):
    """The check does not break a trace, and is not in it: `predict` gives
    the eager outputs, and runs an id of -1 (Keras' `take` wraps it)."""
    size = entry.vocabulary_size
    ids = np.random.default_rng(1).integers(0, size, size=(2, entry.input_shapes[0][0])).astype("int32")
    tokens = keras.Input((None,), dtype="int32")
    model = keras.Model(tokens, entry.make_layer(vocabulary_size=size)(tokens))
    assert_close(model.predict_on_batch(ids), model(ids))
    ids[1, -1] = -1
    model.predict_on_batch(ids)
