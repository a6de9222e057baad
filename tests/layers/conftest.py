import pytest

from tests.layers.float64 import Precision
from tests.layers.float64 import float64_policy


@pytest.fixture(params=["float32", "float64"])
def precision(request):
    """A reference test taking it runs in float32, and again under the
    float64 dtype policy (see tests/layers/float64.py); one that needs the
    float64 run alone parametrizes it indirectly with ["float64"]."""
    if request.param == "float32":
        yield Precision("float32")
        return
    with float64_policy():
        yield Precision("float64")
