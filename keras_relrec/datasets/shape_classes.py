"""Series whose class is their shape, at any amplitude and length: a
generator for the cases where ready-made classifiers are known to struggle.

Each class has a prototype, a smooth random curve on [0, 1] (a sum of
`bumps` Gaussian bumps of random centre, width and sign). An example of
class c is its prototype

    s(t) = a · (p_c(w(t)) + σ · ε_t) + a · b        t = 0, …, n − 1

sampled at n steps (a length drawn from `lengths`), through a random
monotone time warp w (a shift and a stretch of up to `warp` of the
length), with white noise ε of standard deviation σ = `noise`, an
amplitude a drawn log-uniformly from `amplitudes`, and an offset b ~ N(0, 1)
in units of a. The amplitude and offset say nothing of the class, so a
classifier must read the shape whatever the scale.

Two settings reproduce what hurt the builders on public sets:

- `amplitudes=(1e-5, 1e2)`, `lengths=(100, 300)`: amplitudes spanning seven
  decades, lengths that differ (padded at the end);
- `num_classes=24`, `train_per_class=2`, `lengths=(400, 400)`: many
  classes, two long training series each.
"""

import numpy as np

from keras_relrec.utils import validation


def shape_classes(num_classes=6, train_per_class=20, test_per_class=20, lengths=(100, 300),
                  amplitudes=(1.0, 1.0), noise=0.1, warp=0.1, bumps=4, seed=0, pad_value=0.0):
    """Both splits of a generated set; deterministic for a given seed.

    Args:
        num_classes: K, the classes (each its own prototype).
        train_per_class, test_per_class: Examples of each class per split.
        lengths: (shortest, longest) steps; each example's length is
            uniform between them.
        amplitudes: (smallest, largest) a, drawn log-uniformly.
        noise: σ, the noise's standard deviation relative to a.
        warp: The largest shift and stretch of the time axis, a share of
            the length in [0, 0.5).
        bumps: Gaussian bumps per prototype.
        seed: Seed of the prototypes and the examples (what
            `numpy.random.default_rng` takes).
        pad_value: What the steps after a series' end hold (the builders'
            `mask_value`); it must differ from every real step, which the
            generator checks.

    Returns:
        `((x_train, y_train, lengths_train), (x_test, y_test, lengths_test))`:
        `x` float32 (N, longest, 1) padded at the end, `y` int32 class ids
        0..K−1 (examples in a random order), `lengths` int32.

    Example:

    >>> from keras_relrec.datasets import shape_classes
    >>> (x, y, n), _ = shape_classes(num_classes=3, train_per_class=2, test_per_class=1,
    ...                              lengths=(20, 30), amplitudes=(1e-3, 1e2))
    >>> x.shape, sorted(y.tolist())
    ((6, 30, 1), [0, 0, 1, 1, 2, 2])
    """
    num_classes = validation.check_positive_int("num_classes", num_classes)
    train_per_class = validation.check_positive_int("train_per_class", train_per_class)
    test_per_class = validation.check_positive_int("test_per_class", test_per_class)
    shortest, longest = _pair("lengths", lengths, int)
    if shortest < 2 or longest < shortest:
        raise ValueError(f"Argument `lengths` must be (shortest, longest) with 2 ≤ shortest ≤ longest; received "
                         f"lengths={lengths!r}.")
    smallest, largest = _pair("amplitudes", amplitudes, float)
    if not 0 < smallest <= largest < np.inf:
        raise ValueError(f"Argument `amplitudes` must be (smallest, largest) with 0 < smallest ≤ largest, finite; "
                         f"received amplitudes={amplitudes!r}.")
    noise = validation.check_non_negative_float("noise", noise)
    warp = validation.check_warp("warp", warp)
    bumps = validation.check_positive_int("bumps", bumps)
    rng = np.random.default_rng(validation.check_numpy_seed(seed))
    centres = rng.uniform(0.0, 1.0, (num_classes, bumps))
    widths = rng.uniform(0.03, 0.15, (num_classes, bumps))
    heights = rng.uniform(0.5, 1.5, (num_classes, bumps)) * rng.choice([-1.0, 1.0], (num_classes, bumps))

    def split(per_class):
        y = rng.permutation(np.repeat(np.arange(num_classes, dtype=np.int32), per_class))
        n = rng.integers(shortest, longest + 1, len(y)).astype(np.int32)
        x = np.full((len(y), longest, 1), pad_value, np.float32)
        for k, (label, steps) in enumerate(zip(y, n)):
            shift, stretch = rng.uniform(-warp, warp, 2)
            u = np.clip(shift + (1 + stretch) * np.linspace(0.0, 1.0, steps), 0.0, 1.0)
            shape = np.sum(heights[label] * np.exp(-0.5 * ((u[:, None] - centres[label]) / widths[label]) ** 2), -1)
            amplitude = np.exp(rng.uniform(np.log(smallest), np.log(largest)))
            x[k, :steps, 0] = amplitude * (shape + noise * rng.standard_normal(steps) + rng.standard_normal())
            if np.any(x[k, :steps, 0] == pad_value):
                raise ValueError(f"Argument `pad_value` must differ from every real step; pad_value={pad_value!r} "
                                 "occurs in a generated series: choose another.")
        return x, y, n

    return split(train_per_class), split(test_per_class)


def _pair(name, value, kind):
    try:
        low, high = (kind(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"Argument `{name}` must be a pair (low, high); received {name}={value!r}.") from None
    return low, high
