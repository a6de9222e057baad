"""The equations of Transformer-XL and its segment cache written out in
float64 NumPy, one example at a time: every score from its distance (no
shift trick, no gather), the sinusoid of each distance, the masks."""

import numpy as np


def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def sinusoid(distance, width, clamp_len=None):
    d = min(distance, clamp_len) if clamp_len is not None else distance
    f = 1.0 / 10000 ** (np.arange(0, width, 2) / width)
    return np.concatenate([np.sin(d * f), np.cos(d * f)])


def attention_np(layer, h, memory, valid, memory_valid, u=None, v=None, offsets=None, scale=None):
    """One example: h (L, d), memory (M, d), valid (L,), memory_valid (M,).

    offsets (M,): memory slot j is offsets[j] + i from query i (default:
    contiguous, M − j); scale (M,): a factor on the memory's values."""
    w = {x.name: np.asarray(x.numpy(), "float64") for x in layer.weights}
    H, DH = layer.num_heads, layer.head_size
    D = h.shape[-1]
    u = w["content_bias"] if u is None else u
    v = w["position_bias"] if v is None else v
    h = np.where(valid[:, None], h, 0.0)
    memory = np.where(memory_valid[:, None], memory, 0.0)
    M, L = len(memory), len(h)
    context = np.concatenate([memory, h])
    key_valid = np.concatenate([memory_valid, valid])
    x = layer_norm(context, w["gamma"], w["beta"]) if layer.pre_lnorm else context
    n = H * DH
    q = (x[M:] @ w["query_kernel"]).reshape(L, H, DH)
    kv = x @ w["key_value_kernel"]
    k, val = kv[:, :n].reshape(-1, H, DH), kv[:, n:].reshape(-1, H, DH)
    if scale is not None:
        val[:M] *= scale[:, None, None]
    offsets = M - np.arange(M) if offsets is None else offsets
    heads = np.zeros((L, H, DH))
    for i in range(L):
        for head in range(H):
            scores = np.full(M + L, -np.inf)
            for j in range(M + L):
                distance = offsets[j] + i if j < M else i - (j - M)
                visible = distance >= 0 and key_valid[j]
                if layer.same_length:
                    visible = visible and distance < M
                if visible:
                    r = (sinusoid(distance, D, layer.clamp_len) @ w["position_kernel"]).reshape(H, DH)[head]
                    scores[j] = ((q[i, head] + u[head]) @ k[j, head] + (q[i, head] + v[head]) @ r) / np.sqrt(DH)
            if np.isfinite(scores).any():  # a padded query may see no key
                a = np.exp(scores - scores.max())
                heads[i, head] = a / a.sum() @ val[:, head]
    y = h + heads.reshape(L, n) @ w["output_kernel"]
    if not layer.pre_lnorm:
        y = layer_norm(y, w["gamma"], w["beta"])
    return np.where(valid[:, None], y, 0.0)


def block_np(block, h, memory, valid, memory_valid, u=None, v=None, offsets=None, scale=None):
    a = attention_np(block.attention, h, memory, valid, memory_valid, u, v, offsets, scale)
    w = {"/".join(x.path.split("/")[-2:]): np.asarray(x.numpy(), "float64") for x in block.weights}
    pre = block.pre_lnorm
    x = layer_norm(a, w["feed_forward_norm/gamma"], w["feed_forward_norm/beta"]) if pre else a
    ff = np.maximum(x @ w["intermediate/kernel"] + w["intermediate/bias"], 0)
    ff = ff @ w["feed_forward_output/kernel"] + w["feed_forward_output/bias"]
    y = a + ff
    if not pre:
        y = layer_norm(y, w["feed_forward_norm/gamma"], w["feed_forward_norm/beta"])
    return np.where(valid[:, None], y, 0.0)


def backbone_np(model, x, valid):
    """The paper's segment recurrence from empty memories (every slot
    invalid): the outputs."""
    M, D, batch = model.mem_len, model.hidden_dim, len(x)
    empty = [np.zeros((batch, M, D)) for _ in model.blocks] + [np.zeros((batch, M))] if M else []
    return backbone_call_np(model, x, valid, empty)[0]


def backbone_call_np(model, x, valid, states):
    """One call of the paper's segment recurrence, example by example: x
    cut into segments of L from its start, the last one shorter when L does
    not divide the length (a segment of its own, as HuggingFace's TransfoXL
    runs each call), from the states [memory_0, …, memory_mask] (none
    without memory); each layer's memory is the last M positions of [its
    memory; its input]. A segment with no valid position leaves the
    memories as they were. Returns (outputs, the states after the call)."""
    L, M, D = model.segment_len, model.mem_len, model.hidden_dim
    layers = len(model.blocks)
    memories = np.array(states[:layers], "float64") if M else np.zeros((layers, len(x), 0, D))
    memory_valid = np.asarray(states[layers]) > 0 if M else np.zeros((len(x), 0), bool)
    outputs = np.zeros(x.shape[:2] + (D,))
    for b in range(len(x)):
        for start in range(0, x.shape[1], L):
            h, seg_valid = x[b, start : start + L], valid[b, start : start + L]
            h = np.where(seg_valid[:, None], h, 0.0)
            new_memories = []
            for n, block in enumerate(model.blocks):
                u, v = tied_biases(model)
                new_memories.append(np.concatenate([memories[n, b], h])[len(seg_valid) :])
                h = block_np(block, h, memories[n, b], seg_valid, memory_valid[b], u, v)
            outputs[b, start : start + L] = h
            if seg_valid.any():
                memories[:, b] = new_memories
                memory_valid[b] = np.concatenate([memory_valid[b], seg_valid])[len(seg_valid) :]
    return outputs, [*memories, memory_valid.astype("float64")] if M else []


