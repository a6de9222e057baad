"""The Nth-farthest relational reasoning task of Santoro et al. (2018).

Each example is a set of `num_objects` random vectors, shown one per time
step; the network must answer which vector is the n-th farthest from vector
m, where n and m are given in every row. A row is

    [vector (num_features), one-hot id (num_objects),
     one-hot n (num_objects), one-hot m (num_objects)]

and the rows of an example come in a random order, so the answer (an id)
must be read from the rows. The paper's configuration is 8 vectors of 16
dimensions drawn from U(−1, 1) (rows 40 wide); Sonnet's example uses a
reduced 4 × 4 one.

Which way n counts: the reference generator sorts distances in *ascending*
order and takes index n, so n = 0 is vector m itself and n = num_objects − 1
the farthest — despite the name. `count_from="nearest"` (default) follows
the reference; `count_from="farthest"` makes n = 0 the farthest vector.
"""

import numpy as np

from keras_relrec.utils import validation

PAPER = {"num_objects": 8, "num_features": 16}
REDUCED = {"num_objects": 4, "num_features": 4}


def nth_farthest(num_examples, num_objects=8, num_features=16, seed=0, count_from="nearest"):
    """Generates examples; deterministic for a given seed.

    `seed` is None, a non-negative int, a sequence of them, or a NumPy
    `SeedSequence`, `BitGenerator` or `Generator` (what
    `numpy.random.default_rng` takes).

    Returns:
        `(x, y)`: x float32 (num_examples, num_objects, num_features +
        3·num_objects), y int32 (num_examples,) the id of the answer.
    """
    if count_from not in ("nearest", "farthest"):
        raise ValueError(
            "Argument `count_from` must be 'nearest' or 'farthest'; received "
            f"count_from={count_from!r}."
        )
    num_examples = validation.check_positive_int("num_examples", num_examples)
    num_objects = validation.check_positive_int("num_objects", num_objects)
    num_features = validation.check_positive_int("num_features", num_features)
    rng = np.random.default_rng(validation.check_numpy_seed(seed))
    vectors = rng.uniform(-1.0, 1.0, size=(num_examples, num_objects, num_features))
    n = rng.integers(0, num_objects, num_examples)
    m = rng.integers(0, num_objects, num_examples)
    rows = np.arange(num_examples)
    distances = np.linalg.norm(vectors - vectors[rows, m][:, None], axis=-1)
    order = np.argsort(distances, axis=-1, kind="stable")
    if count_from == "farthest":
        order = order[:, ::-1]
    y = order[rows, n].astype(np.int32)

    eye = np.eye(num_objects)
    ids = np.broadcast_to(eye, (num_examples, num_objects, num_objects))
    n_hot = np.broadcast_to(eye[n][:, None], (num_examples, num_objects, num_objects))
    m_hot = np.broadcast_to(eye[m][:, None], (num_examples, num_objects, num_objects))
    x = np.concatenate([vectors, ids, n_hot, m_hot], axis=-1)
    shuffle = rng.permuted(np.broadcast_to(np.arange(num_objects), (num_examples, num_objects)), axis=1)
    x = np.take_along_axis(x, shuffle[..., None], axis=1)
    return x.astype(np.float32), y

