"""Samples are independent, whatever one of them holds: NaN, infinity or a
value near float32's range (1e30, which overflows inside a layer) in one
sample of an unmasked batch raises nothing and leaves the other samples'
outputs as they are without it, for every entry that takes real values.
The sample that holds it may give NaN; a check that refused the batch, or
an internal index that the value derailed (a segment cache's recall), would
stop every sample for one bad one."""

import numpy as np
import pytest

from tests.contract.conformance import as_list
from tests.contract.conformance import assert_close
from tests.contract.registry import ENTRIES

# A minute of eager calls of every entry: in `make check`.
pytestmark = pytest.mark.check

REAL_ENTRIES = [entry for entry in ENTRIES if entry.input_dtype != "int32"]


@pytest.mark.parametrize("value", [np.nan, np.inf, 1e30], ids=["nan", "inf", "1e30"])
@pytest.mark.parametrize("entry", REAL_ENTRIES, ids=lambda e: e.id)
def test_a_bad_value_in_one_sample_leaves_the_others(entry, value):
    layer = entry.make_layer()
    x = entry.make_input(batch=3, seed=4)
    want = [np.asarray(o) for o in as_list(layer(x))]
    bad = [v.copy() for v in as_list(x)]
    bad[0][1, 1] = value  # sample 1, its second step (or row), every feature
    got = [np.asarray(o) for o in as_list(layer(entry.structured(bad)))]
    for g, w in zip(got, want, strict=True):
        assert_close(g[[0, 2]], w[[0, 2]])
