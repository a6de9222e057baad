"""Every entry on every backend: its outputs and one training step equal the
golden arrays TensorFlow computed eagerly (tests/goldens/backends/, made by
tests/goldens/make_backend_goldens.py), from the `.keras` files saved there,
loaded with nothing but `import keras_relrec`.

`make check` runs this module on TensorFlow (oneDNN kernels on: the goldens
are current), again with TensorFlow's portable kernels (oneDNN off, as on
CPUs TensorFlow does not tune for, such as AMD's: some ops exist only in
oneDNN), and on JAX. The step is the backend's own compiled one (a
`tf.function`, a `jax.jit`), against an eager step in the goldens.
"""

import json

import keras
import numpy as np
import pytest

import keras_relrec  # noqa: F401  (registers the layers, as a user's import does)
from tests.contract.conformance import ATOL
from tests.contract.conformance import assert_close
from tests.contract.conformance import dropout_entries
from tests.contract.conformance import fit_one_step
from tests.contract.conformance import masking_entries
from tests.contract.conformance import sgd_mse
from tests.contract.conformance import target_for
from tests.contract.conformance import zeros_step_finite
from tests.contract.npz import unpack
from tests.contract.registry import ENTRIES
from tests.goldens.make_backend_goldens import FOLDER
from tests.goldens.make_backend_goldens import entry_signature
from tests.goldens.make_backend_goldens import golden_inputs

pytestmark = [pytest.mark.check, pytest.mark.jax]


def golden(entry, name):
    """The golden model and arrays `name` (`<id>` or `<id>.masked`) of the
    entry, refused when missing or made for another configuration."""
    remake = (f"run `KERAS_BACKEND=tensorflow python tests/goldens/make_backend_goldens.py {entry.id}` "
              "and commit tests/goldens/backends/")
    if not (FOLDER / f"{name}.npz").exists():
        pytest.fail(f"entry '{entry.id}' has no golden arrays: {remake}")
    signature = (FOLDER / f"{entry.id}.json").read_text().strip()
    if json.loads(signature) != json.loads(entry_signature(entry)):
        pytest.fail(f"the golden arrays of entry '{entry.id}' are of another configuration: {remake}")
    model = keras.saving.load_model(FOLDER / f"{name}.keras", safe_mode=True)
    return model, dict(np.load(FOLDER / f"{name}.npz")), remake


# {id: (model, its loaded weights, arrays, remake hint)}: the golden model
# of an entry, compiled for `sgd_mse` once for both tests that step it (a
# compiled step each cost as much again, most on JAX).
_STEPPED = {}


def stepped_golden(entry):
    """The golden model (its loaded weights restored), its loaded weights,
    arrays and remake hint of the entry, compiled for `sgd_mse`."""
    if entry.id not in _STEPPED:
        model, data, remake = golden(entry, entry.id)
        _STEPPED[entry.id] = (sgd_mse(model), model.get_weights(), data, remake)
    model, fresh, data, remake = _STEPPED[entry.id]
    model.set_weights(fresh)
    return model, fresh, data, remake


def assert_outputs_and_step(model, data, remake):
    """`model` (compiled by `sgd_mse`) gives the golden outputs, and one step
    the golden weights."""
    x, y = unpack(data, "x"), unpack(data, "y")
    assert_close(model.predict_on_batch(x), unpack(data, "outputs"), err_msg=remake)
    model.train_on_batch(x, y)
    stepped = model.get_weights()
    assert len(stepped) == len([k for k in data if k.startswith("fit_weight_")])
    for i, (w, v) in enumerate(zip(model.weights, stepped)):
        np.testing.assert_allclose(v, data[f"fit_weight_{i}"], atol=ATOL, err_msg=f"{w.path} after a step; {remake}")


# The two tests of an entry that step its golden model, on one worker.
stepped_entries = pytest.mark.parametrize(
    "entry", [pytest.param(e, id=e.id, marks=pytest.mark.xdist_group(f"golden-{e.id}")) for e in ENTRIES])


@stepped_entries
def test_outputs_and_a_training_step(entry):
    model, _, data, remake = stepped_golden(entry)
    assert_outputs_and_step(model, data, remake)


@masking_entries
def test_masked_outputs_and_a_training_step(entry):
    """Through masked steps, every output in the loss: the gradients of a
    masked softmax or a held state too."""
    model, data, remake = golden(entry, f"{entry.id}.masked")
    assert_outputs_and_step(sgd_mse(model), data, remake)


@stepped_entries
def test_a_step_on_constant_inputs_stays_finite(entry):
    """No sqrt or norm of a constant row gives 0/0 in a gradient (JAX's
    sqrt gradient at 0, times 0, is NaN where TensorFlow's is not)."""
    model, fresh, data, _ = stepped_golden(entry)
    assert zeros_step_finite(model, fresh, unpack(data, "x"), unpack(data, "y"))


@dropout_entries
def test_dropout_draws_masks_in_training(entry):
    """A training step and a training-mode call draw real masks (masks drawn
    inside JAX's `lax.scan` must come from a seed passed in)."""
    model = entry.make_model(**entry.dropout_kwargs)
    x = golden_inputs(entry)
    fit_one_step(model, x, target_for(model, x))
    train, infer = np.asarray(model(x, training=True)), np.asarray(model(x, training=False))
    assert np.all(np.isfinite(train))
    assert not np.allclose(train, infer)
