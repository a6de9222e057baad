"""drrt_classifier exports: builtins-only TFLite in sequence mode (two inputs
by name) equal to Keras, and a refusal to stream that names the layer which
reads both whole sequences."""

import keras
import numpy as np
import pytest

from keras_relrec.export import ExportError
from keras_relrec.export import export_tflite
from keras_relrec.export import plan_export
from keras_relrec.export import run_sequence
from keras_relrec.models import drrt_classifier


@pytest.mark.parametrize("local_recurrence", [True, False])
def test_exports_in_sequence_mode_only(local_recurrence, tmp_path):
    model = drrt_classifier(((12, 3), (8, 2)), 4, feature_units=4, relation_units=4, regions=3, fusion="maxout",
                            local_recurrence=local_recurrence, mask_value=0.0)
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(3, 12, 3)).astype("float32"), rng.normal(size=(3, 8, 2)).astype("float32")
    a[0, -3:] = 0.0  # padding, masked
    summary = export_tflite(model, tmp_path / "drrt.tflite")
    assert not [op for op in summary["ops"] if op.startswith("CUSTOM")], summary["ops"]
    got = run_sequence(tmp_path / "drrt.tflite", {"a": a, "b": b})["output"]
    np.testing.assert_allclose(got, model.predict([a, b], verbose=0), atol=1e-5)
    # The local recurrence streams; the relations read both whole sequences.
    assert plan_export(model).streaming_refusal.startswith("layer 'interaction_0' (InteractionTransformer)")
    with pytest.raises(ExportError, match="interaction_0"):
        export_tflite(model, tmp_path / "step.tflite", streaming=True)


def test_the_literal_regional_maps_reach_every_block():
    kwargs = dict(feature_units=4, relation_units=4, regions=3, num_blocks=2, seed=0)
    confined = drrt_classifier(((12, 3), (8, 2)), 4, **kwargs)
    literal = drrt_classifier(((12, 3), (8, 2)), 4, confine_regional_maps=False, **kwargs)
    blocks = [layer for layer in literal.layers if layer.name.startswith("interaction_")]
    assert len(blocks) == 2 and all(not layer.confine_regional_maps for layer in blocks)
    literal.set_weights(confined.get_weights())
    rng = np.random.default_rng(0)
    x = [rng.normal(size=(2, 12, 3)).astype("float32"), rng.normal(size=(2, 8, 2)).astype("float32")]
    assert not np.allclose(literal.predict(x, verbose=0), confined.predict(x, verbose=0), atol=1e-4)


def test_more_regions_than_positions_are_refused():
    with pytest.raises(ValueError, match=r"`regions` must be at most .* regions=7 where A has 4 and B has 6"):
        drrt_classifier(((4, 2), (6, 2)), 3, regions=7)
    with pytest.raises(ValueError, match=r"regions=5 where A has 4 positions"):
        drrt_classifier(((4, 2), (6, 2)), 3, regions=5, local_recurrence=False)
    drrt_classifier(((4, 2), (6, 2)), 3, regions=4, feature_units=4, relation_units=4)


def test_a_mask_value_that_is_not_a_number_is_refused():
    for bad in ("x", float("nan"), True):
        with pytest.raises(ValueError, match=r"`mask_value` must be None or a number"):
            drrt_classifier(((6, 2), (6, 2)), 3, mask_value=bad)


def test_an_input_of_padding_alone_leaves_the_other_to_decide():
    """A second input all padding has no valid position to average: its
    mean is zeros (not GlobalAveragePooling1D's 0/0), so the logits are
    finite and follow the first input."""
    model = drrt_classifier(((6, 2), (6, 2)), 3, feature_units=4, window_size=2, relation_units=4,
                            hidden_units=(16, 16), mask_value=0.0, seed=0)
    rng = np.random.default_rng(0)
    a = rng.normal(size=(2, 6, 2)).astype("float32")
    padding = np.zeros((2, 6, 2), "float32")
    probe = keras.Model(model.inputs, [model.get_layer("mean_b").output, model.output])
    mean_b, logits = probe.predict([a, padding], verbose=0)
    np.testing.assert_array_equal(mean_b, 0.0)
    assert np.all(np.isfinite(logits))
    assert not np.allclose(logits[0], logits[1], atol=1e-4)
