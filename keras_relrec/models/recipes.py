"""One training recipe per classifier builder, the same on every data set."""

import dataclasses
import functools
import math
import types

import keras
import numpy as np

from keras_relrec.models.drrt_classifier import drrt_classifier
from keras_relrec.models.front_end import MAX_STEPS
from keras_relrec.models.front_end import RECURRENT_MAX_STEPS
from keras_relrec.models.front_end import FrontEnd
from keras_relrec.models.front_end import front_end_strides
from keras_relrec.models.front_end import resolve_front_end
from keras_relrec.models.front_end import resolve_scaling
from keras_relrec.models.front_end import valid_steps
from keras_relrec.models.nbof_classifiers import nbof_classifier
from keras_relrec.models.nbof_classifiers import recurrent_nbof_classifier
from keras_relrec.models.tabl_networks import class_weights
from keras_relrec.models.tabl_networks import resolve_num_codewords
from keras_relrec.models.tabl_networks import tabl_network
from keras_relrec.models.training_state import build_training_state
from keras_relrec.utils import validation


@dataclasses.dataclass(frozen=True)
class Recipe:
    """How a classifier is trained, whatever the data set.

    Training runs about `gradient_steps` updates of `batch_size` examples,
    in epochs of at least `updates_per_epoch` updates (a small training
    set is repeated within an epoch, so that checks stay infrequent). A
    stratified `validation_split` of the training examples is held out;
    from half-way on, the weights with the lowest validation loss are kept
    and training stops when it has not improved for `patience` epochs.
    Where a class has fewer than `validation_min_per_class` training
    examples (a class without any does not count), nothing is held out: a
    split would keep one example of such a class, too few to choose an
    epoch by and a fifth of its data lost. The model then trains on
    everything for the planned updates, and every repeat of a series
    within an epoch is a copy warped in time (`time_warp`, `warp_series`),
    drawn afresh every epoch: with a few series per class the builders
    fitted them exactly within a few epochs and generalized poorly
    whatever the epoch; warped copies lifted every builder on generated
    sets of two series per class, where choosing the epochs by
    cross-validation did not (benchmarks/RESULTS.md, "Tiny training
    sets"). The learning rate
    follows a cosine decay to zero over the planned updates, and the loss
    weighs each class by N / (K · N_class).

    Attributes:
        learning_rate: AdamW's initial rate.
        weight_decay: AdamW's decoupled weight decay.
        batch_size: Examples per update (fewer if the training part is
            smaller).
        gradient_steps: Updates planned.
        updates_per_epoch: At least this many updates per epoch.
        patience: Epochs without a better validation loss before stopping.
        validation_split: Share of the training examples held out; 0 for
            none.
        validation_min_per_class: Hold out only when every class has at
            least this many training examples.
        time_warp: Where nothing is held out (small classes, or
            `validation_split=0`), the largest shift and stretch of a
            warped copy, a share of the series' length in [0, 0.5)
            (0: the copies are the series).
    """

    learning_rate: float = 3e-3
    weight_decay: float = 1e-4
    batch_size: int = 16
    gradient_steps: int = 1500
    updates_per_epoch: int = 25
    patience: int = 15
    validation_split: float = 0.2
    validation_min_per_class: int = 10
    time_warp: float = 0.1

    def __post_init__(self):
        validation.check_warp("time_warp", self.time_warp)

    def plan(self, examples):
        """(repeats, batch size, epochs) for `examples` training examples:
        each epoch passes over the data `repeats` times."""
        batch_size = min(self.batch_size, examples)
        repeats = math.ceil(self.updates_per_epoch * batch_size / examples)
        per_epoch = math.ceil(repeats * examples / batch_size)
        return repeats, batch_size, max(1, round(self.gradient_steps / per_epoch))


