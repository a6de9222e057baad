"""One training recipe per classifier builder, the same on every data set."""

import dataclasses
import inspect
import math

import keras
import numpy as np

from keras_relrec.models.front_end import MAX_STEPS
from keras_relrec.models.front_end import RECURRENT_MAX_STEPS
from keras_relrec.models.front_end import front_end_strides
from keras_relrec.models.front_end import resolve_front_end
from keras_relrec.models.front_end import valid_steps
from keras_relrec.models.nbof_classifiers import nbof_classifier
from keras_relrec.models.nbof_classifiers import recurrent_nbof_classifier
from keras_relrec.models.tabl_networks import class_weights
from keras_relrec.models.tabl_networks import tabl_network
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
    epoch by and a fifth of its data lost, so the model trains on
    everything for the planned updates and keeps its last weights. The
    learning rate follows a cosine decay to zero over the planned updates,
    and the loss weighs each class by N / (K · N_class).

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
    """

    learning_rate: float = 3e-3
    weight_decay: float = 1e-4
    batch_size: int = 16
    gradient_steps: int = 1500
    updates_per_epoch: int = 25
    patience: int = 15
    validation_split: float = 0.2
    validation_min_per_class: int = 10

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


def default_front_end(builder):
    """The front-end `builder` uses when none is given: its `front_end`
    argument's default, None for a builder without one."""
    try:
        parameter = inspect.signature(builder).parameters.get("front_end")
    except (TypeError, ValueError):  # a callable without a signature
        return None
    return None if parameter is None or parameter.default is inspect.Parameter.empty else parameter.default


def _named_front_end(builder, kwargs):
    """The front-end the builder arguments `kwargs` name, or `builder`'s
    default."""
    return kwargs.get("front_end", default_front_end(builder))


def _front_end(x, mask_value, kwargs, builder, caps=MAX_STEPS):
    """The front-end's arguments, `max_steps` ("auto" or left out) from the
    median length and the builder's cap for its front-end (`caps`)."""
    front_end = resolve_front_end(_named_front_end(builder, kwargs), x.shape[-1])
    # Anything else is the builder's to refuse.
    if isinstance(front_end, str) and front_end in caps and kwargs.get("max_steps", "auto") == "auto":
        return {**kwargs, "max_steps": front_end_max_steps(x, mask_value, caps[front_end])}
    return kwargs


def _nbof(x, num_classes, mask_value, normalization, seed, **kwargs):
    return nbof_classifier(x.shape[1:], num_classes, kwargs.pop("num_codewords", 32), mask_value=mask_value,
                           normalization=normalization, codebook_data=x, seed=seed,
                           **_front_end(x, mask_value, kwargs, nbof_classifier))


def _recurrent_nbof(x, num_classes, mask_value, normalization, seed, **kwargs):
    return recurrent_nbof_classifier(x.shape[1:], num_classes, kwargs.pop("num_codewords", 32),
                                     mask_value=mask_value, normalization=normalization, codebook_data=x,
                                     seed=seed, **_front_end(x, mask_value, kwargs, recurrent_nbof_classifier,
                                                             RECURRENT_MAX_STEPS))


def _tabl(x, num_classes, mask_value, normalization, seed, **kwargs):
    # The codebooks, where there are quantizers, from the fitted part.
    codebook = {"codebook_data": x, "seed": seed} if kwargs.get("num_codewords") is not None else {}
    return tabl_network(input_shape=x.shape[1:], num_classes=num_classes, mask_value=mask_value,
                        normalization=normalization, **codebook, **_front_end(x, mask_value, kwargs, tabl_network))


# Each builder, how the trainer calls it, and its recipe with its default
# front-end. With "kernels" (NBoF's default) the model learns nothing before
# the quantizer; at 1,460 steps (ACSF1) 1,500 updates at a rate of 3e-3
# still underfitted (training accuracy 56-61%), and a rate of 1e-2 fitted
# it better in as many (benchmarks/RESULTS.md).
RECIPES = {
    nbof_classifier: (_nbof, Recipe(learning_rate=1e-2, gradient_steps=1500)),
    recurrent_nbof_classifier: (_recurrent_nbof, Recipe()),
    tabl_network: (_tabl, Recipe()),
}
# Where another front-end of the builder's trains by another recipe. NBoF
# with a learned front-end (or on the raw steps) plans 4,000 updates: with
# 1,500 it still underfitted the longer sets of benchmarks/bench_ucr.py
# (training accuracy 73-93% on OSULeaf and ACSF1).
FRONT_END_RECIPES = {
    (nbof_classifier, front_end): Recipe(gradient_steps=4000) for front_end in ("conv", "window", None)
}


