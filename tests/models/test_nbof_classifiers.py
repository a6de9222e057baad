"""The NBoF classifiers: wiring, masking, codebooks from data, export."""

import keras
import numpy as np
import pytest

from keras_relrec.export import export_tflite
from keras_relrec.export import run_sequence
from keras_relrec.models import local_front_end
from keras_relrec.models import nbof_classifier
from keras_relrec.models import recurrent_nbof_classifier
from keras_relrec.models import tabl_network
from tests.layers.bag_of_features.reference import recurrent_bof


def padded_batch(seed=0, batch=6, steps=9, features=3):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, steps, features)).astype("float32")
    lengths = rng.integers(3, steps + 1, batch)
    for k, n in enumerate(lengths):
        x[k, n:] = 0.0
    return x, rng.integers(0, 4, batch)


@pytest.mark.parametrize("attention", [(), ("input", "codeword", "temporal")])
def test_nbof_wiring_and_training(attention):
    x, y = padded_batch()
    model = nbof_classifier((9, 3), 4, 5, attention=attention, codebook_data=x, seed=0)
    names = {layer.name for layer in model.layers}
    assert {"quantizer", "histogram", "logits"} <= names
    assert {f"{a}_attention" for a in attention} <= names
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    before = model.get_weights()
    model.fit(x, y, epochs=2, verbose=0)
    assert model.predict(x, verbose=0).shape == (6, 4)
    assert any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights()))


def test_codebook_from_the_features_the_quantizer_sees():
    """With input attention first, k-means runs on the attended features."""
    from sklearn.cluster import KMeans

    x, _ = padded_batch(seed=1)
    model = nbof_classifier((9, 3), 4, 5, attention=("input",), front_end=None, codebook_data=x, seed=3)
    seen = keras.Model(model.input, model.get_layer("input_attention").output).predict(x, verbose=0)
    vectors = seen.reshape(-1, 3)
    vectors = vectors[~np.all(vectors == 0.0, axis=-1)].astype("float64")
    expected = KMeans(5, n_init=4, random_state=3).fit(vectors).cluster_centers_
    np.testing.assert_allclose(model.get_layer("quantizer").codebook.numpy(), expected, atol=1e-5)


def test_a_codebook_per_dilation():
    """With the kernels (dilations 1, 2, 4 for 40 steps) each dilation's
    responses have a quantizer of their own, its codebook k-means of what
    it sees; the histogram holds every quantizer's bins."""
    from sklearn.cluster import KMeans

    rng = np.random.default_rng(6)
    x, y = rng.normal(size=(8, 40, 2)).astype("float32"), rng.integers(0, 3, 8)
    x[0, 30:] = 0.0  # padding, left out of k-means
    model = nbof_classifier((40, 2), 3, 5, front_end="kernels", max_steps=20, front_end_compression=None,
                            codebook_data=x, seed=0)
    for k, d in enumerate((1, 2, 4), start=1):
        assert model.get_layer(f"front_end_d{d}").dilations == (d,)
        quantizer = model.get_layer(f"quantizer_{k}")
        assert keras.tree.flatten(quantizer.input)[0].shape == (None, 20, 84 * 2)
        seen = keras.Model(model.input, model.get_layer(f"front_end_norm_d{d}").output).predict(x, verbose=0)
        valid = np.ones((8, 20), bool)
        valid[0, 15:] = False  # blocks of 2 steps: 30–39 are padding
        expected = KMeans(5, n_init=4, random_state=0).fit(seen[valid].astype("float64")).cluster_centers_
        np.testing.assert_allclose(quantizer.codebook.numpy(), expected, atol=1e-4)
    assert model.get_layer("histogram").output.shape == (None, 3 * 5)
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, epochs=1, verbose=0)
    with pytest.raises(ValueError, match="codebook_per_dilation"):
        nbof_classifier((40, 2), 3, 5, codebook_per_dilation="yes")
    with pytest.raises(ValueError, match="`codebook_per_dilation`.*front_end='conv'"):
        nbof_classifier((40, 2), 3, 5, front_end="conv", codebook_per_dilation=True)
    with pytest.raises(ValueError, match="split_dilations"):
        local_front_end(keras.Input((40, 2)), "kernels", split_dilations="no")


