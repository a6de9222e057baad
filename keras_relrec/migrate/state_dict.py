"""Reading a PyTorch state dict (as NumPy arrays) into Keras variables: what
every loader of `keras_relrec.migrate` from PyTorch code shares."""

import numpy as np


def take(state_dict, name, shape, used, source):
    """`state_dict[name]` as an array of `shape`, recorded in `used`; a
    missing weight or another shape raises `ValueError` naming `source`."""
    if name not in state_dict:
        raise ValueError(f"The state dict has no weight '{name}', which this layer needs.")
    used.add(name)
    array = np.asarray(state_dict[name])
    if tuple(array.shape) != tuple(shape):
        raise ValueError(
            f"{source} weight '{name}' must have shape {tuple(shape)} for this layer; "
            f"received shape {tuple(array.shape)}."
        )
    return array


def assign(values):
    """Assigns every (Keras variable, array) pair, cast to the variable's dtype."""
    for variable, value in values:
        variable.assign(np.asarray(value).astype(variable.dtype))
