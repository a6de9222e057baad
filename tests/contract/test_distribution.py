"""Data-parallel training of every contract entry: the weights after a few
steps on two devices equal those on one device with the same global batch
(within float32 tolerance): `tf.distribute.MirroredStrategy` over two
logical CPUs, and JAX's `keras.distribution.DataParallel` over two host
devices. Each backend trains every entry in a process of its own, where
the devices are set up before the backend starts: `make check` for the first
entry of each family (the families' layers share their code paths),
`make test-slow` for every entry (two compiled training steps of each on
each backend cost about ten minutes in all)."""

import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest

from tests.contract.conformance import ATOL
from tests.contract.conformance import STATEFUL_ENTRIES
from tests.contract.conformance import one_per_family
from tests.contract.npz import pack
from tests.contract.registry import ENTRIES

# Distribution on one process (several replicas of one CPU).
pytestmark = pytest.mark.check

HERE = pathlib.Path(__file__).parent
ROOT = HERE.parent.parent
ENVIRONMENTS = {
    "tensorflow": {"KERAS_BACKEND": "tensorflow"},
    "jax": {"KERAS_BACKEND": "jax", "XLA_FLAGS": "--xla_force_host_platform_device_count=2"},
}


def selected(request):
    """The ids of the entries whose tests of this module the session runs."""
    # Doctests are among the items too, with no module or parameters.
    return {item.callspec.params["entry"].id for item in request.session.items
            if getattr(item, "module", None) is request.module and "entry" in item.callspec.params}


@pytest.fixture(scope="module")
def cases(request, tmp_path_factory):
    """The model alone of each entry the session tests, 8 examples (two
    global batches of 4) and random targets of its outputs' shapes."""
    # A module fixture is set up before the tests' own seeding: without
    # this the weights would depend on which test ran before it.
    keras.utils.set_random_seed(0)
    folder = tmp_path_factory.mktemp("distribution")
    rng = np.random.default_rng(0)
    ids = selected(request)
    for entry in [e for e in ENTRIES if e.id in ids]:
        model = entry.make_model()
        x = entry.make_input(batch=8, seed=1)
        outputs = model.predict(x, verbose=0)
        y = keras.tree.map_structure(lambda o: rng.normal(size=o.shape).astype("float32"), outputs)
        model.save(folder / f"{entry.id}.keras")
        np.savez(folder / f"{entry.id}.case.npz", **pack("x", x), **pack("y", y))
    for entry in [e for e in STATEFUL_ENTRIES if e.id in ids]:
        # A fixed batch of 4: the second batch continues the first's rows.
        inputs = keras.Input(entry.input_shape, batch_size=4)
        model = keras.Model(inputs, entry.make_layer(stateful=True)(inputs))
        x = entry.make_input(batch=8, seed=2)
        y = rng.normal(size=model.predict(x, batch_size=4, verbose=0).shape).astype("float32")
        model.save(folder / f"{entry.id}.stateful.keras")
        np.savez(folder / f"{entry.id}.stateful.case.npz", **pack("x", x), **pack("y", y))
    return folder


@pytest.fixture(scope="module")
def trained(cases):
    """Runs the worker on each backend once; {backend: folder}."""
    for backend, environment in ENVIRONMENTS.items():
        result = subprocess.run(
            [sys.executable, str(HERE / "distribution_worker.py"), str(cases)],
            env={**os.environ, **environment, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        )
        assert result.returncode == 0, f"{backend}: {result.stderr[-3000:]}"
    return cases


@pytest.mark.parametrize("backend", list(ENVIRONMENTS))
@pytest.mark.parametrize("entry", one_per_family(ENTRIES, others=pytest.mark.slow))
def test_two_devices_train_as_one(entry, backend, trained):
    assert_trains_as_one(trained, entry.id, backend)


@pytest.mark.parametrize("backend", list(ENVIRONMENTS))
@pytest.mark.parametrize("entry", one_per_family(STATEFUL_ENTRIES, others=pytest.mark.slow))
def test_stateful_layers_under_data_parallelism(entry, backend, trained):
    """JAX runs one program over the whole batch: its states keep the
    global batch, and a stateful model trains as on one device. Under
    tf.distribute each replica gets half a batch: refused with a
    `ValueError` that says so (Keras' own for keras.layers.RNN)."""
    if backend == "jax":
        assert_trains_as_one(trained, f"{entry.id}.stateful", backend)
        return
    refusal = str(np.load(trained / f"{entry.id}.stateful.{backend}.npz")["refusal"])
    assert "batch size" in refusal and "4" in refusal and "2" in refusal, refusal
    if not (entry.is_cell or issubclass(entry.cls, keras.layers.RNN)):  # ours say why
        assert "tf.distribute" in refusal, refusal


def assert_trains_as_one(trained, name, backend):
    data = np.load(trained / f"{name}.{backend}.npz")
    assert int(data["devices"]) == 2
    assert np.all(data["placed_on"] == 2), "a weight is not on both devices"
    count = len([k for k in data.files if k.startswith("single_")])
    assert count == len([k for k in data.files if k.startswith("parallel_")])
    initial = keras.saving.load_model(trained / f"{name}.keras").get_weights()
    assert count == len(initial)
    if not initial:
        # A layer without weights (SegmentMean, LocalFeatures' windows) has
        # nothing to train: the data-parallel fit ran on both devices.
        return
    moved = False
    for k in range(count):
        np.testing.assert_allclose(data[f"parallel_{k}"], data[f"single_{k}"], atol=ATOL, err_msg=f"weight {k}")
        moved |= not np.allclose(data[f"single_{k}"], initial[k])
    assert moved, "training changed no weight"