def tied_biases(model):
    if not model.tie_relative_biases:
        return None, None
    return tuple(np.asarray(w.numpy(), "float64") for w in (model.content_bias, model.position_bias))


def random_weights(layer, seed=0):
    rng = np.random.default_rng(seed)
    layer.set_weights([rng.normal(scale=0.4, size=w.shape) + (1.0 if "gamma" in w.path else 0.0)
                       for w in layer.weights])


def summary_np(summary, h, valid):
    """SegmentSummary of one segment h (L, d) with valid (L,)."""
    w = [np.asarray(x.numpy(), "float64") for x in summary.weights]
    h = np.where(valid[:, None], h, 0.0)
    if summary.kind == "bilstm":
        # Keras' weight order: forward then backward, each kernel,
        # recurrent kernel, bias; gates i, f, c, o.
        return np.concatenate([lstm_last_np(h[::-1], valid[::-1], *w[3:]) if backward
                               else lstm_last_np(h, valid, *w[:3]) for backward in (False, True)])
    for kernel, bias in zip(w[::2], w[1::2]):
        h = np.maximum(h @ kernel + bias, 0.0)
    return h[valid].mean(0) if valid.any() else np.zeros(h.shape[-1])


def lstm_last_np(x, valid, kernel, recurrent_kernel, bias):
    """A Keras LSTM's last output; masked steps keep the states."""
    units = recurrent_kernel.shape[0]
    h, c = np.zeros(units), np.zeros(units)

    def sigmoid(z):
        return 1 / (1 + np.exp(-z))

    for x_t, valid_t in zip(x, valid):
        z = x_t @ kernel + h @ recurrent_kernel + bias
        i, f, g, o = (z[n * units : (n + 1) * units] for n in range(4))
        c_new = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h_new = sigmoid(o) * np.tanh(c_new)
        if valid_t:
            h, c = h_new, c_new
    return h


def cache_np(model, x, valid):
    """The segment cache, example by example: recall by the query's summary
    (top k of the softmax over the filled slots, α unrenormalised), each
    recalled slot at its true distance, FIFO renewal; a segment with no
    valid position leaves the cache as it was. Returns the outputs and, per
    segment, the recalled slots of each example."""
    L, N, k, D = model.segment_len, model.num_slots, model.top_k, model.hidden_dim
    u, v = tied_biases(model)
    steps = x.shape[1]
    padding = -steps % L  # the last segment is padded
    x = np.pad(x, [(0, 0), (0, padding), (0, 0)])
    valid = np.pad(valid, [(0, 0), (0, padding)])
    outputs = np.zeros(x.shape[:2] + (D,))
    recalled = []
    for b in range(len(x)):
        keys = np.zeros((N, model.summary_dim))
        values = [np.zeros((N, L, D)) for _ in model.blocks]
        slot_valid = np.zeros((N, L), bool)
        previous = np.zeros((L, D))
        recalled.append([])
        for start in range(0, x.shape[1], L):
            h, seg_valid = x[b, start : start + L], valid[b, start : start + L]
            h = np.where(seg_valid[:, None], h, 0.0)
            if model.query == "causal":
                q = summary_np(model.summary, previous, slot_valid[-1])
            elif model.query == "standard":
                q = summary_np(model.summary, h, seg_valid)
            else:
                alone = h
                for block in model.blocks:
                    alone = block_np(block, alone, np.zeros((0, D)), seg_valid, np.zeros(0, bool), u, v)
                q = summary_np(model.summary, alone, seg_valid)
            filled = slot_valid.any(1)
            logits = keys @ q
            alpha = np.zeros(N)
            if filled.any():
                e = np.exp(logits[filled] - logits[filled].max())
                alpha[filled] = e / e.sum()
            # Filled slots first, by relevance; the rest are masked anyway.
            order = sorted(range(N), key=lambda s: (not filled[s], -logits[s]))[:k]
            recalled[b].append([s for s in order if filled[s]])
            memory_valid = np.concatenate([slot_valid[s] for s in order])
            offsets = np.concatenate([(N - s) * L - np.arange(L) for s in order])
            weight = alpha if model.relevance_weighting else np.ones(N)
            scale = np.repeat([weight[s] for s in order], L)
            inputs = []
            for n, block in enumerate(model.blocks):
                inputs.append(h)
                memory = np.concatenate([values[n][s] for s in order])
                h = block_np(block, h, memory, seg_valid, memory_valid, u, v, offsets, scale)
            outputs[b, start : start + L] = h
            if seg_valid.any():
                keys = np.concatenate([keys[1:], summary_np(model.summary, h, seg_valid)[None]])
                values = [np.concatenate([value[1:], entry[None]]) for value, entry in zip(values, inputs)]
                slot_valid = np.concatenate([slot_valid[1:], seg_valid[None]])
                previous = h
    return outputs[:, :steps], recalled
