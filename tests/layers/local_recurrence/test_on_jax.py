"""The backend-neutral tests of the local-recurrence family — the NumPy
window loops, masking, chunking, the seed's equations, the block's
equations and the goldens of the public R-Transformer code — run again on
JAX, in a process of its own."""

import pathlib

from tests.jax_rerun import pytest_on_jax

HERE = pathlib.Path(__file__).parent
TESTS = {
    "test_local_recurrence.py": ["explicit_loop and 3", "longer_than_the_sequence", "seed_equations",
                                 "as_if_absent", "chunked_equals_unchunked", "stateful_calls"],
    "test_r_transformer_goldens.py": ["matches_the_reference", "block_equations", "other_choice",
                                      "saves_and_reloads"],
}


def test_on_jax():
    output = pytest_on_jax([HERE / name for name in TESTS],
                           " or ".join(f"({name})" for names in TESTS.values() for name in names))
    # Every selected test ran: 3 + 1 + 1 + 1 + 6 + 1 window tests, 3 + 1 + 1 + 1 of the block.
    assert "19 passed" in output, output[-500:]
