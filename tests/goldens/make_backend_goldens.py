"""Make the golden arrays that every backend's contract run is compared with.

For each contract entry (tests/contract/registry.py), on TensorFlow, eagerly:
the entry's layer behind a `Dense` per input (`behind_a_dense`), saved as
`backends/<id>.keras`, with its input, target, outputs and its weights after
one SGD step in `backends/<id>.npz`; for an entry that reads a mask, the
same for the layer behind a `Masking` (every output flattened into one, the
masked steps in the loss) in `<id>.masked.keras` and `<id>.masked.npz`.
`tests/contract/test_backends.py` loads the files with nothing but
`import keras_relrec` and compares, on TensorFlow, on its portable kernels
and on JAX.

Run it on TensorFlow from the repository root when an entry is added or a
layer's numbers change on purpose (the contract names the entry)::

    KERAS_BACKEND=tensorflow PYTHONPATH=. .venv/bin/python tests/goldens/make_backend_goldens.py [ENTRY_ID ...]

With no ids it remakes every entry's files.
"""

import json
import os
import pathlib
import sys

# oneDNN's kernels on, as the test suite runs them (tests/conftest.py).
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

import keras  # noqa: E402
import numpy as np

from tests.contract.conformance import as_list
from tests.contract.conformance import behind_a_dense
from tests.contract.conformance import fit_one_step
from tests.contract.conformance import masked_model
from tests.contract.conformance import padded_input
from tests.contract.conformance import target_for
from tests.contract.npz import pack
from tests.contract.registry import ENTRIES

FOLDER = pathlib.Path(__file__).parent / "backends"


def entry_signature(entry):
    """The entry's input shapes, whether it reads a mask, and its layer
    configuration without names (which count up from whatever else the
    process built): a golden made for another entry is stale."""
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in sorted(value.items()) if k != "name"}
        if isinstance(value, (list, tuple)):
            return [strip(v) for v in value]
        return value
    signature = {
        "input_shapes": [list(shape) for shape in entry.input_shapes],
        "masked": bool(entry.recurrent or entry.takes_mask),
        "layer": strip(keras.saving.serialize_keras_object(entry.make_layer())),
    }
    return json.dumps(signature, sort_keys=True, default=str)


def flat_masked_model(entry):
    """`masked_model` with every output flattened into one, so that Keras
    weighs the loss by the mask of the steps whatever the outputs' rank."""
    masked = masked_model(entry)
    flat = [keras.layers.Reshape((-1,))(o) for o in as_list(masked.output)]
    return keras.Model(masked.input, flat[0] if len(flat) == 1 else keras.layers.Concatenate()(flat))


def golden_inputs(entry):
    """The input the goldens are computed on."""
    return entry.make_input(batch=4, seed=3)


def record(model, x, name, folder):
    """Saves `model` as `<name>.keras` and its input, target, outputs and
    weights after one eager SGD step as `<name>.npz`."""
    y = target_for(model, x)
    model.save(folder / f"{name}.keras")
    arrays = {**pack("x", x), **pack("y", y), **pack("outputs", as_list(model(x)))}
    arrays.update(pack("fit_weight", fit_one_step(model, x, y, run_eagerly=True)))
    np.savez_compressed(folder / f"{name}.npz", **arrays)


def make(entry, folder=FOLDER):
    keras.utils.set_random_seed(0)
    x = golden_inputs(entry)
    record(behind_a_dense(entry), x, entry.id, folder)
    if entry.recurrent or entry.takes_mask:
        record(flat_masked_model(entry), padded_input(entry, x), f"{entry.id}.masked", folder)
    (folder / f"{entry.id}.json").write_text(entry_signature(entry) + "\n")


def main(ids):
    if keras.backend.backend() != "tensorflow":
        raise SystemExit(f"the goldens are TensorFlow's; this process runs {keras.backend.backend()}")
    FOLDER.mkdir(exist_ok=True)
    unknown = set(ids) - {e.id for e in ENTRIES}
    if unknown:
        raise SystemExit(f"unknown entry ids: {sorted(unknown)}")
    for entry in ENTRIES:
        if not ids or entry.id in ids:
            make(entry)
            print(entry.id)


if __name__ == "__main__":
    main(sys.argv[1:])
