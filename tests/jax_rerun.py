"""Runs selected tests of this suite again on JAX, in a process of their
own (the suite itself runs on TensorFlow)."""

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).parent.parent


def pytest_on_jax(paths, selection, marks="not slow"):
    """Runs `pytest -k selection -m marks` over `paths` with KERAS_BACKEND=jax
    and returns its output, after checking that every selected test passed
    and none was skipped."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *map(str, paths),
         "-k", selection, "-m", marks],
        env={**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert " passed" in result.stdout and "skipped" not in result.stdout, result.stdout[-500:]
    return result.stdout
