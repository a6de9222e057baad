"""Local-feature front-ends and training recipes of the ready-made
classifiers."""

import dataclasses
import inspect

import keras
import numpy as np
import pytest

from keras_relrec import models
from keras_relrec.models import BUILDERS
from keras_relrec.models import Recipe
from keras_relrec.models import builder_spec
from keras_relrec.models import local_front_end
from keras_relrec.models import nbof_classifier
from keras_relrec.models import normalization_statistics
from keras_relrec.models import recipe_for
from keras_relrec.models import recurrent_nbof_classifier
from keras_relrec.models import resolve_jit_compile
from keras_relrec.models import sequence_inputs
from keras_relrec.models import tabl_network
from keras_relrec.models import train_classifier
from keras_relrec.models.front_end import RECURRENT_MAX_STEPS
from keras_relrec.models.front_end import resolve_front_end
from keras_relrec.models.recipes import RECURRENT_KERNELS_CODEWORDS
from keras_relrec.models.recipes import XLA_MIN_BATCH_VALUES
from keras_relrec.models.recipes import XLA_MIN_UPDATES
from keras_relrec.models.recipes import _front_end
from keras_relrec.models.recipes import front_end_max_steps
from keras_relrec.models.recipes import stratified_split


def ramps(count, steps=24, seed=0):
    """Rising (class 1) or falling (class 0) ramps with noise: the same
    values in the two classes, in the opposite order."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, count)
    ramp = np.linspace(-1.0, 1.0, steps)
    x = np.where(y[:, None] == 1, ramp, ramp[::-1]) + 0.1 * rng.normal(size=(count, steps))
    return x[..., None].astype("float32"), y.astype("int32")


def test_raw_steps_cannot_tell_a_series_from_its_reverse():
    """The defect the front-end fixes: quantizing one value per step, the
    histogram is the same for a series and its reverse, whatever the
    weights; local features tell them apart."""
    x, _ = ramps(8)
    raw = nbof_classifier((24, 1), 2, 8, front_end=None, mask_value=None, codebook_data=x, seed=0)
    np.testing.assert_allclose(raw(x), raw(x[:, ::-1]), atol=1e-6)
    local = nbof_classifier((24, 1), 2, 8, mask_value=None, codebook_data=x, seed=0)
    assert np.abs(np.asarray(local(x)) - np.asarray(local(x[:, ::-1]))).max() > 1e-3


@pytest.mark.parametrize("builder, kwargs", [
    (nbof_classifier, {}),
    (tabl_network, {"front_end": "conv"}),
    # Local histograms: the codebooks from the fitted part, by the recipe.
    (tabl_network, {"front_end": "kernels", "num_codewords": 8}),
])
def test_the_recipe_learns_what_the_shape_says(builder, kwargs):
    x, y = ramps(48)
    x_test, y_test = ramps(64, seed=1)
    # Without XLA: its compile costs more than 120 small steps.
    model, history = train_classifier(builder, x, y, seed=0, recipe=Recipe(gradient_steps=120), jit_compile=False,
                                      **kwargs)
    assert len(history.history["val_loss"]) >= 1
    accuracy = np.mean(model.predict(x_test, verbose=0).argmax(-1) == y_test)
    assert accuracy >= 0.9, accuracy


def lstm_behind_the_front_end(x, num_classes, mask_value, normalization, seed):
    inputs, h = sequence_inputs(x.shape[1:], mask_value, normalization)
    h = keras.layers.LSTM(8, seed=seed)(local_front_end(h, filters=8))
    return keras.Model(inputs, keras.layers.Dense(num_classes)(h))


def test_the_recipe_trains_a_model_of_ones_own():
    """A builder of one's own (here a recurrent layer behind the local
    features) gets the default recipe: the padding masked, normalization
    statistics from the fitted part."""
    x, y = ramps(48)
    x_test, y_test = ramps(64, seed=1)
    x[::3, 20:] = x_test[::3, 20:] = -1e4
    model, _ = train_classifier(lstm_behind_the_front_end, x, y, mask_value=-1e4, seed=0,
                                recipe=Recipe(gradient_steps=120))
    if keras.backend.backend() == "tensorflow":
        # "auto": 120 updates do not repay XLA's compile.
        assert model.jit_compile is False
    assert model.get_layer("normalization").mean.shape[-1] == 1
    accuracy = np.mean(model.predict(x_test, verbose=0).argmax(-1) == y_test)
    assert accuracy >= 0.9, accuracy


def test_auto_compiles_with_xla_where_the_fit_repays_the_compile():
    """`jit_compile="auto"` on TensorFlow: XLA from `XLA_MIN_UPDATES`
    updates of `XLA_MIN_BATCH_VALUES` values (all inputs counted), never
    for a builder that opts out; the graph otherwise; what is given
    otherwise."""
    spec = builder_spec(nbof_classifier)
    large = [np.zeros((1, 250, 1))]                       # 16 × 250 = 4,000 values a batch
    paired = [np.zeros((1, 100, 1)), np.zeros((1, 150, 1))]
    if keras.backend.backend() != "tensorflow":
        assert resolve_jit_compile("auto", spec, large, 16, XLA_MIN_UPDATES) == "auto"
        return
    assert XLA_MIN_BATCH_VALUES == 16 * 250
    assert resolve_jit_compile("auto", spec, large, 16, XLA_MIN_UPDATES) is True
    assert resolve_jit_compile("auto", None, paired, 16, XLA_MIN_UPDATES) is True
    assert resolve_jit_compile("auto", spec, large, 16, XLA_MIN_UPDATES - 1) is False
    assert resolve_jit_compile("auto", spec, large, 15, XLA_MIN_UPDATES) is False
    assert resolve_jit_compile("auto", builder_spec(tabl_network), large, 16, 10 * XLA_MIN_UPDATES) is False
    assert resolve_jit_compile(True, spec, large, 1, 1) is True
    assert resolve_jit_compile(False, spec, large, 16, 10 * XLA_MIN_UPDATES) is False


def test_jit_compile_is_checked_before_any_work():
    x, y = ramps(8)
    with pytest.raises(ValueError, match=r"jit_compile.*received jit_compile='xla'"):
        train_classifier(nbof_classifier, x, y, jit_compile="xla")


def test_recipe_plan_follows_the_data_size():
    recipe = Recipe(batch_size=16, gradient_steps=1500, updates_per_epoch=25)
    # 29 examples: 14 passes (406 examples, 26 updates) per epoch, 58 epochs.
    assert recipe.plan(29) == (14, 16, 58)
    # 1,000 examples: one pass (63 updates) per epoch, 24 epochs.
    assert recipe.plan(1000) == (1, 16, 24)
    # Fewer examples than a batch: the batch is the data.
    assert recipe.plan(5) == (25, 5, 60)


def test_stratified_split_holds_out_every_class():
    y = np.array([0] * 10 + [1] * 5 + [2] * 2 + [3])
    fit, held = stratified_split(y, 0.2, seed=0)
    assert sorted(np.concatenate([fit, held]).tolist()) == list(range(len(y)))
    assert np.bincount(y[held], minlength=4).tolist() == [2, 1, 1, 0]


def test_normalization_statistics_skip_the_padding():
    x = np.array([[[1.0, 2.0], [3.0, 6.0], [9.0, 9.0]], [[5.0, 10.0], [9.0, 9.0], [9.0, 9.0]]])
    mean, variance = normalization_statistics(x, mask_value=9.0)
    np.testing.assert_allclose(mean, [3.0, 6.0])
    np.testing.assert_allclose(variance, [8.0 / 3.0, 32.0 / 3.0])


def test_train_classifier_refuses_what_it_cannot_train():
    x, y = ramps(8)
    with pytest.raises(ValueError, match="`builder` must be one of nbof_classifier.*builder='lstm'"):
        train_classifier("lstm", x, y)
    with pytest.raises(ValueError, match=r"x of shape \(8, 24\)"):
        train_classifier(nbof_classifier, x[..., 0], y)


def test_front_end_stride_keeps_long_series_short():
    inputs = keras.Input((427, 1))
    h = local_front_end(inputs)
    # ⌈427 / 32⌉ = 14: 31 steps of 32 features.
    assert tuple(h.shape) == (None, 31, 32)
    assert tuple(local_front_end(inputs, "window", max_steps=None).shape) == (None, 427, 16)
    # A stride above the window raises the window to the stride.
    assert tuple(local_front_end(inputs, "window", window_size=4, max_steps=8).shape) == (None, 8, 54)
    assert local_front_end(inputs, None) is inputs
    with pytest.raises(ValueError, match="front_end='fourier'"):
        local_front_end(inputs, "fourier")
    for bad in ("automatic", 0, 2.5):
        with pytest.raises(ValueError, match=f"'auto' or None; received max_steps={bad!r}"):
            local_front_end(inputs, max_steps=bad)
        # Refused even where no front-end would use it.
        with pytest.raises(ValueError, match=f"received max_steps={bad!r}"):
            tabl_network(input_shape=(50, 1), max_steps=bad)
    with pytest.raises(ValueError, match=r"front_end=\['conv'\]"):
        train_classifier(nbof_classifier, *ramps(8), front_end=["conv"])
    with pytest.raises(ValueError, match="data_format='channels_first'"):
        tabl_network(input_shape=(1, 50), data_format="channels_first", front_end="conv")


def test_codebook_from_the_strided_front_end_skips_padded_blocks():
    """k-means runs on the front-end's outputs of the valid blocks only."""
    from sklearn.cluster import KMeans

    rng = np.random.default_rng(2)
    x = rng.normal(size=(6, 40, 2)).astype("float32")
    lengths = np.array([40, 33, 20, 9, 40, 17])
    for k, n in enumerate(lengths):
        x[k, n:] = 0.0
    model = recurrent_nbof_classifier((40, 2), 3, 4, front_end="conv", max_steps=10, codebook_data=x, seed=5)
    seen = keras.Model(model.input, model.get_layer("front_end_relu_2").output).predict(x, verbose=0)
    # Stride 4: block j is valid when its first step is.
    valid = np.arange(10)[None, :] * 4 < lengths[:, None]
    expected = KMeans(4, n_init=4, random_state=5).fit(seen[valid].astype("float64")).cluster_centers_
    codebook = model.get_layer("recurrent_quantizer").cell.codebook.numpy()
    np.testing.assert_allclose(codebook, expected, atol=1e-4)


