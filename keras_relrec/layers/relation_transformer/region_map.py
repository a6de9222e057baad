"""Region maps of the guided regional relation module: which positions of
A and of B belong to each of K corresponding regions (R^{r(k)} of the DRRT,
Belanger Nzakimuena 2022, eq. 8)."""

import numbers

import numpy as np
from keras import ops


def check_regions(regions):
    """`regions` as the constructor takes it: a positive int K (equal split
    of both sequences' positions), or a pair `(regions_a, regions_b)` with,
    for each position, its region index, -1 for none, or a list of indices
    (a position in several regions). Returns it as given (JSON-able)."""
    if isinstance(regions, numbers.Integral) and not isinstance(regions, bool):
        if regions < 1:
            raise ValueError(f"Argument `regions` must be a positive integer or a pair of region lists; "
                             f"received regions={regions!r}.")
        return int(regions)
    if not (isinstance(regions, (list, tuple)) and len(regions) == 2
            and all(isinstance(side, (list, tuple)) and len(side) > 0 for side in regions)):
        raise ValueError(
            "Argument `regions` must be a positive integer K (equal split) or a pair (regions_a, regions_b) "
            f"of non-empty lists with one entry per position; received regions={regions!r}."
        )
    lists = [[_indices(entry, regions) for entry in side] for side in regions]
    count = 1 + max(max(e, default=-1) for side in lists for e in side)
    for name, side in zip("AB", lists):
        present = {k for entry in side for k in entry}
        missing = sorted(set(range(count)) - present)
        if missing:
            raise ValueError(
                f"Argument `regions` gives no position of {name} to region(s) {missing} (regions 0..{count - 1} "
                f"must each hold positions of both inputs); received regions={regions!r}."
            )
    return [list(side) for side in regions]


def _indices(entry, regions):
    entries = list(entry) if isinstance(entry, (list, tuple)) else [entry]
    if not all(isinstance(k, numbers.Integral) and not isinstance(k, bool) and k >= -1 for k in entries):
        raise ValueError(
            "Argument `regions` must hold, for each position, a region index ≥ 0, -1 (no region) or a list of "
            f"indices; received entry {entry!r} in regions={regions!r}."
        )
    return [int(k) for k in entries if k >= 0]


def num_regions(regions):
    if isinstance(regions, int):
        return regions
    return 1 + max(k for side in regions for entry in side for k in _indices(entry, regions))


def check_fits(regions, length_a, length_b):
    """An equal split into K regions (`regions` an int) leaves none empty:
    K is at most each length that is known (None: unknown). Inputs of no
    positions pass: they have no pairs to relate, and give empty maps."""
    if not isinstance(regions, int):
        return
    short = [f"{name} has {length}" for name, length in zip("AB", (length_a, length_b))
             if length is not None and 0 < length < regions]
    if short:
        raise ValueError(
            f"Argument `regions` must be at most the number of positions of each input (an equal split into more "
            f"regions than positions leaves regions empty); received regions={regions} where "
            f"{' and '.join(short)} positions. Use fewer regions or longer inputs."
        )


def explicit_lengths(regions):
    """(n, m) that an explicit map was written for; (None, None) for K."""
    if isinstance(regions, int):
        return None, None
    return len(regions[0]), len(regions[1])


def memberships(regions, length_a, length_b):
    """Boolean (K, n) and (K, m) tensors: position i of A (j of B) is in
    region k. K splits each sequence into K runs of consecutive positions,
    run k being floor(k·n/K) ≤ i < floor((k+1)·n/K); the lengths may be
    dynamic."""
    if isinstance(regions, int):
        return _equal_split(regions, length_a), _equal_split(regions, length_b)
    count = num_regions(regions)
    return tuple(ops.convert_to_tensor(_membership(side, count, regions)) for side in regions)


def _equal_split(count, length):
    k = ops.expand_dims(ops.arange(count, dtype="int32"), 1)
    i = ops.expand_dims(ops.arange(length, dtype="int32"), 0)
    length = ops.cast(length, "int32")
    return ops.logical_and(i >= (k * length) // count, i < ((k + 1) * length) // count)


def _membership(side, count, regions):
    member = np.zeros((count, len(side)), bool)
    for i, entry in enumerate(side):
        member[_indices(entry, regions), i] = True
    return member
