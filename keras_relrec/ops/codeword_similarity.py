"""Scaled distances of feature vectors to codewords (neural bag-of-features)."""

from keras import ops

from keras_relrec.ops import roots

DISTANCES = ("l2", "squared_l2")


def codeword_logits(x, codebook, scale, distance="l2", epsilon=1e-12):
    """−‖w_k ⊙ (x − v_k)‖ (or its square) for every codeword k.

    The membership of x in codeword k is `softmax_k` of these logits.

    Args:
        x: (..., D) feature vectors.
        codebook: (K, D) codewords v_k.
        scale: (K, D) per-dimension scales w_k, or (K, 1) one per codeword.
        distance: `"l2"`, ‖·‖₂ (Passalis and Tefas, "Neural
            Bag-of-Features Learning", Pattern Recognition 64, 2017, as the
            lecture "Sequence processing" of the course Advanced Deep
            Learning formulates it), or `"squared_l2"`, ‖·‖₂² (the Gaussian
            membership of the authors' later code).
        epsilon: Added under the square root, so the gradient is finite
            where x equals a codeword.

    Returns:
        (..., K) logits, in float32 or wider (the caller casts).

    The squared distance is expanded into matrix products, so memory grows
    with (..., K), not (..., K, D). Both x and the codebook are first
    centred on the codebook's mean (distances do not change), which removes
    an offset they share: inputs far from the origin, such as prices, would
    otherwise lose their digits to cancellation in ‖x‖² − 2 x·v + ‖v‖².
    What remains is a relative error of about float32's 1e-7 times
    (spread of the codebook / distance)², so a distance that is tiny next to
    the codebook's spread is inexact (normalise such inputs); what
    cancellation leaves below zero is clipped to zero. In float64 the
    distance to the nearest codeword, the one that can be tiny, is then
    computed again from the differences x − v_k, so float64 results keep
    float64's precision at and near the nearest codeword (a second codeword
    about as near keeps the expanded form's rounding).
    """
    # Half precision cannot hold squared distances; integers are features too.
    dtype = ops.dtype(x)
    if dtype not in ("float32", "float64"):
        dtype = "float32"
    x = ops.cast(x, dtype)
    codebook, scale = ops.cast(codebook, dtype), ops.cast(scale, dtype)
    centre = ops.mean(codebook, axis=0)
    x = x - centre
    codebook = codebook - centre
    weights = ops.square(scale) * ops.ones_like(codebook)  # (K, D) either way
    squared = (
        ops.matmul(ops.square(x), ops.transpose(weights))
        - 2.0 * ops.matmul(x, ops.transpose(weights * codebook))
        + ops.sum(weights * ops.square(codebook), axis=-1)
    )
    squared = ops.maximum(squared, 0.0)
    if dtype == "float64":
        # float32 keeps the expanded form alone, as documented (and the
        # graph its exports run); float64 is held to float64's precision.
        squared = _nearest_from_differences(x, codebook, weights, squared)
    if distance == "squared_l2":
        return -squared
    return -roots.sqrt(squared + epsilon, positive=epsilon > 0)


def _nearest_from_differences(x, codebook, weights, squared):
    """`squared` (..., K) with the entry of each x's nearest codeword
    replaced by Σ_d w_d (x_d − v_d)², which has no cancellation: at a
    codeword the expanded form leaves a rounding of the spread, which the
    square root's slope at ε (1 / (2 √ε)) magnifies. Memory (..., D), as x."""
    nearest = ops.argmin(squared, axis=-1)
    differences = x - ops.take(codebook, nearest, axis=0)
    exact = ops.sum(ops.take(weights, nearest, axis=0) * ops.square(differences), axis=-1)
    is_nearest = ops.expand_dims(nearest, -1) == ops.arange(codebook.shape[0], dtype=nearest.dtype)
    return ops.where(is_nearest, ops.expand_dims(exact, -1), squared)