def test_compressed_kernel_responses(tmp_path):
    """`front_end_compression=c`: each standardized response r of every
    dilation becomes asinh(c · r) before its quantizer, whose codebook is
    k-means of what it sees, and the model saves and loads."""
    from sklearn.cluster import KMeans

    rng = np.random.default_rng(7)
    x = rng.normal(size=(6, 40, 2)).astype("float32")
    model = nbof_classifier((40, 2), 3, 5, front_end="kernels", max_steps=None, front_end_compression=10.0,
                            codebook_data=x, seed=0)
    for k, d in enumerate((1, 2, 4), start=1):
        standardized, compressed = keras.Model(model.input, [model.get_layer(f"front_end_norm_d{d}").output,
                                                             model.get_layer(f"front_end_asinh_d{d}").output])(x)
        r = np.asarray(standardized, np.float64)
        np.testing.assert_allclose(compressed, np.arcsinh(10.0 * r), rtol=1e-5, atol=1e-5)
        assert keras.tree.flatten(model.get_layer(f"quantizer_{k}").input)[0] is \
            model.get_layer(f"front_end_asinh_d{d}").output
    seen = np.arcsinh(10.0 * np.asarray(standardized, np.float64)).reshape(-1, 84 * 2)
    np.testing.assert_allclose(model.get_layer("quantizer_3").codebook.numpy(),
                               KMeans(5, n_init=4, random_state=0).fit(seen).cluster_centers_, atol=1e-4)
    model.save(tmp_path / "nbof.keras")
    np.testing.assert_allclose(keras.saving.load_model(tmp_path / "nbof.keras")(x), model(x), atol=1e-6)
    one = recurrent_nbof_classifier((40, 2), 3, 5, front_end="kernels", front_end_compression=np.float32(2.0))
    assert one.get_layer("front_end_scale_d1").scale == 2.0
    # The default of every builder: c = 10 with the kernels (attention or
    # not), none with another front-end.
    for attention in ((), ("temporal",), ("codeword", "temporal")):
        assert nbof_classifier((40, 2), 3, 5, attention=attention).get_layer("front_end_scale_d1").scale == 10.0
    assert recurrent_nbof_classifier((40, 2), 3, 5, front_end="kernels").get_layer("front_end_scale_d1").scale == 10.0
    assert tabl_network("C", input_shape=(40, 1), num_classes=3).get_layer("front_end_scale_d1").scale == 10.0
    for model in (nbof_classifier((40, 2), 3, 5, front_end="conv"), recurrent_nbof_classifier((40, 2), 3, 5),
                  tabl_network("C", input_shape=(40, 1), num_classes=3, front_end="conv"),
                  nbof_classifier((40, 2), 3, 5, front_end_compression=None)):
        assert not any("asinh" in layer.name for layer in model.layers), model.name
    with pytest.raises(ValueError, match="`front_end_compression`.*front_end='conv'"):
        nbof_classifier((40, 2), 3, 5, front_end="conv", front_end_compression=10.0)
    for bad in (0.0, -1.0, float("inf"), float("nan"), "10", True):
        with pytest.raises(ValueError, match=f"compression={bad!r}"):
            nbof_classifier((40, 2), 3, 5, front_end_compression=bad)
    with pytest.raises(ValueError, match="front_end"):  # the front-end is named first
        nbof_classifier((40, 2), 3, 5, front_end="rocket", front_end_compression=10.0)


