"""The paper's A/B/C networks: shapes, layers, training setup, export."""

import keras
import numpy as np
import pytest

from keras_relrec.export import export_tflite
from keras_relrec.export import run_sequence
from keras_relrec.layers import TABL
from keras_relrec.layers import BilinearLayer
from keras_relrec.layers import BoFQuantizer
from keras_relrec.layers.bag_of_features.local_features import kernel_dilations
from keras_relrec.models import class_weights
from keras_relrec.models import compile_as_in_paper
from keras_relrec.models import tabl_network
from keras_relrec.models.tabl_networks import NUM_SEGMENTS
from tests.layers.bag_of_features.test_bag_of_features_equations import memberships


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


def padded_series(seed=2):
    """Twelve univariate series of 40 steps, the last four padded from step
    25 on with -1e4."""
    x = np.cumsum(np.random.default_rng(seed).normal(size=(12, 40, 1)), axis=1).astype("float32")
    x[8:, 25:] = -1e4
    return x


def test_local_histograms():
    """With `num_codewords`, the bilinear layers see, for each segment of
    the time axis, the histogram of one quantizer per dilation (codebooks:
    k-means of the responses at the valid steps) and the mean of the
    normalized window; padding is in no histogram and no mean."""
    from sklearn.cluster import KMeans

    x = padded_series()
    valid = np.ones((12, 40), bool)
    valid[8:, 25:] = False
    mean, variance = x[valid].mean(), x[valid].var()
    model = tabl_network("C", input_shape=(40, 1), num_classes=2, mask_value=-1e4, normalization=(mean, variance),
                         front_end="kernels", num_codewords=4, codebook_data=x, seed=0, front_end_compression=None)
    quantizers = [layer for layer in model.layers if isinstance(layer, BoFQuantizer)]
    groups = len(kernel_dilations(40))
    assert groups > 1 and [q.name for q in quantizers] == [f"quantizer_{k}" for k in range(1, groups + 1)]
    assert all(q.output_mode == "segment_histograms" and q.num_segments == NUM_SEGMENTS for q in quantizers)
    segments = keras.Model(model.inputs, model.get_layer("segments").output).predict(x, verbose=0)
    assert segments.shape == (12, NUM_SEGMENTS, 4 * groups + 1)
    # Step t is in segment ⌊S t / 40⌋: a padded series' 25 valid steps
    # fill the segments up to step 24's, and the later ones are zeros.
    members = np.arange(40) * NUM_SEGMENTS // 40
    last = members[24]
    assert 0 < last < NUM_SEGMENTS - 1

    def segment_means(values):
        return np.stack([np.stack([values[b][(members == s) & valid[b]].mean(0)
                                   if np.any((members == s) & valid[b]) else np.zeros(values.shape[-1])
                                   for s in range(NUM_SEGMENTS)]) for b in range(12)])

    for k, d in enumerate(kernel_dilations(40)):
        quantizer = model.get_layer(f"quantizer_{k + 1}")
        seen = keras.Model(model.inputs, model.get_layer(f"front_end_norm_d{d}").output).predict(x, verbose=0)
        expected = KMeans(4, n_init=4, random_state=0).fit(seen[valid].astype("float64")).cluster_centers_
        np.testing.assert_allclose(quantizer.codebook.numpy(), expected, atol=1e-4)
        codebook, scales = (np.asarray(w, np.float64) for w in quantizer.get_weights())
        phi = memberships(seen.astype(np.float64), codebook, scales, "l2")
        np.testing.assert_allclose(segments[..., 4 * k:4 * k + 4], segment_means(phi), atol=1e-5)
    standardized = (x.astype(np.float64) - mean) / np.sqrt(variance)
    np.testing.assert_allclose(segments[..., -1:], segment_means(standardized), atol=1e-4)
    assert np.all(segments[8:, last + 1:] == 0.0) and np.all(segments[8:, :last + 1, :-1].sum(-1) > 0)
    assert tuple(model.output.shape) == (None, 2)


def test_local_histograms_segments():
    # "auto": NUM_SEGMENTS (8), or every step where fewer are left.
    assert tabl_network("C", input_shape=(40, 3), num_codewords=4).get_layer("quantizer").num_segments == 8
    model = tabl_network("C", input_shape=(6, 3), num_classes=2, num_codewords=4)
    assert model.get_layer("quantizer").num_segments == 6
    # Each segment: the histogram of 4 codewords and the means of 3 features.
    assert tuple(model.get_layer("bl_1").input.shape) == (None, 6, 4 + 3)
    model = tabl_network("B", input_shape=(40, 1), num_classes=2, front_end="conv", num_codewords=4, num_segments=5)
    assert tuple(model.get_layer("quantizer").output.shape) == (None, 5, 4)
    with pytest.raises(ValueError, match="num_segments"):
        tabl_network("B", input_shape=(40, 1), front_end="conv", num_codewords=4, num_segments=33)
    # Series of any length: the bilinear layers see NUM_SEGMENTS whatever T.
    model = tabl_network("B", input_shape=(None, 1), num_classes=2, front_end="conv", num_codewords=4)
    assert tuple(model.get_layer("quantizer").output.shape) == (None, NUM_SEGMENTS, 4)
    for steps in (20, 50):
        assert model(np.zeros((1, steps, 1), "float32")).shape == (1, 2)


@pytest.mark.parametrize("kwargs, name", [
    ({"num_segments": 8, "num_codewords": None}, "num_segments"),
    ({"codebook_data": np.zeros((2, 40, 1)), "num_codewords": None}, "codebook_data"),
    # "auto" codewords only with the kernels.
    ({"num_segments": 8, "front_end": "conv"}, "num_segments"),
    ({"num_codewords": 0}, "num_codewords"),
    ({"num_codewords": 4, "num_segments": "all"}, "num_segments"),
    ({"num_codewords": 4, "input_shape": (1, 40), "data_format": "channels_first"}, "num_codewords"),
])
def test_local_histograms_bad_arguments(kwargs, name):
    with pytest.raises(ValueError, match=name):
        tabl_network(**{"input_shape": (40, 1), **kwargs})


def test_local_histograms_round_trip_and_export(tmp_path):
    x = padded_series()
    model = tabl_network("C", input_shape=(40, 1), num_classes=2, mask_value=-1e4, front_end="kernels",
                         num_codewords=4, codebook_data=x, seed=0)
    model.save(tmp_path / "c_tabl.keras")
    loaded = keras.saving.load_model(tmp_path / "c_tabl.keras")
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)
    summary = export_tflite(model, tmp_path / "c_tabl.tflite", dynamic_length=False)
    assert not [op for op in summary["ops"] if op.startswith("CUSTOM")]
    np.testing.assert_allclose(run_sequence(tmp_path / "c_tabl.tflite", x)["output"],
                               model.predict(x, verbose=0), atol=1e-4)