def front_end_max_steps(x, mask_value=None, max_steps=MAX_STEPS["conv"]):
    """The front-end's `max_steps` for padded sequences `x`: the stride that
    leaves the median series at most `max_steps` steps, applied to the
    padded length. The builders' own rule (stride from the padded length)
    would shorten every series as much as the longest one."""
    if mask_value is None:
        return max_steps
    lengths = np.sum(valid_steps(x, mask_value), axis=1)
    strides = front_end_strides(max(1, int(np.median(lengths))), max_steps)
    return -(-x.shape[1] // strides)


def _front_end(x, mask_value, kwargs, front_end, caps=MAX_STEPS):
    """The builder arguments `kwargs` with the front-end's `max_steps`
    ("auto" or left out) from the median length and the cap for the
    resolved `front_end` (a `FrontEnd`) in `caps`; the builder resolves
    its `front_end` argument itself."""
    # Anything else is the builder's to refuse.
    cap = front_end.max_steps(caps)
    if cap is not None and kwargs.get("max_steps", "auto") == "auto":
        return {**kwargs, "max_steps": front_end_max_steps(x, mask_value, cap)}
    return kwargs


# The recurrent NBoF's codewords with the kernels (by default a histogram
# of them per dilation and direction): chosen on two training series a
# class (benchmarks/RESULTS.md, "Tiny training sets, the recurrent NBoF").
RECURRENT_KERNELS_CODEWORDS = 64


def _nbof(x, num_classes, mask_value, normalization, seed, resolved_front_end, **kwargs):
    return nbof_classifier(x.shape[1:], num_classes, kwargs.pop("num_codewords", 32), mask_value=mask_value,
                           normalization=normalization, codebook_data=x, seed=seed,
                           **_front_end(x, mask_value, kwargs, resolved_front_end))


def _recurrent_nbof(x, num_classes, mask_value, normalization, seed, resolved_front_end, **kwargs):
    codewords = RECURRENT_KERNELS_CODEWORDS if resolved_front_end.kind == "kernels" else 32
    return recurrent_nbof_classifier(x.shape[1:], num_classes, kwargs.pop("num_codewords", codewords),
                                     mask_value=mask_value, normalization=normalization, codebook_data=x,
                                     seed=seed,
                                     **_front_end(x, mask_value, kwargs, resolved_front_end, RECURRENT_MAX_STEPS))


def _tabl(x, num_classes, mask_value, normalization, seed, resolved_front_end, **kwargs):
    # The codebooks, where there are quantizers, from the fitted part.
    quantized = resolve_num_codewords(kwargs.get("num_codewords", "auto"), resolved_front_end) is not None
    codebook = {"codebook_data": x, "seed": seed} if quantized else {}
    return tabl_network(input_shape=x.shape[1:], num_classes=num_classes, mask_value=mask_value,
                        normalization=normalization, **codebook,
                        **_front_end(x, mask_value, kwargs, resolved_front_end))


def _drrt(xs, num_classes, mask_value, normalization, seed, resolved_front_end, **kwargs):
    return drrt_classifier([part.shape[1:] for part in xs], num_classes, mask_value=mask_value,
                           normalization=normalization, seed=seed, **kwargs)


@dataclasses.dataclass(frozen=True)
class BuilderSpec:
    """What `train_classifier` and `recipe_for` know of a ready-made
    builder: how to call it, its default front-end and its recipes.

    Attributes:
        build: The builder, e.g. `nbof_classifier`.
        make: How `train_classifier` calls it,
            `make(x, num_classes, mask_value, normalization, seed, resolved_front_end, **kwargs)`
            with `resolved_front_end` the `FrontEnd` resolved for `x`'s
            width and `kwargs` the caller's builder arguments.
        front_end: The default of the builder's `front_end` argument
            (a test holds the two equal).
        recipe: The `Recipe` for any resolved front-end kind not in
            `front_end_recipes`.
        front_end_recipes: `((kind, Recipe), ...)`: the front-ends
            (resolved kinds: `"conv"`, `"window"`, `"kernels"` or None)
            that train by a recipe of their own.
        paired: Whether the builder takes two inputs (`x` a list of two);
            its `front_end` is None (it has none).
        xla: Whether `train_classifier(..., jit_compile="auto")` may train
            it with XLA (`resolve_jit_compile`).
    """

    build: object
    make: object
    front_end: object
    recipe: Recipe
    front_end_recipes: tuple = ()
    paired: bool = False
    xla: bool = True

    def recipe_for(self, kind):
        """The `Recipe` for the resolved front-end `kind`."""
        hashable = kind is None or isinstance(kind, str)
        return dict(self.front_end_recipes).get(kind, self.recipe) if hashable else self.recipe


# With the kernels nothing is learned before the quantizer, and at NBoF's
# longest series the default rate still underfitted; a higher rate fitted
# it in as many updates. On two training series a class the recurrent NBoF
# and C(TABL) over the kernels did better with it too (benchmarks/RESULTS.md,
# "Tiny training sets, continued"), so every builder trains by it with the
# kernels. With a learned front-end (or on
# the raw steps) NBoF underfitted the longer sets at 1,500 updates, so it
# plans more (benchmarks/RESULTS.md, "MiniRocket's kernels as the
# front-end: choosing its recipe (NBoF)" and "The learned front-end's
# defaults and recipe").
KERNELS_RECIPE = Recipe(learning_rate=1e-2, gradient_steps=1500)
BUILDERS = (
    BuilderSpec(nbof_classifier, _nbof, "kernels", KERNELS_RECIPE,
                tuple((front_end, Recipe(gradient_steps=4000)) for front_end in ("conv", "window", None))),
    BuilderSpec(recurrent_nbof_classifier, _recurrent_nbof, "auto", Recipe(), (("kernels", KERNELS_RECIPE),)),
    # TABL's few matrix products gain nothing from XLA that repays its
    # compile (benchmarks/RESULTS.md, "XLA or the graph in
    # `train_classifier`").
    BuilderSpec(tabl_network, _tabl, "auto", Recipe(), (("kernels", KERNELS_RECIPE),), xla=False),
    BuilderSpec(drrt_classifier, _drrt, None, Recipe(), paired=True),
)


# The recipes by builder, as 0.2 exposed them: read-only views of `BUILDERS`.
RECIPES = types.MappingProxyType({spec.build: (spec.make, spec.recipe) for spec in BUILDERS})
FRONT_END_RECIPES = types.MappingProxyType(
    {(spec.build, kind): recipe for spec in BUILDERS for kind, recipe in spec.front_end_recipes}
)


# XLA's compile (seconds) repays itself on TensorFlow's CPU only over many
# updates of large batches; below these the graph finishes first
# (benchmarks/RESULTS.md, "XLA or the graph in `train_classifier`").
XLA_MIN_UPDATES = 300
XLA_MIN_BATCH_VALUES = 4000


def resolve_jit_compile(jit_compile, spec, xs, batch_size, updates):
    """The `jit_compile` that `train_classifier` compiles with: `True` or
    `False` as given; for `"auto"` on TensorFlow, XLA where the builder
    allows it (`spec` None for a function of one's own, or `spec.xla`) and
    training runs at least `XLA_MIN_UPDATES` updates of batches of at
    least `XLA_MIN_BATCH_VALUES` values (`batch_size` × steps × features,
    summed over the inputs `xs`), TensorFlow's graph otherwise; Keras'
    `"auto"` on the other backends."""
    validation.check_choice("jit_compile", jit_compile, validation.JIT_COMPILE)
    if jit_compile != "auto" or keras.backend.backend() != "tensorflow":
        return jit_compile
    values = batch_size * sum(math.prod(part.shape[1:]) for part in xs)
    return bool((spec is None or spec.xla) and updates >= XLA_MIN_UPDATES and values >= XLA_MIN_BATCH_VALUES)


def builder_spec(builder):
    """The `BuilderSpec` of `builder` in `BUILDERS`; None for a function
    of one's own."""
    return next((spec for spec in BUILDERS if spec.build is builder), None)


def recipe_for(builder, features=None, **kwargs):
    """The `Recipe` `train_classifier` trains `builder` by when it is
    called with the builder arguments `kwargs` on data of `features`
    values per step: by the `front_end` they name, or the builder's
    default (`BuilderSpec`); `Recipe()` for a function of one's own.
    `"auto"` stands for the kernels or the raw steps by the data's width
    (`resolve_front_end`); without `features`, where the two train by
    different recipes, name the front-end or give `features`."""
    if features is not None:
        validation.check_positive_int("features", features)
    spec = builder_spec(builder)
    if spec is None:
        return Recipe()
    front_end = kwargs.get("front_end", spec.front_end)
    if features is not None:
        return spec.recipe_for(resolve_front_end(front_end, features).kind)
    kind = front_end.kind if isinstance(front_end, FrontEnd) else front_end
    if not (isinstance(kind, str) and kind == "auto"):
        return spec.recipe_for(kind)
    univariate, multivariate = (spec.recipe_for(resolve_front_end("auto", width).kind) for width in (1, 2))
    if univariate is not multivariate:
        raise ValueError(
            f"Argument `front_end='auto'` is the kernels for one feature per step and the raw steps for several, "
            f"which {builder.__name__} trains by different recipes; name the front-end (\"kernels\" or None), give "
            "`features` (the data's values per step), or call train_classifier, which knows the data's width."
        )
    return univariate


def normalization_statistics(x, mask_value=None):
    """(mean, variance) per feature over the valid steps of `x` (steps whose
    features all equal `mask_value` are padding), for a builder's
    `normalization`."""
    # The padding found in x's own dtype, as Masking finds it.
    steps = np.asarray(x, np.float64)[valid_steps(x, mask_value)]
    return steps.mean(axis=0), np.maximum(steps.var(axis=0), 1e-12)


def stratified_split(y, share, seed):
    """Indices (fit, held_out): `share` of each class held out, at least one
    example of every class that has two or more."""
    rng = np.random.default_rng(seed)
    held = []
    for label in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == label))
        if len(members) > 1:
            held.extend(members[: max(1, round(share * len(members)))])
    held = np.sort(np.array(held, int))
    return np.setdiff1d(np.arange(len(y)), held), held


