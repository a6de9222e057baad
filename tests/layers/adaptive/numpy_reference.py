"""Adaptive input embeddings and the adaptive softmax written out in float64
NumPy, token by token from the published equations (Baevski and Auli; Grave
et al. in Transformer-XL's projected form)."""

import numpy as np


def clusters_np(vocabulary, cutoffs):
    edges = [0, *cutoffs, vocabulary]
    return list(zip(edges[:-1], edges[1:]))


def embedding_np(tables, projections, cutoffs, vocabulary, width, ids, div_val):
    """e(x) = sqrt(d) · E_i[x − l_i] K_i for each id; one table (and one
    projection or none) with div_val = 1."""
    out = np.zeros(ids.shape + (width,))
    for index in np.ndindex(ids.shape):
        token = ids[index]
        if div_val == 1:
            row = tables[0][token]
            vector = row if projections[0] is None else row @ projections[0]
        else:
            i = next(i for i, (left, right) in enumerate(clusters_np(vocabulary, cutoffs)) if left <= token < right)
            vector = tables[i][token - clusters_np(vocabulary, cutoffs)[i][0]] @ projections[i]
        out[index] = np.sqrt(width) * vector
    return out


def log_softmax_np(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def log_probs_np(h, tables, biases, projections, cluster_kernel, cluster_bias, cutoffs, vocabulary):
    """log p(t | h) for every token of the vocabulary at one position: the
    head over the shortlist and the clusters, then each cluster's softmax.
    `tables`, `biases`, `projections`: per cluster (a projection (d, d_i)
    or None)."""
    def logits(i, table, bias):
        x = h if projections[i] is None else h @ projections[i]
        return table @ x + bias

    bounds = clusters_np(vocabulary, cutoffs)
    if len(bounds) == 1:
        return log_softmax_np(logits(0, tables[0], biases[0]))
    head = log_softmax_np(logits(0, np.concatenate([tables[0], cluster_kernel]),
                                 np.concatenate([biases[0], cluster_bias])))
    out = np.empty(vocabulary)
    shortlist = bounds[0][1]
    out[:shortlist] = head[:shortlist]
    for i in range(1, len(bounds)):
        left, right = bounds[i]
        out[left:right] = head[shortlist + i - 1] + log_softmax_np(logits(i, tables[i], biases[i]))
    return out
