"""Argument checks shared by the layers: each raises `ValueError` naming the
argument, the value received and what was expected. NumPy scalars pass, as
they do in Keras."""

import numbers

import keras
import numpy as np


def check_positive_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(
            f"Argument `{name}` must be a positive integer; received "
            f"{name}={value!r}."
        )
    return int(value)


def check_non_negative_int(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(
            f"Argument `{name}` must be a non-negative integer; received "
            f"{name}={value!r}."
        )
    return int(value)


def check_rate(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(
            f"Argument `{name}` must be a float in [0, 1); received "
            f"{name}={value!r}."
        )
    if not 0.0 <= value < 1.0:
        raise ValueError(
            f"Argument `{name}` must be in [0, 1); received {name}={value!r}."
        )
    return float(value)


def check_bool(name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(
            f"Argument `{name}` must be a bool; received {name}={value!r}."
        )
    return bool(value)


def check_seed(value):
    if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
        raise ValueError(
            f"Argument `seed` must be an int or None; received seed={value!r}."
        )
    return None if value is None else int(value)


def check_float(name, value):
    """A real number; infinities pass (the RMC's gate biases use them)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or value != value:
        raise ValueError(
            f"Argument `{name}` must be a float; received {name}={value!r}."
        )
    return float(value)


def check_warp(name, value):
    """The largest shift and stretch of a time warp, a share of a series'
    length in [0, 0.5) (beyond, a stretched series could lose half its
    steps to the clipping)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value < 0.5:
        raise ValueError(f"Argument `{name}` must be a share of the length in [0, 0.5); received {name}={value!r}.")
    return float(value)


# The values of a `jit_compile` argument, Keras' own.
JIT_COMPILE = ("auto", True, False)


def check_choice(name, value, choices):
    # Exact types: True == 1 and 1.0 == 1 must not pass for the choice 1.
    if not any(value == c and type(value) is type(c) for c in choices):
        raise ValueError(
            f"Argument `{name}` must be one of {choices}; received {name}={value!r}."
        )
    return value


def check_positive_float(name, value):
    value = check_float(name, value)
    if not 0 < value < float("inf"):
        raise ValueError(
            f"Argument `{name}` must be a positive float; received {name}={value!r}."
        )
    return value


def check_unit_interval(name, value):
    """A float in [0, 1], such as the start of a mixing weight (TwoDAttention's
    τ, TABL's λ)."""
    checked = check_float(name, value)
    if not 0.0 <= checked <= 1.0:
        raise ValueError(
            f"Argument `{name}` must be in [0, 1]; received {name}={value!r}."
        )
    return checked


def check_non_negative_float(name, value):
    value = check_float(name, value)
    if not 0 <= value < float("inf"):
        raise ValueError(
            f"Argument `{name}` must be a non-negative float; received {name}={value!r}."
        )
    return value


def check_states_batch(layer, inputs, states):
    """Raises `ValueError` when a state's batch size differs from the
    inputs' (where both are known): a state of batch 1 would otherwise be
    broadcast silently over every sequence."""
    batch = inputs.shape[0]
    for k, state in enumerate(states):
        if batch is not None and state.shape[0] is not None and state.shape[0] != batch:
            raise ValueError(
                f"{type(layer).__name__} received states[{k}] of batch size "
                f"{state.shape[0]} for inputs of batch size {batch}; initial states "
                "must have the inputs' batch size."
            )


def check_cell_states(cell, inputs, states):
    """`check_states_batch`, and a `ValueError` when a state's shape after
    the batch differs from the cell's (`compute_output_shape` for one step
    of `inputs`, where both are known): a state of another width would be
    broadcast silently or fail in the backend."""
    check_states_batch(cell, inputs, states)
    _, expected = cell.compute_output_shape(tuple(inputs.shape))
    for k, (state, shape) in enumerate(zip(states, expected)):
        got, want = tuple(state.shape[1:]), tuple(shape[1:])
        if len(got) != len(want) or any(g is not None and w is not None and g != w for g, w in zip(got, want)):
            raise ValueError(
                f"{type(cell).__name__} received states[{k}] of shape {tuple(state.shape)} for steps of shape "
                f"{tuple(inputs.shape)}; expected (batch, {', '.join(map(str, want))}). Give initial states of "
                "the shapes `get_initial_state` returns."
            )


def check_numpy_seed(value):
    """A seed for `numpy.random.default_rng`: None, a non-negative int or a
    sequence of them, or a NumPy `SeedSequence`, `BitGenerator` or
    `Generator`."""
    if value is None or isinstance(value, (np.random.SeedSequence, np.random.BitGenerator, np.random.Generator)):
        return value
    values = list(value) if isinstance(value, (list, tuple)) else [value]
    if values and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 0 for v in values):
        return value
    raise ValueError(
        "Argument `seed` must be None, a non-negative int or a sequence of them; "
        f"received seed={value!r}."
    )


def sequence_input_spec(layer, input_shape):
    """The `InputSpec` of a layer that takes (batch, steps, features) with a
    known number of features; any other shape raises `ValueError` naming
    the layer and the shape received."""
    if len(input_shape) != 3 or input_shape[-1] is None:
        raise ValueError(
            f"{type(layer).__name__} expects inputs (batch, steps, features) with a known number of "
            f"features; received input of shape {tuple(input_shape)}."
        )
    return keras.layers.InputSpec(ndim=3, axes={-1: input_shape[-1]})


def check_num_segments(num_segments, input_shape):
    """`num_segments` segments of the steps of `input_shape` (batch, steps,
    …) leave none empty: at most the number of steps, where it is known."""
    steps = input_shape[1]
    if steps is not None and steps < num_segments:
        raise ValueError(
            f"Argument `num_segments` must be at most the number of steps, {steps}, of the input of shape "
            f"{tuple(input_shape)}; received num_segments={num_segments}."
        )


def pair_input_specs(layer, input_shape, fixed_lengths=False):
    """The `InputSpec`s of a layer that takes two sequences [A, B], each
    (batch, steps, features) with a known number of features (and, with
    `fixed_lengths`, a known number of steps, at least one, which the
    specs then hold to); anything else raises `ValueError` naming the
    layer and the shapes received."""
    shapes = list(input_shape) if isinstance(input_shape, (list, tuple)) else [input_shape]
    if len(shapes) != 2 or not all(isinstance(s, (list, tuple)) for s in shapes) or any(
        len(s) != 3 or s[-1] is None for s in shapes
    ):
        received = [tuple(s) if isinstance(s, (list, tuple)) else s for s in shapes]
        raise ValueError(
            f"{type(layer).__name__} expects two inputs [A, B], each (batch, steps, features) with a known "
            f"number of features; received input of shape {received if len(shapes) != 1 else received[0]}."
        )
    if not fixed_lengths:
        return [keras.layers.InputSpec(ndim=3, axes={-1: s[-1]}) for s in shapes]
    if any(s[1] is None or s[1] < 1 for s in shapes):
        raise ValueError(
            f"{type(layer).__name__} needs inputs of a known length of at least one step (its weights depend on "
            f"the lengths); received inputs of shapes {[tuple(s) for s in shapes]}."
        )
    return [keras.layers.InputSpec(ndim=3, axes={1: s[1], -1: s[-1]}) for s in shapes]


def check_same_batch(layer, inputs, names=("A", "B")):
    """Raises `ValueError` when the inputs' batch sizes differ (where known):
    a batch of 1 would otherwise be broadcast silently over the other's."""
    batches = [x.shape[0] for x in inputs]
    if None not in batches and len(set(batches)) > 1:
        received = ", ".join(f"{name} of batch size {batch}" for name, batch in zip(names, batches))
        raise ValueError(
            f"{type(layer).__name__} received {received}; every input must have the same batch size (pass "
            "the same examples to each)."
        )


def shapes_agree(shape, expected):
    """Whether `shape` has the rank of `expected` and its sizes, where both
    are known (None: unknown)."""
    return len(shape) == len(expected) and all(
        a is None or b is None or a == b for a, b in zip(shape, expected))


def check_returned_states(method, states, specs, source):
    """`states` that `method` (e.g. "FifoMemory.update") returned, as a
    list, refused unless they are `specs`, [(name, shape batch first,
    dtype)] from `source` (e.g. "state_specs()"): as many, each of its
    shape (sizes where both are known) and dtype. The next step takes them
    as they are: another count would pair states with the wrong names,
    another dtype change the states' from step to step."""
    states = list(states)
    if len(states) != len(specs):
        raise ValueError(f"{method} must return its {len(specs)} states {[name for name, _, _ in specs]} (its "
                         f"{source}); it returned {len(states)}.")
    for (name, shape, dtype), state in zip(specs, states):
        got, want = (keras.backend.standardize_dtype(d) for d in (state.dtype, dtype))
        if not shapes_agree(tuple(state.shape), tuple(shape)) or got != want:
            raise ValueError(
                f"{method} must return state '{name}' of shape {tuple(shape)} (batch first) and dtype {want}, as "
                f"its {source} give it; it returned shape {tuple(state.shape)} and dtype {got}."
            )
    return states


def check_mask(layer, mask, inputs, name="mask"):
    """Raises `ValueError` unless `mask` (None passes) is (batch, steps) for
    `inputs` (batch, steps, …) — (batch, height, width) for a feature map
    (batch, height, width, channels) — where the sizes are known: a mask of
    another rank, length or batch would be broadcast or fail in the
    backend."""
    if mask is None:
        return
    axes = 3 if len(inputs.shape) == 4 else 2
    shape, expected = tuple(mask.shape), tuple(inputs.shape[:axes])
    if not shapes_agree(shape, expected):
        form = "(batch, height, width)" if axes == 3 else "(batch, steps)"
        raise ValueError(
            f"{type(layer).__name__} expects `{name}` of shape {form} = {expected} for inputs of shape "
            f"{tuple(inputs.shape)}; received {name} of shape {shape}. Give one boolean per "
            f"{'position' if axes == 3 else 'step of each sequence'}, true where it is valid."
        )


def check_token_ids(layer, inputs, vocabulary_size, name="inputs"):
    """Token ids out of 0 … vocabulary_size − 1, and floats that are not
    whole numbers (a float id that is whole is cast, as Keras' `Embedding`
    casts it), raise `ValueError` in an eager call; under a trace they are
    assumed valid."""
    ids = concrete_values(inputs)
    if ids is None or not ids.size:
        return
    what = "" if name == "inputs" else f" in `{name}`"
    fractional = ids[~np.isfinite(ids) | (ids != np.round(ids))] if np.issubdtype(ids.dtype, np.floating) else ids[:0]
    if fractional.size:
        raise ValueError(
            f"{type(layer).__name__} expects whole-number token ids{what} (floats that are whole are cast to "
            f"int32); received token id {fractional[0].item()!r} in a {ids.dtype.name} tensor. Give integer ids "
            "(dtype int32 or int64)."
        )
    bad = ids[(ids < 0) | (ids >= vocabulary_size)]
    if bad.size:
        raise ValueError(
            f"{type(layer).__name__} expects token ids{what} in 0..{vocabulary_size - 1} "
            f"(vocabulary_size={vocabulary_size}), padding included; received token id {bad[0].item()}. "
            "Map the ids into that range (pad with 0 and mask it), or build the layer with a larger "
            "vocabulary_size."
        )


def concrete_values(x):
    """`x` as a NumPy array where its values are known (an eager call); None
    under a trace (tf.function, jit, export, `fit`/`predict`), where they
    are not: checks of values run in eager calls only."""
    try:
        return keras.ops.convert_to_numpy(x)
    except (NotImplementedError, TypeError):  # a symbolic tensor, or a JAX tracer
        return None