def split_channels(x, channel_groups):
    """One multivariate input as several: `[x[..., group] for group in
    channel_groups]`, for a builder of paired inputs (`drrt_classifier`);
    split the test data the same way.

    Args:
        x: (examples, steps, channels).
        channel_groups: Groups of channel indices, e.g. `((0, 1, 2), (3, 4, 5))`,
            each non-empty; a channel may be in several.

    Returns:
        A list of arrays (examples, steps, len(group)).
    """
    x = np.asarray(x)
    channels = x.shape[-1] if x.ndim == 3 else None
    try:
        groups = [[int(c) for c in group] for group in channel_groups]
    except (TypeError, ValueError):
        groups = None
    if (channels is None or not groups or any(not g or min(g) < 0 or max(g) >= channels for g in groups)):
        raise ValueError(
            "Argument `channel_groups` must be groups of channel indices of x (examples, steps, channels), "
            f"each non-empty and below the channels; received channel_groups={channel_groups!r} for x of shape "
            f"{x.shape}."
        )
    return [x[..., group] for group in groups]


def _as_model_input(parts):
    """A list of per-input arrays (`_inputs`) as a model takes them: the one
    array of a single-input model, the list (or tuple) of a paired one."""
    return parts if len(parts) > 1 else parts[0]


def _inputs(x, y):
    """`x` as a list of float32 arrays (one per input) and `y` as int32,
    checked: every input (examples, steps, features) with one label per
    example."""
    paired = isinstance(x, (list, tuple))
    xs = [np.asarray(part, np.float32) for part in (x if paired else [x])]
    y = np.asarray(y)
    if len(xs) == 0 or any(part.ndim != 3 for part in xs) or y.ndim != 1 or any(len(part) != len(y) for part in xs):
        shapes = ", ".join(str(part.shape) for part in xs)
        raise ValueError(
            "Arguments `x` and `y` must be sequences (examples, steps, features), or a list of them for a model of "
            f"several inputs, and one label each; received x of shape{'s' if paired else ''} {shapes or '[]'} and y "
            f"of shape {y.shape}."
        )
    if len(y) == 0:
        raise ValueError("Arguments `x` and `y` must hold at least one example; received none.")
    if not np.issubdtype(y.dtype, np.integer):
        as_float = np.asarray(y, np.float64) if np.issubdtype(y.dtype, np.number) else None
        if as_float is None or not np.all(np.isfinite(as_float)) or np.any(as_float != np.round(as_float)):
            raise ValueError(f"Argument `y` must hold integer labels 0..K−1; received y of dtype {y.dtype} with "
                             "values that are not whole numbers.")
    return xs, y.astype(np.int32)


