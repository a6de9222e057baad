"""The backend-neutral tests of the local-recurrence family — the NumPy
window loops, masking, chunking, the DRRT's equations, the block's
equations and the goldens of the public R-Transformer code — run again on
JAX, in a process of its own, in make test-slow (make test's budget: the
contract suite runs the family's layers on JAX)."""

import pathlib

import pytest

from tests.jax_rerun import pytest_on_jax

HERE = pathlib.Path(__file__).parent
TESTS = {
    "test_local_recurrence.py": ["explicit_loop and -3-", "longer_than_the_sequence", "seed_equations",
                                 "as_if_absent", "chunked_equals_unchunked", "stateful_calls"],
    "test_r_transformer_goldens.py": ["matches_the_reference", "block_equations", "other_choice",
                                      "saves_and_reloads"],
}
QUICK = {
    "test_local_recurrence.py": ["seed_equations", "as_if_absent"],
    "test_r_transformer_goldens.py": ["matches_the_reference", "block_equations"],
}


def rerun(tests):
    # The float64 runs rerun on JAX in tests/layers/test_on_jax.py.
    selection = " or ".join(f"({name})" for names in tests.values() for name in names)
    return pytest_on_jax([HERE / name for name in tests], f"({selection}) and not float64")


@pytest.mark.slow
def test_on_jax():
    output = rerun(QUICK)
    # Every selected test ran: 1 + 1 window tests, 3 + 1 of the block.
    assert "6 passed" in output, output[-500:]


@pytest.mark.slow
def test_every_one_on_jax():
    output = rerun(TESTS)
    # Every selected test ran: 3 + 1 + 1 + 1 + 6 + 1 window tests, 3 + 1 + 1 + 1 of the block.
    assert "19 passed" in output, output[-500:]
