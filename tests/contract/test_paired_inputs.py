"""Inputs of different batch sizes, for every entry of several inputs: a
`ValueError` that names the inputs and both sizes, never a backend error
or a batch of one broadcast silently over the other's examples."""

import re

import numpy as np
import pytest

from tests.contract.registry import ENTRIES

PAIRED_ENTRIES = [e for e in ENTRIES if len(e.input_shapes) > 1]


def batches_of(entry, sizes):
    """The entry's inputs, the k-th of `sizes[k]` examples."""
    return entry.structured([np.asarray(x)[:1].repeat(size, axis=0)
                             for x, size in zip(entry.make_input(batch=1), sizes)])


@pytest.mark.parametrize("entry", PAIRED_ENTRIES, ids=lambda e: e.id)
@pytest.mark.parametrize("sizes", [(2, 3), (1, 3), (3, 1)], ids=lambda s: f"{s[0]}-vs-{s[1]}")
def test_inputs_of_different_batch_sizes_are_refused(entry, sizes):
    sizes = sizes + (sizes[-1],) * (len(entry.input_shapes) - 2)
    built = entry.make_layer()
    built(entry.make_input(batch=2))
    for layer in (entry.make_layer(), built):
        with pytest.raises(ValueError, match="batch size") as info:
            layer(batches_of(entry, sizes))
        message = str(info.value)
        assert re.search(r"\b{}\b.*\b{}\b".format(*sizes[:2]), message), message
