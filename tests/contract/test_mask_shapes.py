"""Masks of the wrong shape, for every entry that reads one (recurrent
entries and `takes_mask` entries): a mask of another rank, length or
batch size than its input's (batch, steps) raises a `ValueError` that
names the mask, never a backend error or a silent broadcast. For an entry
of several inputs, each input's mask in turn.

Cells run inside `keras.layers.RNN`, which takes the mask and hands the
cell one step without it: the cell cannot check the mask, and Keras' RNN
does. It raises for a mask of another length, of rank 4 or of a larger
batch (in the backend, without naming the mask), and broadcasts a
(batch, steps, 1) mask or a batch of one silently. The cell entries are
held to raising where Keras raises; the broadcasts are Keras' own.
"""

import numpy as np
import pytest

from tests.contract.conformance import as_list
from tests.contract.conformance import masking_entries

# Each wrong mask for inputs of `batch` examples and `steps` steps.
WRONG_MASKS = {
    "length": lambda batch, steps: (batch, steps + 1),
    "rank-3": lambda batch, steps: (batch, steps, 1),
    "rank-4": lambda batch, steps: (batch, steps, 1, 1),
    "batch": lambda batch, steps: (batch + 1, steps),
    "batch-of-one": lambda batch, steps: (1, steps),
}
# Those that Keras' RNN refuses (see the module's docstring).
KERAS_RNN_REFUSES = ("length", "rank-4", "batch")


@masking_entries
@pytest.mark.parametrize("kind", WRONG_MASKS)
def test_a_mask_of_the_wrong_shape_is_refused(entry, kind):
    x = as_list(entry.make_input(batch=2))
    good = [np.ones(v.shape[:2], bool) for v in x]
    for k, v in enumerate(x):
        mask = [np.ones(WRONG_MASKS[kind](*v.shape[:2]), bool) if j == k else m for j, m in enumerate(good)]
        layer = entry.make_layer()
        if entry.is_cell:
            if kind in KERAS_RNN_REFUSES:
                with pytest.raises(Exception):  # noqa: B017
                    layer(entry.structured(x), mask=entry.structured(mask))
            continue
        with pytest.raises(ValueError, match="mask") as info:
            layer(entry.structured(x), mask=entry.structured(mask))
        assert str(mask[k].shape) in str(info.value), str(info.value)