def _check_labels(y, num_classes):
    bad = y[(y < 0) | (y >= num_classes)]
    if len(bad):
        raise ValueError(
            f"Argument `y` must hold labels 0..{num_classes - 1} (num_classes={num_classes}); received "
            f"{len(bad)} outside it, e.g. {int(bad[0])}."
        )


def warp_series(x, mask_value=None, warp=0.1, seed=0):
    """Copies of the series `x` (examples, steps, features), each warped in
    time: its valid steps resampled by linear interpolation at
    u_t = shift + (1 + stretch) · t, clipped to the series, with shift and
    stretch uniform in [−warp, warp] (shares of its length). Padding stays
    where it is; a series of one step stays as it is.

    Args:
        x: Sequences padded at the end with `mask_value` (None: every step
            is valid).
        mask_value: The padding value.
        warp: The largest shift and stretch, in [0, 0.5).
        seed: Seed of the shifts and stretches.

    Returns:
        An array shaped and typed as `x`.
    """
    validation.check_warp("warp", warp)
    rng = np.random.default_rng(seed)
    warped = np.array(x, copy=True)
    for series, length in zip(warped, valid_steps(x, mask_value).sum(axis=1)):
        # Drawn for every series, so that inputs of one example, warped
        # with one seed, get the same warp whatever their lengths.
        shift, stretch = rng.uniform(-warp, warp, 2)
        if length < 2:
            continue
        positions = np.clip(shift + (1 + stretch) * np.linspace(0.0, 1.0, length), 0.0, 1.0) * (length - 1)
        steps = np.arange(length)
        series[:length] = np.stack([np.interp(positions, steps, series[:length, f])
                                    for f in range(series.shape[-1])], axis=-1)
    return warped


