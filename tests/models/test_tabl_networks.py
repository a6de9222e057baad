"""The paper's A/B/C networks: shapes, layers, training setup, export."""

import keras
import numpy as np
import pytest

from keras_relrec.export import export_tflite
from keras_relrec.export import run_sequence
from keras_relrec.layers import TABL
from keras_relrec.layers import BilinearLayer
from keras_relrec.models import class_weights
from keras_relrec.models import compile_as_in_paper
from keras_relrec.models import tabl_network


@pytest.mark.parametrize("config, hidden", [("A", []), ("B", [(5, 120)]),
                                            ("C", [(10, 60), (5, 120)])])
@pytest.mark.parametrize("kind", ["TABL", "BL"])
def test_configurations(config, hidden, kind):
    model = tabl_network(config, kind)
    bilinear = [layer for layer in model.layers if isinstance(layer, BilinearLayer)]
    # Hidden layers (T', D') in Keras' layout, then the squeezed last layer.
    assert [tuple(layer.output.shape[1:]) for layer in bilinear[:-1]] == hidden
    assert isinstance(bilinear[-1], TABL) == (kind == "TABL")
    assert tuple(model.output.shape) == (None, 3)


def test_paper_layout_and_max_norm():
    model = tabl_network("C", "TABL", input_shape=(40, 10), data_format="channels_first",
                         max_norm=3.0)
    assert tuple(model.get_layer("bl_1").output.shape) == (None, 60, 10)
    for layer in model.layers:
        if isinstance(layer, BilinearLayer):
            assert isinstance(layer.kernel_constraint, keras.constraints.MaxNorm)


def test_training_setup():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 10, 40)).astype("float32")
    y = np.array([0] * 40 + [1] * 16 + [2] * 8)
    weights = class_weights(y)
    assert weights == pytest.approx({0: 64 / 120, 1: 64 / 48, 2: 64 / 24})
    model = compile_as_in_paper(tabl_network("B", "TABL"))
    assert model.optimizer.learning_rate.numpy() == pytest.approx(0.01)
    lam = model.get_layer("tabl").lambda_
    model.fit(x, y, class_weight=weights, epochs=2, batch_size=16, verbose=0)
    assert 0.0 <= float(lam.numpy()) <= 1.0 and float(lam.numpy()) != 0.5


def test_bad_arguments():
    for kwargs, name in (({"config": "D"}, "config"), ({"kind": "LSTM"}, "kind"),
                         ({"dropout": 1.0}, "dropout"), ({"max_norm": 0.0}, "max_norm")):
        with pytest.raises(ValueError, match=name):
            tabl_network(**kwargs)


def test_c_tabl_exports_to_tflite(tmp_path):
    model = tabl_network("C", "TABL")
    x = np.random.default_rng(1).normal(size=(3, 10, 40)).astype("float32")
    summary = export_tflite(model, tmp_path / "c_tabl.tflite", dynamic_length=False)
    assert not [op for op in summary["ops"] if op.startswith("CUSTOM")]
    np.testing.assert_allclose(run_sequence(tmp_path / "c_tabl.tflite", x)["output"],
                               model.predict(x, verbose=0), atol=1e-5)