def test_codeword_attention_over_every_dilations_codewords_or_one_codebook():
    """With the kernels, codeword attention sees every dilation's codewords
    side by side ((K·|dilations|)² weights) by default, as NBoF without it
    has a codebook per dilation; `codebook_per_dilation=False` gives one
    codebook (K × K). At one dilation (12 steps) there is nothing to split."""
    model = nbof_classifier((40, 2), 3, 5, attention=("codeword",))
    assert model.get_layer("front_end_d1").dilations == (1,) and "memberships" in [layer.name for layer in model.layers]
    assert [tuple(w.shape) for w in model.get_layer("codeword_attention").weights if len(w.shape) == 2] == [(15, 15)]
    model = nbof_classifier((40, 2), 3, 5, attention=("codeword",), codebook_per_dilation=False)
    names = [layer.name for layer in model.layers]
    assert "quantizer" in names and "memberships" not in names and "front_end" in names
    assert model.get_layer("front_end").dilations == (1, 2, 4)
    assert [tuple(w.shape) for w in model.get_layer("codeword_attention").weights if len(w.shape) == 2] == [(5, 5)]
    short = nbof_classifier((12, 2), 3, 5)
    assert {"front_end", "front_end_norm", "quantizer"} <= {layer.name for layer in short.layers}


def test_minirocket_kernels_front_end():
    """`front_end="kernels"` reaches across the series (dilations 1, 2, 4
    for 40 steps), learns nothing before the quantizer, and trains; here
    with one codebook over every dilation."""
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(8, 40, 2)).astype("float32"), rng.integers(0, 3, 8)
    model = nbof_classifier((40, 2), 3, 5, front_end="kernels", max_steps=None, codebook_per_dilation=False,
                            codebook_data=x, seed=0)
    assert model.get_layer("front_end").dilations == (1, 2, 4)
    assert model.get_layer("front_end").output.shape == (None, 40, 84 * 3 * 2)
    assert model.get_layer("front_end").trainable_weights == model.get_layer("front_end_norm").trainable_weights == []
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, epochs=1, verbose=0)
    with pytest.raises(ValueError, match="front_end"):
        nbof_classifier((40, 2), 3, 5, front_end="rocket")


def test_recurrent_nbof_reads_each_dilation_as_a_sequence_of_its_own():
    """With the kernels (dilations 1, 2, 4 for 40 steps) the one recurrent
    quantizer reads each dilation's responses as a sequence of its own
    (`groups`): its codebook is k-means of every dilation's vectors
    together, and the histogram has K bins per dilation.
    `split_dilations=False` gives it every dilation as one vector."""
    from sklearn.cluster import KMeans

    rng = np.random.default_rng(8)
    x, y = rng.normal(size=(8, 40, 1)).astype("float32"), rng.integers(0, 3, 8)
    x[0, 30:] = 0.0  # padding, left out of k-means
    model = recurrent_nbof_classifier((40, 1), 3, 5, max_steps=20, codebook_data=x, seed=0)
    both = model.get_layer("recurrent_quantizer")  # and a second one backwards: see below
    seen = keras.Model(model.input, [model.get_layer(f"front_end_asinh_d{d}").output for d in (1, 2, 4)]).predict(
        x, verbose=0)
    valid = np.ones((8, 20), bool)
    valid[0, 15:] = False  # blocks of 2 steps: 30–39 are padding
    vectors = np.concatenate([part[valid] for part in seen], axis=1).reshape(-1, 84).astype("float64")
    expected = KMeans(5, n_init=4, random_state=0).fit(vectors).cluster_centers_
    for half in (both.forward_layer, both.backward_layer):
        assert half.cell.groups == 3 and half.cell.codebook.shape == (5, 84)
        np.testing.assert_allclose(half.cell.codebook.numpy(), expected, atol=1e-4)
    assert model.get_layer("histogram").output.shape == (None, 2 * 3 * 5)
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, epochs=1, verbose=0)
    joint = recurrent_nbof_classifier((40, 1), 3, 5, split_dilations=False, bidirectional=False)
    assert joint.get_layer("recurrent_quantizer").cell.groups == 1
    assert joint.get_layer("histogram").output.shape == (None, 5)
    assert keras.tree.flatten(joint.get_layer("recurrent_quantizer").input)[0].shape == (None, 40, 3 * 84)
    with pytest.raises(ValueError, match="split_dilations"):
        recurrent_nbof_classifier((40, 1), 3, 5, split_dilations="yes")
    with pytest.raises(ValueError, match="`split_dilations`.*front_end='conv'"):
        recurrent_nbof_classifier((40, 1), 3, 5, front_end="conv", split_dilations=True)