def test_tabl_network_takes_padding_as_zeros_after_the_normalization():
    """With `mask_value`, a padded step enters the first bilinear layer as
    zeros after the normalization: the network gives what it gives for
    the mean there, whatever value marks the padding (B: a hidden BL
    first)."""
    rng = np.random.default_rng(3)
    mean, variance = np.array([0.5, -1.0]), np.array([2.0, 0.5])
    x = rng.normal(size=(4, 12, 2)).astype("float32")
    x[1, 7:] = x[3, 3:] = mean
    padded = x.copy()
    padded[1, 7:] = padded[3, 3:] = -1e4
    masked = tabl_network("B", input_shape=(12, 2), mask_value=-1e4, normalization=(mean, variance))
    plain = tabl_network("B", input_shape=(12, 2), normalization=(mean, variance))
    plain.set_weights(masked.get_weights())
    np.testing.assert_allclose(masked(padded), plain(x), atol=1e-5)
    with pytest.raises(ValueError, match="`mask_value` needs data_format='channels_last'"):
        tabl_network(input_shape=(2, 12), data_format="channels_first", mask_value=-1e4)


def test_small_classes_train_on_everything_for_the_planned_updates():
    """Nine examples of a class: nothing is held out, no early stopping;
    the planned epochs all run."""
    x, y = ramps(18)
    y = np.repeat([0, 1], 9).astype("int32")
    recipe = Recipe(gradient_steps=30, updates_per_epoch=5)
    # Without XLA: what is held out is the question, not how it trains.
    _, history = train_classifier(nbof_classifier, x, y, seed=0, recipe=recipe, jit_compile=False)
    assert "val_loss" not in history.history
    assert len(history.history["loss"]) == recipe.plan(18)[2]
    _, history = train_classifier(nbof_classifier, x, y, seed=0, jit_compile=False,
                                  recipe=Recipe(gradient_steps=30, updates_per_epoch=5, validation_min_per_class=9))
    assert "val_loss" in history.history


