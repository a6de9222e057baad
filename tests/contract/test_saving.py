"""Saving every entry: a `.keras` file loads in safe mode with no custom
objects and gives the same outputs (`make test`); a SavedModel's `serve`
gives Keras' outputs, and its `step` checks the states' batch before it
reads them (`make check`)."""

import keras
import pytest
import tensorflow as tf

from keras_relrec.export import plan_export
from keras_relrec.export.graph import endpoints
from tests.contract.conformance import assert_close
from tests.contract.conformance import entries
from tests.contract.conformance import protocol_model
from tests.contract.conformance import streaming_models
from tests.contract.registry import PROTOCOL_ENTRIES
from tests.contract.registry import RECURRENT_ENTRIES
from tests.export.saved_model_stream import ungated_state_reads


# `.keras` save and safe-mode load with no custom objects.
@entries
def test_keras_file_round_trip(entry, tmp_path):
    model = entry.make_model()
    x = entry.make_input()
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path, safe_mode=True)
    assert_close(loaded(x), model(x), atol=0)


# SavedModel export.
@pytest.mark.check
@entries
def test_saved_model_export(entry, tmp_path):
    model = entry.make_model()
    x = entry.make_input()
    model.export(str(tmp_path / "sm"), format="tf_saved_model", verbose=False)
    reloaded = tf.saved_model.load(str(tmp_path / "sm"))
    assert_close(reloaded.serve(x), model(x))


@pytest.mark.check
@pytest.mark.parametrize("entry", RECURRENT_ENTRIES + PROTOCOL_ENTRIES, ids=lambda e: e.id)
def test_saved_model_step_checks_state_batches_first(entry):
    """The SavedModel's `step` reads no state before checking its batch, so
    a wrong batch is refused by name whatever order the runtime picks."""
    models = streaming_models(entry) if entry.recurrent else {"alone": protocol_model(entry, masked=False)}
    for name, model in models.items():
        plan = plan_export(model)
        specs = {**plan.frame_specs(), **plan.state_specs()}
        step = tf.function(endpoints.step_fn(model, plan, check_batch=True)).get_concrete_function(specs)
        assert ungated_state_reads(step, list(plan.state_specs())) == [], name
