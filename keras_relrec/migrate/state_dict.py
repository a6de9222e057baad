"""Reading a state dict ({name: NumPy array}) into Keras variables: what
every loader of `keras_relrec.migrate` shares.

A load is all or nothing: `take` checks each array (present, shape, real
numbers, finite) as it is collected, and `assign` converts every value to
its variable's dtype before it assigns any, so a bad array raises before
the model changes."""

import keras
import numpy as np


def _holds_real_numbers(dtype):
    if dtype.kind in "iuf":
        return True
    # ml_dtypes' floats (bfloat16, float8_*) have kind "V", like structured arrays.
    try:
        return keras.backend.is_float_dtype(dtype)
    except ValueError:
        return False


def take(state_dict, name, shape, used, source, argument="state_dict"):
    """`state_dict[name]` as an array of `shape`, recorded in `used`; a
    missing key, another shape, a dtype other than real numbers or a NaN or
    inf raises `ValueError` naming `argument`, the key and `source`."""
    shape = tuple(shape)
    if name not in state_dict:
        raise ValueError(
            f"Argument `{argument}` has no key '{name}'; the {source} weight '{name}' of shape {shape} "
            "is needed by this layer."
        )
    used.add(name)
    array = np.asarray(state_dict[name])
    if array.shape != shape:
        raise ValueError(
            f"Argument `{argument}` key '{name}' holds shape {array.shape}; the {source} weight '{name}' "
            f"must have shape {shape} for this layer."
        )
    if not _holds_real_numbers(array.dtype):
        raise ValueError(
            f"Argument `{argument}` key '{name}' holds dtype {array.dtype}; the {source} weight '{name}' "
            "must hold real numbers (an integer or float array)."
        )
    bad = array.size - np.count_nonzero(np.isfinite(array))
    if bad:
        raise ValueError(
            f"Argument `{argument}` key '{name}' holds {bad} non-finite values (NaN or inf); the {source} "
            f"weight '{name}' must hold finite numbers."
        )
    return array


def assign(values):
    """Assigns every (Keras variable, array) pair, cast to the variable's
    dtype; all are cast (and checked to stay finite) before any is assigned."""
    with np.errstate(over="ignore"):  # an overflow is refused below, naming the variable
        cast = [(variable, np.asarray(value).astype(variable.dtype)) for variable, value in values]
    for variable, value in cast:
        # A finite float64 can overflow a float32 (or float16) variable.
        if not np.all(np.isfinite(value)):
            raise ValueError(
                f"A weight for the variable '{variable.path}' overflows its dtype {variable.dtype}; "
                "expected values within that dtype's range."
            )
    for variable, value in cast:
        variable.assign(value)
