"""Synthetic limit-order-book windows shaped like FI-2010's input.

Each example is `window` snapshots of a `levels`-deep book, one row per
step with, for each level i = 1..levels in turn, ask price, ask volume, bid
price, bid volume — the order of FI-2010's first 40 rows (see `fi2010`). The
label is the mid-price move after the window: 0 up, 1 stationary, 2 down,
drawn uniformly, so the classes are balanced in expectation.

How the book is made, for an example with label direction s = +1 (up),
0 (stationary) or −1 (down), tick = 0.01 and L = max(1, window // 2)
"signal steps" t = window − L .. window − 1:

    mid     m_0 = 100 + N(0, 1); m_t = m_{t−1} + tick · (ε_t + signal · s ·
            [t is a signal step]), ε_t ~ N(0, 1): a random walk that
            drifts toward the coming move over the last L steps
    spread  tick · (1, 2 or 3, uniformly), drawn per step
    prices  ask_i = m_t + spread / 2 + (i − 1) · tick,
            bid_i = m_t − spread / 2 − (i − 1) · tick
    volumes log-normal, log v = log 1000 + 0.5 · N(0, 1), one draw per side,
            level and step; on signal steps each bid volume is multiplied by
            exp(+0.125 · signal · s) and each ask volume by
            exp(−0.125 · signal · s), so the log bid/ask imbalance of every
            level leans 0.25 · signal toward the move

With signal = 0 the windows do not depend on the label (chance accuracy at
best); larger signals make the task easier.

Normalisation, in the spirit of FI-2010's `ZScore` files (which use the
previous day's statistics, not the window's own): prices become
(p − m_0) / tick, ticks from the window's first mid price (so the first mid
is 0 and the ordering ask_levels > … > ask_1 > bid_1 > … > bid_levels holds
at every step); volumes become (log v − log 1000) / 0.5, log volumes
standardised with the generator's own mean and spread (the signal's lean
stays in them).
"""

import numbers

import numpy as np

from keras_relrec.utils import validation

TICK = 0.01
BASE_PRICE = 100.0
LOG_VOLUME_SD = 0.5
IMBALANCE_LEAN = 0.25  # log bid/ask imbalance shift per unit of signal


def synthetic_lob(num_examples, window=10, levels=10, signal=1.0, seed=0):
    """Generates labelled order-book windows; deterministic for a given seed.

    Args:
        num_examples: Positive int.
        window: Positive int, steps per example.
        levels: Positive int, book depth per side.
        signal: Float ≥ 0, how strongly the window foretells the label
            (drift in ticks per signal step, and a proportional volume
            imbalance; see the module docstring). 0 makes it unlearnable.
        seed: None, a non-negative int or a sequence of them (what
            `numpy.random.default_rng` takes).

    Returns:
        `(x, y)`: x float32 (num_examples, window, 4 · levels), y int32
        (num_examples,) with 0 up, 1 stationary, 2 down.
    """
    num_examples = validation.check_positive_int("num_examples", num_examples)
    window = validation.check_positive_int("window", window)
    levels = validation.check_positive_int("levels", levels)
    if (not isinstance(signal, numbers.Real) or isinstance(signal, bool)
            or not np.isfinite(signal) or signal < 0):
        raise ValueError(f"Argument `signal` must be a finite number ≥ 0; received signal={signal!r}.")
    rng = np.random.default_rng(validation.check_numpy_seed(seed))
    y = rng.integers(0, 3, num_examples).astype(np.int32)
    direction = (1 - y).astype(np.float64)[:, None]  # up +1, stationary 0, down −1

    num_signal_steps = max(1, window // 2)
    on_signal = (np.arange(window) >= window - num_signal_steps).astype(np.float64)  # (window,)

    # Mid in ticks from the window's first mid; m_0's level 100 + N(0, 1)
    # is drawn for realism but cancels in the normalisation.
    start = BASE_PRICE + rng.normal(size=(num_examples, 1))
    steps = rng.normal(size=(num_examples, window)) + signal * direction * on_signal
    steps[:, 0] = 0.0  # m_0 itself
    mid = start + TICK * np.cumsum(steps, axis=1)
    half_spread = TICK * rng.integers(1, 4, size=(num_examples, window)) / 2
    depth = TICK * np.arange(levels)
    ask = mid[..., None] + half_spread[..., None] + depth
    bid = mid[..., None] - half_spread[..., None] - depth
    ask = (ask - start[..., None]) / TICK
    bid = (bid - start[..., None]) / TICK

    # Standardised log volumes, (log v − log 1000) / LOG_VOLUME_SD,
    # drawn directly: N(0, 1) plus the lean in standard-deviation units.
    lean = (IMBALANCE_LEAN / 2 / LOG_VOLUME_SD) * signal * direction * on_signal
    noise = rng.standard_normal(size=(2, num_examples, window, levels))
    ask_volume = noise[0] - lean[..., None]
    bid_volume = noise[1] + lean[..., None]

    x = np.stack([ask, ask_volume, bid, bid_volume], axis=-1)  # (n, window, levels, 4)
    return x.reshape(num_examples, window, 4 * levels).astype(np.float32), y