def test_the_kernels_front_end_keeps_more_steps_and_is_nbofs_default(monkeypatch):
    """MiniRocket's kernels learn nothing, so `max_steps="auto"` keeps up
    to 512 steps of them (32 of the learned front-end). They are NBoF's
    default front-end, trained by its recipe, as the recurrent NBoF and
    C(TABL) are with the kernels; NBoF's other front-ends train by the
    `front_end_recipes` of its `BuilderSpec`."""
    assert local_front_end(keras.Input((427, 1)), "kernels").shape[1] == 427
    # Stride ⌈1460 / 512⌉ = 3.
    assert local_front_end(keras.Input((1460, 1)), "kernels").shape[1] == 487
    assert builder_spec(nbof_classifier).front_end == "kernels"
    assert builder_spec(recurrent_nbof_classifier).front_end == builder_spec(tabl_network).front_end == "auto"
    assert builder_spec(lstm_behind_the_front_end) is None
    # The spec's default front-end is the builder's own.
    for spec in BUILDERS:
        if spec.paired:
            # The paired builder has no front-end.
            assert spec.front_end is None and "front_end" not in inspect.signature(spec.build).parameters
            continue
        assert spec.front_end == inspect.signature(spec.build).parameters["front_end"].default, spec.build
    kernels = builder_spec(nbof_classifier).recipe
    assert (kernels.learning_rate, kernels.gradient_steps) == (1e-2, 1500)
    assert recipe_for(nbof_classifier) is recipe_for(nbof_classifier, front_end="kernels") is kernels
    for front_end in ("conv", "window", None):
        assert recipe_for(nbof_classifier, front_end=front_end) is builder_spec(nbof_classifier).recipe_for(front_end)
        assert recipe_for(nbof_classifier, front_end=front_end).gradient_steps == 4000
    # Every builder trains by NBoF's recipe over the kernels, and by its
    # own otherwise.
    for builder in (recurrent_nbof_classifier, tabl_network):
        assert recipe_for(builder, front_end="kernels") is kernels
        own = builder_spec(builder).recipe
        assert recipe_for(builder, front_end=None) is recipe_for(builder, front_end="conv") is own
        assert builder_spec(builder).recipe == Recipe()
    assert recipe_for(nbof_classifier, front_end=["conv"]) is builder_spec(nbof_classifier).recipe
    assert recipe_for(lstm_behind_the_front_end) == Recipe()
    # "auto" is the kernels for one feature per step and the raw steps for
    # several: without the data's width recipe_for cannot choose between
    # two recipes; with it, it chooses as train_classifier does.
    for builder in (nbof_classifier, recurrent_nbof_classifier, tabl_network):
        with pytest.raises(ValueError, match=f"front_end='auto'.*{builder.__name__} trains by different recipes"):
            recipe_for(builder, front_end="auto")
    assert recipe_for(recurrent_nbof_classifier, 1) is recipe_for(tabl_network, features=1) is kernels
    assert recipe_for(recurrent_nbof_classifier, 3) == recipe_for(tabl_network, features=3) == Recipe()
    assert recipe_for(nbof_classifier, 3) is kernels
    assert recipe_for(nbof_classifier, 1, front_end="auto") is kernels
    assert recipe_for(nbof_classifier, 3, front_end="auto").gradient_steps == 4000
    assert recipe_for(tabl_network, 1, front_end="conv") == Recipe()
    for builder in (tabl_network, lstm_behind_the_front_end):
        with pytest.raises(ValueError, match="features=0"):
            recipe_for(builder, features=0)
    # train_classifier goes by them: short stand-ins plan the epochs that run
    # (nine examples a class: nothing held out, every epoch runs).
    x, _ = ramps(18)
    y = np.repeat([0, 1], 9).astype("int32")
    short, shorter = Recipe(gradient_steps=20, updates_per_epoch=5), Recipe(gradient_steps=10, updates_per_epoch=5)
    monkeypatch.setattr("keras_relrec.models.recipes.BUILDERS", (
        dataclasses.replace(builder_spec(nbof_classifier), recipe=short, front_end_recipes=((None, shorter),)),))
    model, history = train_classifier(nbof_classifier, x, y, seed=0, jit_compile=False)
    assert len(history.history["loss"]) == short.plan(18)[2]
    assert model.get_layer("front_end_d1").mode == model.get_layer("front_end_d2").mode == "kernels"
    model, history = train_classifier(nbof_classifier, x, y, seed=0, jit_compile=False, front_end=None)
    assert len(history.history["loss"]) == shorter.plan(18)[2] != short.plan(18)[2]
    assert not [layer.name for layer in model.layers if layer.name.startswith("front_end")]
    # train_classifier knows the width: "auto" trains one feature per step
    # by the kernels' recipe, two by the raw steps'.
    for width, plan in ((1, short), (2, shorter)):
        model, history = train_classifier(nbof_classifier, np.repeat(x, width, -1), y, seed=0, jit_compile=False,
                                          front_end="auto")
        assert len(history.history["loss"]) == plan.plan(18)[2], width
        assert any(layer.name.startswith("front_end") for layer in model.layers) == (width == 1)


