"""2-D attention over one axis of a matrix, shared by `TwoDAttention` (the
bag-of-features family) and `TABL` (the bilinear family)."""

from keras import ops

from keras_relrec.ops.masking import masked_softmax


def fixed_diagonal(kernel):
    """W' = W with its diagonal set to 1/L, for a square (L, L) kernel."""
    length = kernel.shape[0]
    eye = ops.eye(length, dtype=kernel.dtype)
    return kernel * (1.0 - eye) + eye / length


def mix_along(s, kernel, axis):
    """S W' along `axis`: E[b, t, f] = Σ_r S[b, r, f] W'[r, t] for `axis=1`,
    E = S W' for `axis=2`, W' being W with its diagonal set to 1/L.

    `kernel` is W (L, L), or the pair (U, V) of (L, r) factors of
    W = 1/L + U Vᵀ (every entry 1/L plus a rank-r part); then
    E = (1/L) Σ_r S_r + (S U) Vᵀ − S ⊙ diag(U Vᵀ), without forming an
    L × L matrix.
    """
    if not isinstance(kernel, (tuple, list)):
        kernel = fixed_diagonal(kernel)
        if axis == 2:
            return ops.matmul(s, kernel)
        return ops.einsum("brf,rt->btf", s, kernel)
    left, right = kernel
    diagonal = ops.sum(left * right, axis=1)
    mean = ops.sum(s, axis=axis, keepdims=True) / left.shape[0]
    if axis == 2:
        return mean + ops.matmul(ops.matmul(s, left), ops.transpose(right)) - s * diagonal
    low_rank = ops.einsum("bkf,tk->btf", ops.einsum("brf,rk->bkf", s, left), right)
    return mean + low_rank - s * ops.expand_dims(diagonal, -1)


def two_d_attention_weights(s, kernel, axis, mask=None):
    """A = softmax(S W') along `axis` of every (rows, cols) matrix S.

    Args:
        s: (batch, rows, cols).
        kernel: (L, L), L the size of `axis`, or the (L, r) factors (U, V)
            of W = 1/L + U Vᵀ (see `mix_along`); the diagonal of W is
            replaced by 1/L here.
        axis: 1 (mix and normalise along the rows) or 2 (along the cols).
        mask: Optional boolean (batch, rows), only with `axis=1`: masked
            rows are zeroed before the mixing and get no weight.

    Returns:
        A, the shape of `s`.
    """
    if axis == 2:
        return ops.softmax(mix_along(s, kernel, axis), axis=-1)
    valid = None
    if mask is not None:
        valid = ops.expand_dims(ops.cast(mask, "bool"), -1)
        s = ops.where(valid, s, ops.zeros_like(s))
    logits = mix_along(s, kernel, axis)
    if valid is None:
        return ops.softmax(logits, axis=1)
    return masked_softmax(logits, valid, axis=1)


def two_d_attention(s, kernel, mix, axis, mask=None):
    """S̃ = mix·(S ⊙ A) + (1 − mix)·S, with A from `two_d_attention_weights`."""
    return mix * s * two_d_attention_weights(s, kernel, axis, mask) + (1.0 - mix) * s
