"""The relation-transformer family's equations in float64 NumPy — both
modules in every pairwise form, a region map that is not the default,
masking, the interaction transformer and the classifier — run again on
JAX, in a process of their own, in make test-slow (make test's budget:
the contract suite runs all three layers on JAX)."""

import pathlib

import pytest

from tests.jax_rerun import pytest_on_jax

HERE = pathlib.Path(__file__).parent
SELECTION = ("match_the_equations or matches_the_equations or relates_positions or as_if_absent or masked_out "
             "or default_split")


@pytest.mark.slow
def test_on_jax():
    output = pytest_on_jax([HERE / "test_relation_modules.py", HERE / "test_interaction_transformer.py"], SELECTION)
    # 3 + 3 global and regional forms, 1 + 1 + 1 + 2 properties, 4 + 1 + 2 of the transformer (confined and
    # literal regional maps) and the classifier.
    assert "18 passed" in output, output[-500:]