def test_the_recurrent_nbof_recipe_gives_the_kernels_more_codewords():
    """`train_classifier` builds the recurrent NBoF with
    `RECURRENT_KERNELS_CODEWORDS` per dilation and direction with the
    kernels, 32 on the raw steps of several features; a number given is
    kept."""
    rng = np.random.default_rng(14)
    x = rng.normal(size=(12, 40, 1)).astype("float32")
    make = builder_spec(recurrent_nbof_classifier).make
    for data, front_end, codewords in ((x, "kernels", RECURRENT_KERNELS_CODEWORDS), (np.repeat(x, 3, -1), None, 32)):
        model = make(data, 3, None, None, 0, resolve_front_end("auto", data.shape[-1]))
        layer = model.get_layer("recurrent_quantizer")
        cell = (layer.forward_layer if front_end else layer).cell
        assert cell.num_codewords == codewords and isinstance(layer, keras.layers.Bidirectional) == bool(front_end)
    model = make(x, 3, None, None, 0, resolve_front_end("auto", 1), num_codewords=7)
    assert model.get_layer("recurrent_quantizer").forward_layer.cell.num_codewords == 7
    assert RECURRENT_KERNELS_CODEWORDS != 32


def test_the_recurrent_nbof_keeps_fewer_steps_of_the_kernels():
    """Every step the front-end leaves is a step of the recurrence: with
    the kernels (its default for one feature per step) `max_steps="auto"`
    keeps at most 128, also when `train_classifier` strides by the median
    length."""
    model = recurrent_nbof_classifier((1460, 1), 3, 4)
    # Stride ⌈1460 / 128⌉ = 12.
    assert model.get_layer("front_end_d1").mode == "kernels" and model.get_layer("front_end_d1").output.shape[1] == 122
    assert recurrent_nbof_classifier((1460, 1), 3, 4, front_end="conv").get_layer("front_end_1").output.shape[1] == 32
    x = np.zeros((5, 400, 1), "float32")
    for k, n in enumerate([200, 256, 300, 350, 400]):
        x[k, n:] = -1.0
    # The median series, 300 steps, at stride 3: 134 steps of the padded 400.
    assert _front_end(x, -1.0, {}, resolve_front_end("auto", 1), RECURRENT_MAX_STEPS) == {"max_steps": 134}
    # Its default with several features per step is the raw steps: every step is kept.
    assert _front_end(np.repeat(x, 2, axis=-1), -1.0, {}, resolve_front_end("auto", 2), RECURRENT_MAX_STEPS) == {}
    assert _front_end(x, -1.0, {}, resolve_front_end("kernels", 1)) == {"max_steps": 400}


