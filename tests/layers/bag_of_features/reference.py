"""NumPy references of the bag-of-features equations (float64), for the
layers' tests and the classifiers'."""

import numpy as np


def softmax(z, axis=-1):
    z = z - z.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def memberships(x, codebook, scales, distance, epsilon=1e-12):
    """φ_nk = softmax_k(−‖w_k ⊙ (x_n − v_k)‖) by explicit differences."""
    diff = (x[..., None, :] - codebook) * scales  # (..., K, D)
    squared = (diff**2).sum(-1)
    d = squared if distance == "squared_l2" else np.sqrt(squared + epsilon)
    return softmax(-d)


def recurrent_bof(x, s0, codebook, scales, kernel, recurrent, bias, quantizer):
    """The documented recurrence, step by step, from state s0."""
    k = codebook.shape[0]
    s, outputs = s0, []
    for t in range(x.shape[1]):
        xt = x[:, t]
        a = -np.sqrt((((xt[:, None, :] - codebook) * scales) ** 2).sum(-1) + 1e-12)
        gates = sigmoid(xt @ kernel + s @ recurrent + bias)
        r, z = gates[:, :k], gates[:, k:]
        u = softmax(a + (r * s) @ quantizer)
        s = (1 - z) * s + z * u
        outputs.append(s)
    return np.stack(outputs, 1)