def test_bidirectional_recurrent_nbof_against_numpy():
    """`bidirectional=True`: the histogram is the mean of the forward
    states over the valid steps beside the mean of a second cell's states
    run from the last valid step back to the first (NumPy, float64);
    padding enters neither. It is the default with the kernels only."""
    x, _ = padded_batch(seed=12)
    model = recurrent_nbof_classifier((9, 3), 4, 5, front_end=None, bidirectional=True)
    both = model.get_layer("recurrent_quantizer")
    histogram = keras.Model(model.input, model.get_layer("histogram").output)(x)
    lengths = np.sum(np.any(x != 0.0, axis=-1), axis=1)
    for k, n in enumerate(lengths):
        steps = x[k:k + 1, :n].astype("float64")
        halves = []
        for half, order in ((both.forward_layer, steps), (both.backward_layer, steps[:, ::-1])):
            weights = [w.astype("float64") for w in half.cell.get_weights()]
            halves.append(recurrent_bof(order, np.zeros((1, 5)), *weights)[0].mean(0))
        np.testing.assert_allclose(histogram[k], np.concatenate(halves), atol=1e-5)
    assert not np.allclose(both.forward_layer.cell.get_weights()[2], both.backward_layer.cell.get_weights()[2])
    assert not isinstance(recurrent_nbof_classifier((40, 3), 3, 5).get_layer("recurrent_quantizer"),
                          keras.layers.Bidirectional)
    assert not isinstance(recurrent_nbof_classifier((40, 1), 3, 5, front_end="conv").get_layer(
        "recurrent_quantizer"), keras.layers.Bidirectional)
    with pytest.raises(ValueError, match="bidirectional"):
        recurrent_nbof_classifier((40, 1), 3, 5, bidirectional="yes")


def test_recurrent_nbof_exports_to_tflite(tmp_path):
    """The default with the kernels (each dilation a sequence of its own,
    both directions) runs in LiteRT as in Keras."""
    rng = np.random.default_rng(13)
    x = rng.normal(size=(3, 40, 1)).astype("float32")
    x[1, 25:] = 0.0  # padding: the backward half starts at the last valid step
    model = recurrent_nbof_classifier((40, 1), 4, 5, codebook_data=x, seed=0)
    summary = export_tflite(model, tmp_path / "recurrent.tflite", dynamic_length=False)
    assert not [op for op in summary["ops"] if op.startswith("CUSTOM")]
    np.testing.assert_allclose(run_sequence(tmp_path / "recurrent.tflite", x)["output"],
                               model.predict(x, verbose=0), atol=1e-5)


@pytest.mark.parametrize("build", [
    lambda: nbof_classifier((None, 3), 4, 5, attention=("input", "codeword"), front_end="conv"),
    lambda: nbof_classifier((None, 3), 4, 5, front_end="kernels"),
    # Dilations 1 and 2, each with its codebook.
    lambda: nbof_classifier((None, 3), 4, 5, front_end="kernels", window_size=17),
    lambda: recurrent_nbof_classifier((None, 3), 4, 5),
    lambda: recurrent_nbof_classifier((None, 3), 4, 5, front_end="kernels"),
    # Dilations 1 and 2, each a sequence of its own through the one cell.
    lambda: recurrent_nbof_classifier((None, 3), 4, 5, front_end="kernels", window_size=17),
])
def test_padding_changes_nothing(build):
    """A sequence gives the same logits however much padding follows it."""
    model = build()
    x, _ = padded_batch(seed=2, batch=1, steps=5)
    x[0, 4:] = 0.0
    longer = np.concatenate([x, np.zeros((1, 7, 3), "float32")], axis=1)
    np.testing.assert_allclose(model(x), model(longer), atol=1e-5)
    assert not np.allclose(model(x), model(x[:, :2]))