def test_front_end_strides_by_the_median_length_of_padded_series():
    x = np.zeros((5, 400, 2), "float32")
    for k, n in enumerate([20, 64, 100, 130, 400]):
        x[k, n:] = -1.0
    # The median series, 100 steps, at stride ⌈100 / 32⌉ = 4: 100 steps for the padded 400.
    assert front_end_max_steps(x, mask_value=-1.0) == 100
    assert front_end_max_steps(x) == 32


def test_a_class_without_examples_does_not_switch_the_hold_out_off():
    """Labels 0 and 2 of three classes, ten examples each: every class that
    has examples has enough, so a validation split is held out."""
    x, _ = ramps(20)
    y = np.repeat([0, 2], 10).astype("int32")
    _, history = train_classifier(nbof_classifier, x, y, num_classes=3, seed=0, jit_compile=False,
                                  recipe=Recipe(gradient_steps=30, updates_per_epoch=5))
    assert "val_loss" in history.history


def test_the_recipes_by_builder_of_0_2_read_the_specs():
    """`RECIPES` and `FRONT_END_RECIPES` stay importable, read-only views
    of `BUILDERS`: NBoF by 1,500 updates at 1e-2, and 4,000 with a learned
    front-end or none; the recurrent NBoF and C(TABL) at 1e-2 with the
    kernels."""
    assert set(models.RECIPES) == {spec.build for spec in models.BUILDERS}
    assert models.RECIPES[models.nbof_classifier][1] == models.Recipe(learning_rate=1e-2, gradient_steps=1500)
    kernels = {(models.recurrent_nbof_classifier, "kernels"), (models.tabl_network, "kernels")}
    learned = {(models.nbof_classifier, kind) for kind in ("conv", "window", None)}
    assert set(models.FRONT_END_RECIPES) == learned | kernels
    assert all(r.gradient_steps == 4000 for key, r in models.FRONT_END_RECIPES.items() if key not in kernels)
    assert all(models.FRONT_END_RECIPES[key] is models.RECIPES[models.nbof_classifier][1] for key in kernels)
    with pytest.raises(TypeError):
        models.RECIPES[models.tabl_network] = None


def scaled_ramps(count, amplitudes=(1e-4, 1e2), seed=0):
    """Ramps as `ramps`, each at an amplitude drawn log-uniformly from
    `amplitudes` and on an offset of its own size."""
    x, y = ramps(count, seed=seed)
    rng = np.random.default_rng(seed + 100)
    scale = np.exp(rng.uniform(*np.log(amplitudes), (count, 1, 1)))
    return (scale * (x + rng.normal(size=(count, 1, 1)))).astype("float32"), y


