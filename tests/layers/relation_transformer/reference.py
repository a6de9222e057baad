"""The DRRT's equations (Belanger Nzakimuena 2022) in float64 NumPy, one
example at a time, written from the note (loops over positions and pairs), for the family's tests."""

import keras
import numpy as np

# float64 layers compute in float64, except on JAX without x64 (its
# default), where they compute in float32.
ATOL = 1e-10 if keras.backend.standardize_dtype(keras.ops.zeros((), "float64").dtype) == "float64" else 1e-5


def softmax_over(logits, valid, axis):
    """Softmax along `axis` over the valid entries; zeros elsewhere and for
    a slice with none."""
    shifted = np.where(valid, logits, -np.inf)
    top = np.max(shifted, axis=axis, keepdims=True)
    exp = np.where(valid, np.exp(shifted - np.where(np.isfinite(top), top, 0.0)), 0.0)
    total = exp.sum(axis=axis, keepdims=True)
    return exp / np.where(total > 0, total, 1.0)


def pairwise(a, b, weights, form):
    """Ψ_ij (n, m) from the pairwise function's weights (eq. 5 / 7)."""
    psi = np.zeros((len(a), len(b)))
    for i in range(len(a)):
        for j in range(len(b)):
            if form == "concat":
                # W_g [W_a' a_i ; W_b' b_j], the concatenation itself.
                joined = np.concatenate([a[i] @ weights["kernel_a"], b[j] @ weights["kernel_b"]])
                psi[i, j] = joined @ np.concatenate([weights["score_a"], weights["score_b"]])
            elif form == "concat_relu":
                # A hidden layer on [a_i; b_j], then a score.
                kernel = np.concatenate([weights["kernel_a"], weights["kernel_b"]], axis=0)
                hidden = np.maximum(np.concatenate([a[i], b[j]]) @ kernel + weights["hidden_bias"], 0.0)
                psi[i, j] = hidden @ weights["score"]
            else:
                psi[i, j] = (a[i] @ weights["kernel_a"]) @ (b[j] @ weights["kernel_b"])
    return psi


def global_maps(a, b, weights, form, mask_a, mask_b):
    """α^g (softmax over j) and β^g (over i), eqs. (3)–(4)."""
    psi = pairwise(a, b, weights, form)
    valid = mask_a[:, None] & mask_b[None, :]
    return (softmax_over(psi / np.sqrt(b.shape[1]), valid, axis=1),
            softmax_over(psi / np.sqrt(a.shape[1]), valid, axis=0))


def region_matrix(regions, n, m):
    """R (K, n, m), eq. (8), from an int K (equal split) or per-position lists."""
    if isinstance(regions, int):
        sides = [[[k for k in range(regions) if (k * length) // regions <= i < ((k + 1) * length) // regions]
                  for i in range(length)] for length in (n, m)]
        count = regions
    else:
        sides = [[[e] if isinstance(e, int) else list(e) for e in side] for side in regions]
        sides = [[[k for k in entry if k >= 0] for entry in side] for side in sides]
        count = 1 + max(k for side in sides for entry in side for k in entry)
    r = np.zeros((count, n, m), bool)
    for k in range(count):
        for i in range(n):
            for j in range(m):
                r[k, i, j] = k in sides[0][i] and k in sides[1][j]
    return r


def regional_maps(a, b, weights, form, regions, mask_a, mask_b):
    """α^{r(k)} and β^{r(k)} (K, n, m), eqs. (6)–(9): softmax over region
    k's pairs, divided by C_r."""
    psi = pairwise(a, b, weights, form)
    r = region_matrix(regions, len(a), len(b))
    valid = r & mask_a[None, :, None] & mask_b[None, None, :]
    total = r.sum()
    alpha = np.stack([softmax_over(psi, v, axis=1) for v in valid]) / (total / np.sqrt(b.shape[1]))
    beta = np.stack([softmax_over(psi, v, axis=0) for v in valid]) / (total / np.sqrt(a.shape[1]))
    return alpha, beta, r


def local_rnn(x, mask, window, kernel, recurrent, bias):
    """A tanh RNN over the `window` most recent valid rows at each valid
    position, from the zero state, zeros before the start (eq. 1); padded
    positions give zeros."""
    valid = np.flatnonzero(mask)
    rows = x[valid]
    out = np.zeros((len(x), kernel.shape[1]))
    for p, t in enumerate(valid):
        h = np.zeros(kernel.shape[1])
        for q in range(p - window + 1, p + 1):
            step = rows[q] if q >= 0 else np.zeros(x.shape[1])
            h = np.tanh(step @ kernel + h @ recurrent + bias)
        out[t] = h
    return out


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def transforms(alpha, beta, values_a, values_b, pairs):
    """Σ_σ T^σ_{b'→a'_i} = Σ_σ Σ_j α'^σ_ij W_b~ b'_j and Σ_σ T^σ_{a'→b'_j}
    = Σ_σ Σ_i β'^σ_ij W_a~ a'_i, eqs. (10)–(11), for maps (σ, n, m) and
    values_a = A' W_a~, values_b = B' W_b~. The sums run over `pairs`
    (σ, n, m): every valid pair, as the equations are written, or region
    k's alone, the confined form."""
    t_ab, t_ba = np.zeros((len(values_a), values_b.shape[1])), np.zeros((len(values_b), values_a.shape[1]))
    for s, i, j in zip(*np.nonzero(pairs)):
        t_ab[i] += alpha[s, i, j] * values_b[j]
        t_ba[j] += beta[s, i, j] * values_a[i]
    return t_ab, t_ba
