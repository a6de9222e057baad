"""Codebooks, shared by the quantizers of the bag-of-features family: the
checks of their codeword arguments, and k-means on sampled feature vectors."""

import numpy as np

from keras_relrec.ops.codeword_similarity import DISTANCES
from keras_relrec.utils import validation


def check_codeword_arguments(num_codewords, distance, initial_scale, epsilon):
    """`(num_codewords, distance, initial_scale, epsilon)` of a quantizer,
    checked: K, the distance and ε of `codeword_logits`, and the value the
    scales start at."""
    return (
        validation.check_positive_int("num_codewords", num_codewords),
        validation.check_choice("distance", distance, DISTANCES),
        validation.check_positive_float("initial_scale", initial_scale),
        validation.check_non_negative_float("epsilon", epsilon),
    )


def kmeans_codebook(data, num_codewords, sample_size=100_000, seed=None, mask_value=None,
                    n_init=4, features=None, groups=1):
    """k-means centres of feature vectors sampled from `data`.

    Uses scikit-learn's `KMeans` (extra `[kmeans]`).

    Args:
        data: A NumPy array (..., D), or a `tf.data.Dataset` of such
            batches or of `(features, ...)` tuples.
        num_codewords: The number of centres K.
        sample_size: At most this many vectors, drawn without replacement,
            go to k-means. Default 100,000.
        seed: Int seed of the sampling and of k-means; deterministic with one.
        mask_value: If given, vectors whose every entry equals it (padding)
            are left out, as `keras.layers.Masking` would.
        n_init: k-means restarts. Default 4.
        features: The vector size the caller expects, if it has one; a
            mismatch raises before k-means runs.
        groups: Each vector is `groups` vectors of D / `groups` side by
            side, clustered as vectors of their own (after the padding is
            left out). Default 1.

    Returns:
        float64 array (K, D / groups).
    """
    try:
        from sklearn.cluster import KMeans
    except ImportError as error:
        raise ImportError(
            "Codebook initialisation needs scikit-learn: install keras_relrec's `kmeans` "
            "extra (pip install -e '.[kmeans]' in a checkout)"
        ) from error
    sample_size = validation.check_positive_int("sample_size", sample_size)
    n_init = validation.check_positive_int("n_init", n_init)
    seed = validation.check_seed(seed)
    vectors = feature_vectors(data)
    if features is not None and vectors.shape[-1] != features:
        raise ValueError(
            f"Expected feature vectors of size {features}; received size {vectors.shape[-1]}."
        )
    if mask_value is not None:
        vectors = vectors[~np.all(vectors == mask_value, axis=-1)]
    if vectors.shape[-1] % groups:
        raise ValueError(
            f"Argument `groups` must divide the feature vectors' size: groups={groups} for vectors of size "
            f"{vectors.shape[-1]}. Give data whose features are {groups} groups of equal size."
        )
    vectors = vectors.reshape(-1, vectors.shape[-1] // groups)
    if len(vectors) > sample_size:
        rng = np.random.default_rng(seed)
        vectors = vectors[rng.choice(len(vectors), sample_size, replace=False)]
    if len(vectors) < num_codewords:
        raise ValueError(
            f"k-means needs at least num_codewords={num_codewords} feature vectors; "
            f"received {len(vectors)}."
        )
    kmeans = KMeans(num_codewords, n_init=n_init, random_state=seed)
    return kmeans.fit(vectors.astype(np.float64)).cluster_centers_


def feature_vectors(data):
    """(num_vectors, D) array of every feature vector in `data`."""
    if hasattr(data, "as_numpy_iterator"):  # a tf.data.Dataset
        batches = [
            np.asarray(element[0] if isinstance(element, tuple) else element)
            for element in data.as_numpy_iterator()
        ]
        array = np.concatenate([b.reshape(-1, b.shape[-1]) for b in batches])
    else:
        array = np.asarray(data)
    if array.ndim < 2:
        raise ValueError(
            f"Expected data of shape (..., features); received shape {array.shape}."
        )
    return array.reshape(-1, array.shape[-1])


def adapt_codebook(layer, data, input_shape, sample_size, seed, mask_value, n_init, groups=1):
    """Sets `layer.codebook` (K = `layer.num_codewords`) to the k-means
    centres of `data`'s vectors, or of their `groups` parts (see
    `kmeans_codebook`), building the layer first, for `input_shape(D)`, if
    it is not built yet."""
    centres = kmeans_codebook(
        data, layer.num_codewords, sample_size, seed, mask_value, n_init,
        features=layer.codebook.shape[-1] * groups if layer.built else None, groups=groups,
    )
    if not layer.built:
        layer.build(input_shape(centres.shape[-1] * groups))
    layer.codebook.assign(centres.astype(layer.codebook.dtype))
