"""The backend-neutral tests of the local-recurrence family — the NumPy
window loops, masking, chunking, the seed's equations, the block's
equations and the goldens of the public R-Transformer code — run again on
JAX, in a process of its own."""

import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).parent
ROOT = HERE.parents[2]
TESTS = {
    "test_local_recurrence.py": ["explicit_loop and 3", "longer_than_the_sequence", "seed_equations",
                                 "as_if_absent", "chunked_equals_unchunked", "stateful_calls"],
    "test_r_transformer_goldens.py": ["matches_the_reference", "block_equations", "other_choice",
                                      "saves_and_reloads"],
}


def test_on_jax():
    paths = [str(HERE / name) for name in TESTS]
    selection = " or ".join(f"({name})" for names in TESTS.values() for name in names)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *paths, "-k", selection],
        env={**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    # Every selected test ran: 3 + 1 + 1 + 1 + 6 + 1 window tests, 3 + 1 + 1 + 1 of the block.
    assert "19 passed" in result.stdout and "skipped" not in result.stdout, result.stdout[-500:]