def recipe_for(builder, **kwargs):
    """The `Recipe` `train_classifier` trains `builder` by when it is
    called with the builder arguments `kwargs`: by the `front_end` they
    name, or the builder's default. `"auto"` stands for the kernels or the
    raw steps by the data's width (`resolve_front_end`), which
    `train_classifier` knows and this function does not: where the two
    train by different recipes, name the front-end."""
    default = RECIPES[builder][1] if builder in RECIPES else Recipe()

    def recipe(front_end):
        hashable = front_end is None or isinstance(front_end, str)
        return FRONT_END_RECIPES.get((builder, front_end), default) if hashable else default

    front_end = _named_front_end(builder, kwargs)
    if not (isinstance(front_end, str) and front_end == "auto"):
        return recipe(front_end)
    univariate, multivariate = (recipe(resolve_front_end("auto", features)) for features in (1, 2))
    if univariate is not multivariate:
        raise ValueError(
            f"Argument `front_end='auto'` is the kernels for one feature per step and the raw steps for several, "
            f"which {builder.__name__} trains by different recipes; name the front-end (\"kernels\" or None), or "
            "call train_classifier, which knows the data's width."
        )
    return univariate


def normalization_statistics(x, mask_value=None):
    """(mean, variance) per feature over the valid steps of `x` (steps whose
    features all equal `mask_value` are padding), for a builder's
    `normalization`."""
    x = np.asarray(x, np.float64)
    steps = x[valid_steps(x, mask_value)]
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


def train_classifier(builder, x, y, num_classes=None, mask_value=None, seed=0, recipe=None, jit_compile=True,
                     verbose=0, **kwargs):
    """Builds a classifier with `builder` and trains it with the builder's
    recipe (`RECIPES`, or `FRONT_END_RECIPES` for a front-end that trains
    by its own), used unchanged on any data set.

    The statistics of `Normalization` and the k-means codebook come from
    the part of the training data that is fitted; the held-out part stops
    training (see `Recipe`). For sequences of different lengths the
    builders' front-end strides by the median length, not the padded one
    (`front_end_max_steps`, up to the front-end's `MAX_STEPS`, or
    `RECURRENT_MAX_STEPS` for the recurrent NBoF), unless `max_steps` is
    given.

    Args:
        builder: `nbof_classifier`, `recurrent_nbof_classifier` or
            `tabl_network`; or a function of your own,
            `make(x, num_classes, mask_value, normalization, seed, **kwargs)`
            → an uncompiled model that outputs logits (`x`: the fitted
            training sequences, `normalization`: their `(mean, variance)`
            per feature), trained with `Recipe()` unless `recipe` is given.
        x: Training sequences (examples, steps, features), padded with
            `mask_value` where lengths differ.
        y: Integer labels 0..K−1.
        num_classes: K; default `max(y) + 1`.
        mask_value: The padding value, or None for sequences of one length.
        seed: Seed of the split, the weights, k-means and dropout.
        recipe: A `Recipe` to use instead of the builder's.
        jit_compile: Whether training is compiled by XLA (default True: on
            CPU, Keras' "auto" leaves it off, and these small models train
            several times faster with it).
        verbose: Passed to `fit`.
        **kwargs: More builder arguments (e.g. `attention`).

    Returns:
        `(model, history)`: the compiled model with the weights of its best
        epoch, and the `fit` history.
    """
    if not callable(builder):
        names = ", ".join(b.__name__ for b in RECIPES)
        raise ValueError(
            f"Argument `builder` must be one of {names}, or a function that makes a model; received "
            f"builder={builder!r}."
        )
    x, y = np.asarray(x, np.float32), np.asarray(y, np.int32)
    if x.ndim != 3 or len(y) != len(x):
        raise ValueError(
            "Arguments `x` and `y` must be sequences (examples, steps, features) and one label each; received "
            f"x of shape {x.shape} and y of shape {y.shape}."
        )
    num_classes = int(y.max()) + 1 if num_classes is None else validation.check_positive_int(
        "num_classes", num_classes)
    make = RECIPES[builder][0] if builder in RECIPES else builder
    # "auto" by the data's width, for the recipe only: the builder resolves
    # it itself.
    front_end = resolve_front_end(_named_front_end(builder, kwargs), x.shape[-1])
    recipe = recipe or recipe_for(builder, **{**kwargs, "front_end": front_end})
    keras.utils.set_random_seed(seed)
    # Classes with no example (a gap in the labels) are not counted.
    smallest = np.unique(y, return_counts=True)[1].min(initial=len(y))
    if recipe.validation_split > 0 and smallest >= recipe.validation_min_per_class:
        fit, held = stratified_split(y, recipe.validation_split, seed)
    else:
        fit, held = np.arange(len(y)), np.array([], int)
    model = make(x[fit], num_classes, mask_value, normalization_statistics(x[fit], mask_value), seed, **kwargs)
    repeats, batch_size, epochs = recipe.plan(len(fit))
    x_fit, y_fit = np.tile(x[fit], (repeats, 1, 1)), np.tile(y[fit], repeats)
    schedule = keras.optimizers.schedules.CosineDecay(
        recipe.learning_rate, epochs * math.ceil(len(y_fit) / batch_size))
    model.compile(
        optimizer=keras.optimizers.AdamW(schedule, weight_decay=recipe.weight_decay),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
        jit_compile=jit_compile,
    )
    checks = {}
    if len(held):
        checks = {"validation_data": (x[held], y[held]), "callbacks": [keras.callbacks.EarlyStopping(
            patience=recipe.patience, start_from_epoch=epochs // 2, restore_best_weights=True)]}
    history = model.fit(x_fit, y_fit, epochs=epochs, batch_size=batch_size, class_weight=class_weights(y[fit]),
                        verbose=verbose, **checks)
    return model, history