def test_recurrent_nbof_front_end_by_the_input_width():
    """`front_end="auto"` (the recurrent NBoF's default): MiniRocket's
    kernels before the recurrent quantizer for one feature per step, their
    responses compressed; for several, the normalized steps themselves are
    its input."""
    univariate = recurrent_nbof_classifier((40, 1), 3, 5)
    assert univariate.get_layer("front_end_d1").mode == "kernels"
    assert univariate.get_layer("dilations").input == [univariate.get_layer(f"front_end_asinh_d{d}").output
                                                       for d in (1, 2, 4)]
    multivariate = recurrent_nbof_classifier((40, 3), 3, 5, normalization=(np.zeros(3), np.ones(3)))
    assert not any(name.startswith("front_end") for name in (layer.name for layer in multivariate.layers))
    assert keras.tree.flatten(multivariate.get_layer("recurrent_quantizer").input)[0] is \
        multivariate.get_layer("normalization").output
    # NBoF and C(TABL) take "auto" too; their defaults are their own.
    assert nbof_classifier((40, 1), 3, 5, front_end="auto").get_layer("front_end_scale_d1").scale == 10.0
    for width, kernels in ((1, True), (3, False)):
        for model in (nbof_classifier((40, width), 3, 5, front_end="auto"),
                      tabl_network("C", input_shape=(40, width), front_end="auto", num_codewords=4)):
            assert any(layer.name.startswith("front_end") for layer in model.layers) == kernels, model.name
    with pytest.raises(ValueError, match=r"front_end.*\('conv', 'window', 'kernels', 'auto', None\).*'rocket'"):
        recurrent_nbof_classifier((40, 3), 3, 5, front_end="rocket")
    with pytest.raises(ValueError, match="front_end='auto'.*last dimension is None"):
        local_front_end(keras.Input((40, None)), "auto")
    # Errors name the front-end as given, and what "auto" stood for.
    with pytest.raises(ValueError, match=r"compression=2.0 with front_end='auto' \(None for 3 features per step\)"):
        recurrent_nbof_classifier((40, 3), 3, 5, front_end_compression=2.0)
    with pytest.raises(ValueError, match=r"front_end='auto' \(None for 3 .*codebook_per_dilation=True"):
        nbof_classifier((40, 3), 3, 5, front_end="auto", codebook_per_dilation=True)
    # Without a front-end a length asked for would go unheeded.
    with pytest.raises(ValueError, match=r"max_steps=64 with front_end='auto' \(None for 3 features per step\)"):
        recurrent_nbof_classifier((1000, 3), 3, 5, max_steps=64)
    with pytest.raises(ValueError, match="max_steps=64 with front_end=None"):
        nbof_classifier((1000, 3), 3, 5, front_end=None, max_steps=64)


def test_bad_arguments():
    with pytest.raises(ValueError, match="attention"):
        nbof_classifier((9, 3), 4, 5, attention=("spatial",))
    with pytest.raises(ValueError, match="attention"):
        nbof_classifier((9, 3), 4, 5, attention="input")
    with pytest.raises(ValueError, match="num_classes"):
        recurrent_nbof_classifier((9, 3), 0, 5)
    with pytest.raises(ValueError, match="dropout"):
        nbof_classifier((9, 3), 4, 5, dropout=1.5)
    with pytest.raises(ValueError, match="codebook_data"):
        nbof_classifier((9, 3), 4, 5, codebook_data=[[[0.0, 1.0, 2.0]]])
    assert nbof_classifier((9, 3), 4, 5, attention=None).name == "nbof"


@pytest.mark.parametrize(("attention", "front_end", "window_size", "compression"), [
    (("input", "codeword", "temporal"), "kernels", 16, None),
    (("input", "codeword", "temporal"), "conv", 16, None),
    # A codebook for each of dilations 1 and 2, of compressed responses.
    ((), "kernels", 17, 10.0),
])
def test_nbof_exports_to_tflite(attention, front_end, window_size, compression, tmp_path):
    x, _ = padded_batch(seed=4)
    model = nbof_classifier((9, 3), 4, 5, attention=attention, front_end=front_end, window_size=window_size,
                            front_end_compression=compression)
    summary = export_tflite(model, tmp_path / "nbof.tflite", dynamic_length=False)
    assert not [op for op in summary["ops"] if op.startswith("CUSTOM")]
    np.testing.assert_allclose(run_sequence(tmp_path / "nbof.tflite", x)["output"],
                               model.predict(x, verbose=0), atol=1e-5)
