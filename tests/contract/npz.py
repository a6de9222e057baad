"""Lists of arrays in and out of `.npz` files, for the processes of the
contract that exchange them. NumPy alone: a worker imports this before its
backend sets up devices."""

import numpy as np


def pack(prefix, values):
    """{prefix_k: array} for one array or a list of them (several inputs or
    outputs), to store in an .npz."""
    values = values if isinstance(values, (list, tuple)) else [values]
    return {f"{prefix}_{k}": np.asarray(v) for k, v in enumerate(values)}


def unpack(data, prefix):
    """What `pack` stored: one array, or a list of them."""
    values = [data[f"{prefix}_{k}"] for k in range(len(data)) if f"{prefix}_{k}" in data]
    return values[0] if len(values) == 1 else values