def test_scaling_auto_scales_each_series_where_their_scales_spread():
    """`"auto"` scales each series by itself where the training series'
    standard deviations spread over more than `SERIES_SCALE_SPREAD`
    (90th to 10th percentile, valid steps only), with its level and scale
    beside the histogram; one mean and variance otherwise."""
    x, y = ramps(40)
    assert models.front_end.scale_spread(x) < 2 and models.choose_scaling(x) == "global"
    wide, _ = scaled_ramps(40)
    assert models.front_end.scale_spread(wide) > 1e3 and models.choose_scaling(wide) == "series"
    # Padding is in no series' scale: the same series padded with a large value.
    padded = np.concatenate([x, np.full((40, 6, 1), 1e4, "float32")], axis=1)
    assert models.choose_scaling(padded, mask_value=1e4) == "global"
    # A feature flat in some series spreads without bound.
    flat = x.copy()
    flat[:10] = 0.5
    assert models.front_end.scale_spread(flat) == np.inf
    names = {scaling: [layer.name for layer in
                       nbof_classifier((24, 1), 2, 4, mask_value=None, codebook_data=data).layers]
             for scaling, data in (("global", x), ("series", wide))}
    assert "series_normalization" in names["series"] and "histogram_and_statistics" in names["series"]
    assert "series_normalization" not in names["global"] and "normalization" not in names["global"]
    # Without data to decide by, "auto" is "global"; named, it is as named.
    assert "series_normalization" not in [layer.name for layer in nbof_classifier((24, 1), 2, 4).layers]
    assert "series_statistics" in [layer.name for layer in tabl_network(input_shape=(24, 1), num_classes=2,
                                                                         scaling="series").layers]
    with pytest.raises(ValueError, match="scaling"):
        nbof_classifier((24, 1), 2, 4, scaling="per_series")


@pytest.mark.parametrize("builder", [nbof_classifier, recurrent_nbof_classifier, tabl_network])
def test_every_builder_reads_the_shape_at_any_amplitude(builder):
    """Ramps at amplitudes from 1e-4 to 1e2: with one mean and variance the
    small ones are flat; scaled by `train_classifier`'s "auto", every
    builder tells rising from falling."""
    x, y = scaled_ramps(48)
    x_test, y_test = scaled_ramps(64, seed=1)
    model, _ = train_classifier(builder, x, y, seed=0, recipe=Recipe(gradient_steps=120), jit_compile=False)
    assert "series_normalization" in [layer.name for layer in model.layers]
    accuracy = np.mean(model.predict(x_test, verbose=0).argmax(-1) == y_test)
    assert accuracy >= 0.9, accuracy


def test_tabl_network_chooses_its_front_end_by_the_input():
    """`front_end="auto"`: a raw univariate series gets local histograms
    (the kernels, 32 codewords per dilation, compressed); several features per step,
    the paper's network on the steps."""
    univariate = tabl_network(input_shape=(40, 1), num_classes=2)
    quantizers = [layer for layer in univariate.layers if isinstance(layer, models.nbof_classifiers.BoFQuantizer)]
    assert quantizers and all(q.num_codewords == 32 for q in quantizers)
    assert univariate.get_layer("front_end_d1").mode == "kernels"
    assert univariate.get_layer("front_end_scale_d1").scale == 10.0
    paper = tabl_network(input_shape=(10, 40), num_classes=3)
    assert not [layer for layer in paper.layers if "front_end" in layer.name or "quantizer" in layer.name]
    assert tabl_network(input_shape=(40, 10), data_format="channels_first").count_params() == paper.count_params()
    with pytest.raises(ValueError, match="num_segments"):
        tabl_network(input_shape=(10, 40), num_segments=4)