def _warped_batches(xs, y, weights, batch_size, epochs, mask_value, warp, seed):
    """Batches (inputs, labels, sample weights) for `epochs` epochs over the
    examples `xs` (a list of inputs), each a copy warped in time
    (`warp_series`) afresh every epoch, in a new order: copies drawn once
    were fitted exactly within a few epochs. One generator over every
    epoch, so that no prefetched batch can come from another epoch's draw."""
    for number in range(epochs):
        rng = np.random.default_rng((seed, number))
        order = rng.permutation(len(y))
        # Every input of an example the same warp: one seed for all.
        warp_seed = int(rng.integers(2**31))
        warped = [warp_series(part, mask_value, warp, warp_seed)[order] for part in xs]
        for start in range(0, len(y), batch_size):
            # A tuple: tf.data takes no lists in a generator's batches.
            x = tuple(part[start:start + batch_size] for part in warped)
            take = order[start:start + batch_size]
            yield _as_model_input(x), y[take], weights[take]


def train_classifier(builder, x, y, num_classes=None, mask_value=None, seed=0, recipe=None, jit_compile="auto",
                     verbose=0, channel_groups=None, **kwargs):
    """Builds a classifier with `builder` and trains it with the builder's
    recipe (its `BuilderSpec` in `BUILDERS`: `recipe`, or one of
    `front_end_recipes` for a front-end that trains by its own), used
    unchanged on any data set.

    The statistics of `Normalization` and the k-means codebook come from
    the part of the training data that is fitted; the held-out part stops
    training, or where classes are too small to hold any out, every
    series is repeated as copies warped in time (see `Recipe`). For sequences of different
    lengths the builders' front-end strides by the median length, not the
    padded one (`front_end_max_steps`, up to the front-end's `MAX_STEPS`,
    or `RECURRENT_MAX_STEPS` for the recurrent NBoF), unless `max_steps` is
    given. The builders' inputs are scaled as `scaling` says (default
    `"auto"`: each series by itself where the training series' scales
    spread over more than `SERIES_SCALE_SPREAD`, `choose_scaling`; one mean
    and variance otherwise).

    Args:
        builder: `nbof_classifier`, `recurrent_nbof_classifier`,
            `tabl_network` or `drrt_classifier`; or a function of your own,
            `make(x, num_classes, mask_value, normalization, seed, **kwargs)`
            → an uncompiled model that outputs logits (`x`: the fitted
            training sequences, a list of them for several inputs;
            `normalization`: their `(mean, variance)` per feature, a list
            for several inputs), trained with `Recipe()` unless `recipe` is
            given.
        x: Training sequences (examples, steps, features), padded with
            `mask_value` where lengths differ; for a model of two inputs
            (`drrt_classifier`) a list `[x_a, x_b]`, or one array split by
            `channel_groups`.
        y: Integer labels 0..K−1.
        num_classes: K; default `max(y) + 1`.
        mask_value: The padding value, or None for sequences of one length.
        seed: Seed of the split, the weights, k-means and dropout.
        recipe: A `Recipe` to use instead of the builder's.
        jit_compile: Whether training is compiled by XLA: True, False, or
            "auto" (default): on TensorFlow, XLA where many updates of
            large batches repay its compile and TensorFlow's graph
            otherwise (`resolve_jit_compile`); Keras' "auto" on JAX and
            PyTorch.
        verbose: Passed to `fit`.
        channel_groups: Groups of channel indices that split one
            multivariate `x` into the inputs of a model of several
            (`split_channels`); the model then takes the split inputs.
        **kwargs: More builder arguments (e.g. `attention`, `scaling`).

    Returns:
        `(model, history)`: the compiled model, with the weights of its best
        epoch where part of the data was held out (its last weights
        otherwise), and the `fit` history.
    """
    validation.check_choice("jit_compile", jit_compile, validation.JIT_COMPILE)
    if not callable(builder):
        names = ", ".join(spec.build.__name__ for spec in BUILDERS)
        raise ValueError(
            f"Argument `builder` must be one of {names}, or a function that makes a model; received "
            f"builder={builder!r}."
        )
    if channel_groups is not None:
        if isinstance(x, (list, tuple)):
            raise ValueError("Argument `channel_groups` splits one array `x`; received a list of inputs. Give "
                             "either the inputs or one array and its channel groups.")
        x = split_channels(x, channel_groups)
    xs, y = _inputs(x, y)
    num_classes = int(y.max()) + 1 if num_classes is None else validation.check_positive_int(
        "num_classes", num_classes)
    _check_labels(y, num_classes)
    spec = builder_spec(builder)
    if spec is None:
        make, recipe = builder, recipe or Recipe()
    else:
        if spec.paired != (len(xs) == 2):
            raise ValueError(
                f"Argument `x` must be {'a list of two inputs' if spec.paired else 'one array'} for "
                f"{builder.__name__}; received {len(xs)} input{'s' if len(xs) > 1 else ''}"
                f"{' (or give channel_groups)' if spec.paired else ''}."
            )
        # "auto" by the data's width, for the recipe and the front-end's
        # length; the builder resolves its argument itself.
        front_end = resolve_front_end(kwargs.get("front_end", spec.front_end), xs[0].shape[-1])
        make = functools.partial(spec.make, resolved_front_end=front_end)
        recipe = recipe or spec.recipe_for(front_end.kind)
        # "auto" from the data, each input's; "series" if any input needs it.
        chosen = {resolve_scaling(kwargs.get("scaling", "auto"), part, mask_value) for part in xs}
        kwargs = {**kwargs, "scaling": "series" if "series" in chosen else "global"}
    keras.utils.set_random_seed(seed)
    # Classes with no example (a gap in the labels) are not counted.
    smallest = np.unique(y, return_counts=True)[1].min(initial=len(y))
    if recipe.validation_split > 0 and smallest >= recipe.validation_min_per_class:
        fit, held = stratified_split(y, recipe.validation_split, seed)
    else:
        fit, held = np.arange(len(y)), np.array([], int)
    fitted = [part[fit] for part in xs]
    statistics = [normalization_statistics(part, mask_value) for part in fitted]
    model = make(_as_model_input(fitted), num_classes, mask_value, _as_model_input(statistics), seed, **kwargs)
    repeats, batch_size, epochs = recipe.plan(len(fit))
    x_fit = [np.tile(part, (repeats, 1, 1)) for part in fitted]
    y_fit = np.tile(y[fit], repeats)
    updates = epochs * math.ceil(len(y_fit) / batch_size)
    schedule = keras.optimizers.schedules.CosineDecay(recipe.learning_rate, updates)
    model.compile(
        optimizer=keras.optimizers.AdamW(schedule, weight_decay=recipe.weight_decay),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        jit_compile=resolve_jit_compile(jit_compile, spec, x_fit, batch_size, updates),
    )
    build_training_state(model, _as_model_input([part[:batch_size] for part in x_fit]), y_fit[:batch_size],
                         np.ones(batch_size, np.float32))
    checks = {}
    if len(held):
        checks = {"validation_data": (_as_model_input([part[held] for part in xs]), y[held]),
                  "callbacks": [keras.callbacks.EarlyStopping(
                      patience=recipe.patience, start_from_epoch=epochs // 2, restore_best_weights=True)]}
    weights = class_weights(y[fit])
    if not len(held) and recipe.time_warp > 0:
        batches = _warped_batches(x_fit, y_fit, np.array([weights[label] for label in y_fit], np.float32),
                                  batch_size, epochs, mask_value, recipe.time_warp, seed)
        history = model.fit(batches, epochs=epochs, steps_per_epoch=math.ceil(len(y_fit) / batch_size),
                            shuffle=False, verbose=verbose)
    else:
        history = model.fit(_as_model_input(x_fit), y_fit, epochs=epochs, batch_size=batch_size,
                            class_weight=weights, verbose=verbose, **checks)
    return model, history
