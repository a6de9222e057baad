"""The initial states of a streaming file of a fixed batch (targets "micro"
and "accelerator"): such a file has `step` as its only signature, so
`export_tflite` writes the states into `<name>.initial_state.npz` beside it
(as the integers of an integer file), with the step's chunk length when it
takes chunks; the runners read them back from there.
"""

import pathlib

import numpy as np

# The chunk length's key in the `.npz`, beside the states'.
CHUNK_LENGTH_KEY = "_chunk_length"


def initial_state_path(path):
    """Where `export_tflite(..., target="micro", streaming=True)` writes the
    initial states of `path`: `<name>.initial_state.npz` beside it."""
    return pathlib.Path(path).with_suffix(".initial_state.npz")


def write_initial_state(path, states, chunk_length):
    """Writes {state name: array} (and `chunk_length`, None for a step of
    one frame) beside the file `path`; returns where."""
    extra = {} if chunk_length is None else {CHUNK_LENGTH_KEY: chunk_length}
    sidecar = initial_state_path(path)
    np.savez(sidecar, **states, **extra)
    return sidecar


def read_initial_state(path):
    """({state name: array}, the chunk length or None) from the file beside
    a streaming micro (or accelerator) file."""
    sidecar = dict(np.load(initial_state_path(path)))
    chunk = sidecar.pop(CHUNK_LENGTH_KEY, None)
    return sidecar, None if chunk is None else int(chunk)