def test_tiny_training_sets_train_on_warped_copies(monkeypatch):
    """Two examples a class: nothing is held out, and the repeats of each
    series are copies warped in time, drawn afresh every epoch in a new
    order, padding kept, class-weighted; with enough examples a class, the
    series as they are."""
    seen = []
    real = keras.Model.fit

    def recorded(self, x, y=None, **kwargs):
        # A generator's batches, kept and replayed.
        if not isinstance(x, np.ndarray):
            x = list(x)
            seen.append(x)
            return real(self, (batch for batch in x), y, **kwargs)
        seen.append(x)
        return real(self, x, y, **kwargs)

    monkeypatch.setattr(keras.Model, "fit", recorded)
    x, _ = ramps(12)
    x[::2, 20:] = -1e4
    y = np.array([0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4], "int32")
    recipe = Recipe(gradient_steps=10, updates_per_epoch=5)
    _, history = train_classifier(nbof_classifier, x, y, mask_value=-1e4, seed=0, recipe=recipe, jit_compile=False)
    repeats, batch_size, epochs = recipe.plan(12)
    assert len(history.epoch) == epochs
    tiled, labels = np.tile(x, (repeats, 1, 1)), np.tile(y, repeats)
    per_epoch = -(-len(labels) // batch_size)
    assert epochs > 1 and len(seen[-1]) == epochs * per_epoch
    for number in range(epochs):
        batches = seen[-1][number * per_epoch:(number + 1) * per_epoch]
        got_x, got_y, got_w = (np.concatenate([b[k] for b in batches]) for k in range(3))
        # The epoch's draws: the order, then the warps' seed.
        rng = np.random.default_rng((0, number))
        order = rng.permutation(len(labels))
        warped = models.recipes.warp_series(tiled, -1e4, recipe.time_warp, seed=int(rng.integers(2**31)))
        np.testing.assert_array_equal(got_x, warped[order])
        np.testing.assert_array_equal(got_y, labels[order])
        # N / (K · N_class): 12 / (5 · 4) for class 0, 12 / (5 · 2) else.
        np.testing.assert_allclose(got_w, np.where(labels[order] == 0, 0.6, 1.2), rtol=1e-6)
        np.testing.assert_array_equal(got_x == -1e4, tiled[order] == -1e4)
        assert not np.allclose(got_x, tiled[order])
    train_classifier(nbof_classifier, x, y, mask_value=-1e4, seed=0, recipe=dataclasses.replace(recipe, time_warp=0),
                     jit_compile=False)
    np.testing.assert_array_equal(seen[-1], tiled)
    x, y = ramps(40)
    train_classifier(nbof_classifier, x, y, seed=0, recipe=recipe, jit_compile=False)
    fit, _ = stratified_split(y, recipe.validation_split, 0)
    np.testing.assert_array_equal(seen[-1][:len(fit)], x[fit])


def test_a_warped_copy_follows_its_equation():
    """Each copy: its valid steps resampled at shift + (1 + stretch) · t
    (shares of the length, clipped), the shift and stretch drawn in turn
    from the seed; one step stays as it is."""
    x = np.zeros((3, 6, 2), "float32")
    x[0] = np.stack([np.arange(6), -np.arange(6)], -1)
    x[1, :4] = np.arange(4)[:, None] ** 2
    x[1, 4:] = -1.0
    x[2, 0], x[2, 1:] = 5.0, -1.0
    warped = models.recipes.warp_series(x, mask_value=-1.0, warp=0.2, seed=3)
    draws = np.random.default_rng(3).uniform(-0.2, 0.2, (3, 2))
    for k, length in enumerate((6, 4)):
        shift, stretch = draws[k]
        u = np.clip(shift + (1 + stretch) * np.linspace(0, 1, length), 0, 1) * (length - 1)
        for f in range(2):
            np.testing.assert_allclose(warped[k, :length, f], np.interp(u, np.arange(length), x[k, :length, f]),
                                       rtol=1e-6)
    np.testing.assert_array_equal(warped[1, 4:], -1.0)
    np.testing.assert_array_equal(warped[2], x[2])


def paired_series(count, seed=0):
    """Two inputs of different lengths and widths; the class is whether
    the second rises, the first is noise. Padded with -1e4."""
    x, y = ramps(count, steps=10, seed=seed)
    rng = np.random.default_rng(seed)
    first = rng.normal(size=(count, 7, 2)).astype("float32")
    second = np.concatenate([x, 0.1 * x], axis=-1)
    second[::3, 8:] = -1e4
    return first, second, y


def test_train_classifier_trains_paired_inputs():
    """`drrt_classifier` with a list of two inputs (masks on both), or with
    one array split by channel groups."""
    first, second, y = paired_series(40)
    model, _ = train_classifier(models.drrt_classifier, [first, second], y, mask_value=-1e4, seed=0,
                                recipe=Recipe(gradient_steps=30), jit_compile=False)
    assert [tuple(i.shape) for i in model.inputs] == [(None, 7, 2), (None, 10, 2)]
    assert model.get_layer("masking_a").mask_value == -1e4
    # Each input standardized by the statistics of its own valid fitted steps.
    fit, _ = stratified_split(y, Recipe().validation_split, 0)
    mean, _ = normalization_statistics(second[fit], -1e4)
    np.testing.assert_allclose(np.squeeze(model.get_layer("normalization_b").mean), mean, rtol=1e-5)
    joined = np.concatenate([np.pad(first, ((0, 0), (0, 3), (0, 0)), constant_values=0.0), second], axis=-1)
    model, _ = train_classifier(models.drrt_classifier, joined, y, seed=0, channel_groups=((0, 1), (2, 3)),
                                recipe=Recipe(gradient_steps=30), jit_compile=False)
    assert [tuple(i.shape) for i in model.inputs] == [(None, 10, 2), (None, 10, 2)]
    split = models.split_channels(joined, ((0, 1), (2, 3)))
    np.testing.assert_array_equal(split[1], second)
    assert model.predict(split, verbose=0).shape == (40, 2)
    with pytest.raises(ValueError, match="must be a list of two inputs for drrt_classifier"):
        train_classifier(models.drrt_classifier, joined, y)
    with pytest.raises(ValueError, match="must be one array for nbof_classifier"):
        train_classifier(nbof_classifier, [first, second], y)
    with pytest.raises(ValueError, match="channel_groups"):
        train_classifier(models.drrt_classifier, joined, y, channel_groups=((0, 1), (4,)))
    with pytest.raises(ValueError, match=r"shapes \(40, 7, 2\), \(39, 10, 2\)"):
        train_classifier(models.drrt_classifier, [first, second[1:]], y)


@pytest.mark.parametrize("labels, match", [
    ([0, 1, 2, 1], r"labels 0\.\.1 \(num_classes=2\).*e\.g\. 2"),
    ([0, -1, 1, 1], r"labels 0\.\.1 \(num_classes=2\).*e\.g\. -1"),
    ([0, 0.5, 1, 1], "integer labels"),
])
def test_train_classifier_refuses_labels_outside_the_classes(labels, match):
    x, _ = ramps(4)
    with pytest.raises(ValueError, match=match):
        train_classifier(nbof_classifier, x, np.array(labels), num_classes=2)


def test_train_classifier_refuses_an_empty_training_set():
    with pytest.raises(ValueError, match="at least one example"):
        train_classifier(nbof_classifier, np.zeros((0, 24, 1), "float32"), np.zeros(0, "int32"))


@pytest.mark.parametrize("warp", [-0.1, 0.5, "x", True])
def test_a_warp_outside_its_range_is_refused(warp):
    with pytest.raises(ValueError, match=r"`time_warp` must be a share of the length in \[0, 0.5\)"):
        Recipe(time_warp=warp)
    with pytest.raises(ValueError, match=r"`warp` must be a share"):
        models.recipes.warp_series(np.zeros((1, 4, 1)), warp=warp)


def test_drrt_classifier_refuses_one_normalization_for_two_inputs():
    with pytest.raises(ValueError, match="one \\(mean, variance\\) for each input"):
        models.drrt_classifier(((5, 2), (4, 2)), 2, normalization=([0.0, 0.0], [1.0, 1.0]))
    model = models.drrt_classifier(((5, 2), (4, 3)), 2, normalization=((0.0, 1.0), ([0.0] * 3, [1.0] * 3)))
    assert model.get_layer("normalization_b").mean.shape[-1] == 3


def test_padding_is_compared_in_the_datas_dtype():
    """A mask value that float32 cannot hold exactly (0.1): the padding of
    float32 data is recognised as Masking recognises it, and left out of
    the statistics and the spread."""
    x, _ = ramps(6)
    padded = np.concatenate([x, np.full((6, 4, 1), 0.1, "float32")], axis=1)
    assert models.front_end.valid_steps(padded, 0.1).sum() == x.shape[0] * x.shape[1]
    np.testing.assert_allclose(normalization_statistics(padded, 0.1)[0], normalization_statistics(x)[0], rtol=1e-6)
    assert models.front_end.scale_spread(padded, 0.1) == models.front_end.scale_spread(x)


def test_series_scaling_keeps_small_amplitudes_under_mixed_precision():
    """Under mixed_float16 the masking before the per-series statistics
    computes in float32: a series of amplitude 1e-6 is not rounded to
    float16 (its smallest normal is 6e-5) before it is standardized."""
    x, _ = ramps(2)
    x = (1e-6 * x).astype("float32")
    x[0, 20:] = -1e4
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        inputs, h, _ = models.scaled_inputs((24, 1), mask_value=-1e4, scaling="series")
        got = keras.ops.convert_to_numpy(keras.Model(inputs, h)(x)).astype("float64")
    finally:
        keras.config.set_dtype_policy(previous)
    series = x[1, :, 0].astype("float64")
    np.testing.assert_allclose(got[1, :, 0], (series - series.mean()) / series.std(), atol=1e-2)


def test_paired_inputs_of_a_tiny_set_share_each_warp(monkeypatch):
    """Both inputs of an example are warped with the same shift and stretch
    (the same draws, whatever their lengths)."""
    seen = []
    real = keras.Model.fit

    def recorded(self, x, y=None, **kwargs):
        x = list(x)
        seen.append(x[0])
        return real(self, (batch for batch in x), y, **kwargs)

    monkeypatch.setattr(keras.Model, "fit", recorded)
    first, second, y = paired_series(40)
    take = np.concatenate([np.flatnonzero(y == c)[:3] for c in (0, 1)])
    recipe = Recipe(gradient_steps=4, updates_per_epoch=2)
    train_classifier(models.drrt_classifier, [first[take], second[take]], y[take], mask_value=-1e4, seed=0,
                     recipe=recipe, jit_compile=False)
    repeats = recipe.plan(6)[0]
    rng = np.random.default_rng((0, 0))
    order, warp_seed = rng.permutation(6 * repeats), int(rng.integers(2**31))
    (got_first, got_second), _, _ = seen[-1]
    for got, part in ((got_first, first[take]), (got_second, second[take])):
        want = models.recipes.warp_series(np.tile(part, (repeats, 1, 1)), -1e4, recipe.time_warp, seed=warp_seed)
        np.testing.assert_array_equal(got, want[order][:len(got)])
