"""The initial states of a streaming file of a fixed batch (targets "micro"
and "accelerator"): such a file has `step` as its only signature, so
`export_tflite` writes the states into `<name>.initial_state.npz` beside it
(as the integers of an integer file), with the step's chunk length when it
takes chunks; the runners read them back from there.

The two files are one unit (see `keras_relrec.utils.atomic_files`): the
`.npz` records the SHA-256 of the `.tflite` it was written with and is
replaced first, the `.tflite` last, and `read_initial_state` refuses a
`.npz` that belongs to another `.tflite` (an export killed between the two
renames, or files of different exports side by side).
"""

import hashlib
import pathlib

import numpy as np

from keras_relrec.utils import atomic_files

# The chunk length's key in the `.npz`, beside the states'.
CHUNK_LENGTH_KEY = "_chunk_length"
# The key of the SHA-256 (hex) of the `.tflite` file the states belong to.
FINGERPRINT_KEY = "_tflite_sha256"


def initial_state_path(path):
    """Where `export_tflite(..., target="micro", streaming=True)` writes the
    initial states of `path`: `<name>.initial_state.npz` beside it."""
    return pathlib.Path(path).with_suffix(".initial_state.npz")


def write_initial_state(path, content, states, chunk_length):
    """Writes the `.tflite` file `path` (`content`) and, beside it, its
    {state name: array} (and `chunk_length`, None for a step of one frame)
    with the file's fingerprint, as one unit; returns where the states went."""
    extra = {} if chunk_length is None else {CHUNK_LENGTH_KEY: chunk_length}
    sidecar = initial_state_path(path)
    # The .npz first: the .tflite's rename commits the pair.
    with atomic_files.replacing(sidecar, path) as (sidecar_temp, path_temp):
        np.savez(sidecar_temp, **states, **extra, **{FINGERPRINT_KEY: _fingerprint(content)})
        path_temp.write_bytes(content)
    return sidecar


def read_initial_state(path, content=None, names=None):
    """({state name: array}, the chunk length or None) from the file beside
    a streaming micro (or accelerator) file `path`; `content`, the file's
    bytes where the caller has read them, is what the fingerprint is
    checked against (else `path` is read); `names`, the states the file's
    step takes where the caller knows them.

    Raises:
        ValueError: the file beside `path` is not an `.npz` (truncated,
            or other bytes), holds a state that is not finite, lacks a
            state of `names` or holds one that is not among them, or was
            written for another version of `path` (files of an older
            export carry no fingerprint and are taken as they are).
    """
    where = initial_state_path(path)
    try:
        with np.load(where, allow_pickle=False) as archive:
            sidecar = {name: archive[name] for name in archive.files}
    except FileNotFoundError:
        raise
    except Exception as error:  # NumPy's and zipfile's errors of a damaged file vary
        raise ValueError(
            f"{where} is not a readable .npz of initial states ({type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else 'no detail'}); export the model again."
        ) from None
    recorded = sidecar.pop(FINGERPRINT_KEY, None)
    if content is None and recorded is not None:
        content = pathlib.Path(path).read_bytes()
    if recorded is not None and str(recorded) != _fingerprint(content):
        raise ValueError(
            f"Argument `path`: {where} holds the initial states of another version of {path} "
            "(an export stopped between writing the two, or files of different exports side by side); "
            "export the model again."
        )
    chunk = sidecar.pop(CHUNK_LENGTH_KEY, None)
    if names is not None and set(names) != set(sidecar):
        missing, extra = sorted(set(names) - set(sidecar)), sorted(set(sidecar) - set(names))
        raise ValueError(
            f"{where} must hold the states {sorted(names)} that the step of {path} takes"
            + (f"; it lacks {missing}" if missing else "") + (f"; it holds {extra}, which the step does not take"
                                                                if extra else "")
            + ". Export the model again."
        )
    for name, value in sidecar.items():
        if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            raise ValueError(f"{where} holds a state that is not finite, {name!r} (NaN or infinity); the step would "
                             "carry it along. Export the model again.")
    return sidecar, None if chunk is None else int(chunk)


def _fingerprint(content):
    return hashlib.sha256(bytes(content)).hexdigest()
