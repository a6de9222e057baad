"""The segment cache against its equations in float64 NumPy (in float32 and
under the float64 policy, tests/layers/float64.py), its reduction
to Transformer-XL, causality of the causal query (and the leak of the
design note's), where gradients flow, empty slots, and streaming by segments.

The tests written with `keras.ops` that tests/layers/conftest.py lists
run again on JAX in make test-slow (`jax_slow`)."""


import keras
import numpy as np
import pytest
from keras import ops

from keras_relrec.layers import SegmentCacheTransformer
from keras_relrec.layers import SegmentSummary
from keras_relrec.layers import TransformerXL
from tests.export.saved_model_stream import stream_saved_model
from tests.layers.transformer_xl.numpy_reference import cache_np
from tests.layers.transformer_xl.numpy_reference import random_weights
from tests.layers.transformer_xl.numpy_reference import summary_np

ATOL = 1e-5
H, DH, D, DI, L, N = 2, 3, 6, 10, 3, 3
BACKBONE = {"num_layers": 2, "num_heads": H, "head_size": DH, "hidden_dim": D, "intermediate_dim": DI,
            "segment_len": L}


def make_cache(**kwargs):
    layer = SegmentCacheTransformer(**{**BACKBONE, "num_slots": N, "top_k": 2, **kwargs})
    layer(np.zeros((1, L, D), "float32"))
    random_weights(layer, 6)
    return layer


def masked_input(seed, batch=3, segments=7):
    """Segments beyond N (evictions), one all padding, single padded steps."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, segments * L - 1, D))
    valid = np.ones(x.shape[:2], bool)
    valid[0, 3:6] = False  # a whole segment
    valid[1, 4] = valid[1, 10] = False
    valid[2, -2:] = False
    return x, valid


@pytest.mark.parametrize("options", [
    {"query": "causal"},
    {"query": "standard", "summary": "mlp", "summary_dim": 4},
    {"query": "compute_first", "summary": "bilstm", "pre_lnorm": True, "tie_relative_biases": True},
    {"query": "standard", "summary": "bilstm", "top_k": 1, "clamp_len": 5},
    {"query": "causal", "summary": "dense", "top_k": 3, "relevance_weighting": False},
], ids=lambda o: "-".join(f"{v}" for v in o.values()))
def test_matches_the_equations(options, precision):
    model = make_cache(**options)
    x, valid = masked_input(1)
    got = model(precision.array(x), mask=valid)
    want, recalled = cache_np(model, x, valid)
    precision.assert_close(got, want, atol=ATOL)
    # The check recalls something once the cache fills.
    assert any(len(r) == model.top_k for r in recalled[0])


def test_summaries_match_the_equations(precision):
    rng = np.random.default_rng(2)
    h = rng.normal(size=(3, 5, D))
    valid = np.ones((3, 5), bool)
    valid[0, 1] = valid[1, 3:] = False
    valid[2] = False
    for kind in ("dense", "mlp", "bilstm"):
        summary = SegmentSummary(4, kind=kind, num_layers=3)
        summary(precision.array(h))
        random_weights(summary, 3)
        got = summary(precision.array(h), mask=valid)
        want = np.stack([summary_np(summary, h[b], valid[b]) for b in range(3)])
        precision.assert_close(got, want, atol=ATOL, err_msg=kind)
        np.testing.assert_allclose(got[2], 0.0)  # no valid position


@pytest.mark.parametrize("query", ["causal", "standard", "compute_first"])
def test_reduces_to_transformer_xl(query):
    """k = N, α = 1 and the FIFO: Transformer-XL with mem_len = N·L."""
    cache = make_cache(query=query, top_k=N, relevance_weighting=False)
    backbone = TransformerXL(**BACKBONE, mem_len=N * L)
    backbone(np.zeros((1, L, D), "float32"))
    for mine, theirs in zip(cache.blocks, backbone.blocks):
        theirs.set_weights(mine.get_weights())
    x, valid = masked_input(3)
    x = x.astype("float32")
    np.testing.assert_allclose(cache(x, mask=valid), backbone(x, mask=valid), atol=ATOL)
    np.testing.assert_allclose(cache(x), backbone(x), atol=ATOL)


def jacobian_norms(model, x):
    """|d y_t / d x_s| summed over features: (steps, steps), on the backend
    the tests run on."""
    steps = x.shape[1]
    if keras.backend.backend() == "jax":
        import jax

        jacobian = jax.jacrev(lambda v: model(v)[0])(x)  # (T, d, 1, T, d)
        return np.abs(np.asarray(jacobian)).sum(axis=(1, 2, 4))
    import tensorflow as tf

    # One forward and one backward pass for all rows, not one backward pass
    # per row: example t of a batch of `steps` copies of x is read at step t
    # only, so its gradient is row t (examples are independent; a leak
    # between them would show as a gradient where the row has none).
    copies = tf.constant(np.repeat(x, steps, axis=0))
    with tf.GradientTape() as tape:
        tape.watch(copies)
        y = model(copies)
        diagonal = tf.reduce_sum(y * np.eye(steps, dtype=x.dtype)[:, :, None])
    return np.abs(tape.gradient(diagonal, copies).numpy()).sum(-1)


def perturbation_reach(model, x, positions):
    """Which outputs change when the input at each of `positions` changes:
    (positions, steps). One call for all: example 0 of the batch is x,
    example p + 1 is x changed at positions[p] (examples are independent)."""
    changed = np.repeat(x, len(positions) + 1, axis=0)
    changed[np.arange(1, len(positions) + 1), positions] += 1.0
    y = ops.convert_to_numpy(model(changed))
    return np.abs(y[1:] - y[:1]).max(-1) > 1e-6


def test_causal_query_is_causal():
    """No output depends on a later input, within or across segments: no
    gradient and no change in value."""
    model = make_cache(query="causal", top_k=1)
    x = np.random.default_rng(4).normal(size=(1, 6 * L, D)).astype("float32")
    jacobian = jacobian_norms(model, x)
    assert np.all(np.triu(jacobian, 1) == 0)
    # Within a segment, each earlier position reaches it.
    assert all(np.all(jacobian[t, t - t % L : t + 1] > 0) for t in range(6 * L))
    reaches = perturbation_reach(model, x, list(range(6 * L)))
    for position, reach in enumerate(reaches):
        assert not reach[:position].any(), position
        assert reach[position]


def test_seed_queries_leak_within_their_segment():
    """What the docstring says of "standard" and "compute_first": the
    summary of the whole segment chooses the recall, so an early position
    depends on a later one of its segment (never on a later segment)."""
    x = np.random.default_rng(5).normal(size=(1, 6 * L, D)).astype("float32")
    for query in ("standard", "compute_first"):
        model = make_cache(query=query)
        jacobian = jacobian_norms(model, x)
        start = 4 * L  # the cache is filled: recall and α matter
        assert jacobian[start, start + L - 1] > 0, query
        assert np.all(jacobian[:start, start:] == 0), query
        assert not perturbation_reach(model, x, [start + L - 1])[0, :start].any(), query


def test_gradient_reaches_the_summary_through_alpha_only():
    """The summary learns through α (which scales the recalled values);
    with α fixed to 1 it gets no gradient."""
    x = np.random.default_rng(6).normal(size=(2, 5 * L, D)).astype("float32")
    for weighting, expect in ((True, True), (False, False)):
        model = make_cache(query="standard", relevance_weighting=weighting)
        grads = gradients(model, x, model.summary.trainable_weights)
        assert any(np.abs(g).max() > 0 for g in grads) == expect, weighting


@pytest.mark.parametrize("query", ["causal", "standard", "compute_first"])
def test_no_gradient_crosses_a_segment(query):
    """What an earlier segment computed reaches a later one (a change of
    an early input changes later outputs) but passes it no gradient: the
    stored keys and values and the causal query's input are stop-gradient,
    so the Jacobian is block-diagonal by segment, and the summary learns
    from the query's side only: the last segment's gradient to its
    weights is the same with the earlier segments' states given as
    constants."""
    x = np.random.default_rng(9).normal(size=(1, 6 * L, D)).astype("float32")
    segment = np.arange(6 * L) // L
    model = make_cache(query=query)
    jacobian = jacobian_norms(model, x)
    assert np.all(jacobian[segment[:, None] > segment[None, :]] == 0)
    assert np.all(jacobian[segment[:, None] == segment[None, :]].reshape(6, L, L).sum((1, 2)) > 0)
    assert perturbation_reach(model, x, [0])[0, 4 * L :].any()
    if query != "standard":
        return
    model = make_cache(query="standard", return_state=True)
    weights = model.summary.trainable_weights
    whole = gradients(model, x, weights, last=L)
    _, *states = model(x[:, :-L])
    given = gradients(model, x[:, -L:], weights, initial_state=[ops.convert_to_numpy(s) for s in states])
    assert any(np.abs(g).max() > 0 for g in given)
    for a, b in zip(whole, given):
        np.testing.assert_allclose(a, b, atol=1e-6)


def gradients(model, x, weights, last=None, **call_kwargs):
    """d sum(y²) / d weights, y the outputs (the `last` steps only)."""

    def loss_of(outputs):
        y = outputs[0] if isinstance(outputs, (list, tuple)) else outputs
        return ops.sum(y[:, -last:] ** 2) if last else ops.sum(y**2)

    if keras.backend.backend() == "jax":
        import jax

        trainable = [v.value for v in model.trainable_variables]
        non_trainable = [v.value for v in model.non_trainable_variables]

        def loss(trainable):
            y, _ = model.stateless_call(trainable, non_trainable, x, **call_kwargs)
            return loss_of(y)

        grads = jax.grad(loss)(trainable)
        index = {id(v): i for i, v in enumerate(model.trainable_variables)}
        return [np.asarray(grads[index[id(w)]]) for w in weights]
    import tensorflow as tf

    with tf.GradientTape() as tape:
        loss = loss_of(model(x, **call_kwargs))
    # None: no path from the loss to the weight.
    return [np.zeros(w.shape) if g is None else g.numpy() for w, g in zip(weights, tape.gradient(loss, weights))]


def test_empty_slots_are_never_recalled():
    """Before the cache fills, α covers the filled slots only, and k larger
    than their number recalls nothing else."""
    model = make_cache(top_k=3)
    rng = np.random.default_rng(7)
    keys = rng.normal(size=(2, N, model.summary_dim)).astype("float32")
    slot_mask = np.zeros((2, N, L), "float32")
    slot_mask[0, 2] = 1.0  # one filled slot
    slot_mask[1, 1:, :2] = 1.0  # two, partly padded
    query = rng.normal(size=(2, model.summary_dim)).astype("float32")
    alpha, indices = (ops.convert_to_numpy(t) for t in model.recall(query, keys, slot_mask))
    np.testing.assert_allclose(alpha[0], [0, 0, 1], atol=1e-6)
    assert alpha[1, 0] == 0 and abs(alpha[1].sum() - 1) < 1e-6
    assert indices[0, 0] == 2 and set(indices[1, :2]) == {1, 2}
    # The first segment sees no memory: as without any.
    x = rng.normal(size=(2, L, D)).astype("float32")
    alone = x
    for block in model.blocks:
        alone = block(alone)
    np.testing.assert_allclose(model(x), alone, atol=ATOL)


def test_a_sequence_equals_its_segments_fed_in_turn():
    model = make_cache(return_state=True, summary="mlp")
    x = np.random.default_rng(8).normal(size=(2, 6 * L, D)).astype("float32")
    whole, *final = model(x)
    states, outputs = None, []
    for start in range(0, 6 * L, L):
        output, *states = model(x[:, start : start + L], initial_state=states)
        outputs.append(output)
    np.testing.assert_allclose(np.concatenate(outputs, 1), whole, atol=ATOL)
    for a, b in zip(states, final):
        np.testing.assert_allclose(a, b, atol=ATOL)
    assert [name for name, _, _ in model.streaming_state_specs()] == [
        "keys", "values_0", "values_1", "slot_mask", "previous_output"]


def padded_stream(pieces):
    """The calls of a stream laid end to end, each padded at the end to
    whole segments: (inputs, valid)."""
    x = np.concatenate([np.pad(p, [(0, 0), (0, -p.shape[1] % L), (0, 0)]) for p in pieces], 1)
    valid = np.concatenate([np.arange(p.shape[1] + -p.shape[1] % L) < p.shape[1] for p in pieces])
    return x, np.broadcast_to(valid, x.shape[:2])


@pytest.mark.parametrize("options", [{"stateful": True},
                                     {"return_state": True, "query": "standard", "summary": "bilstm"}],
                         ids=["stateful", "states-fed-back"])
def test_short_calls_are_padded_at_the_end(options):
    """A call of fewer than L steps, fresh or continuing a stream, is
    padded (masked) at the end, as a longer one is: its outputs, and those
    of the calls after it, are the NumPy equations' for the stream with
    every call padded to whole segments, and its padding enters the cache
    as masked positions. The streaming step pads a short chunk the same."""
    model = make_cache(**options)
    if model.stateful:
        model.reset_state()  # after make_cache's call
    rng = np.random.default_rng(10)
    # Five segments through three slots: the short ones are evicted too.
    pieces = [rng.normal(size=(1, steps, D)).astype("float32") for steps in (2, 1, 4, 2)]
    states, outputs = None, []
    for piece in pieces:
        if model.stateful:
            outputs.append(model(piece))
            continue
        if states is not None:
            stepped, stepped_states = model.streaming_step(piece, states)
        output, *states = model(piece, initial_state=states)
        outputs.append(output)
        if len(outputs) == 1:
            slot_mask = ops.convert_to_numpy(states[1 + model.num_layers])
            np.testing.assert_array_equal(slot_mask[0, -1], [1, 1, 0])
            np.testing.assert_array_equal(slot_mask[0, :-1], 0)
        else:
            np.testing.assert_allclose(stepped, output, atol=ATOL)
            for a, b in zip(stepped_states, states, strict=True):
                np.testing.assert_allclose(a, b, atol=ATOL)
    want, _ = cache_np(model, *padded_stream(pieces))
    np.testing.assert_allclose(np.concatenate(outputs, 1), want[padded_stream(pieces)[1]][None], atol=ATOL)


def test_bad_arguments_name_themselves():
    # The other bad constructor arguments: the registry's bad_kwargs
    # (tests/contract). The summary's width is named as the caller gave it.
    with pytest.raises(ValueError, match="summary_dim=0"):
        SegmentCacheTransformer(**{**BACKBONE, "num_slots": N, "top_k": 2, "summary_dim": 0})
    model = make_cache(return_state=True)
    with pytest.raises(ValueError, match="initial state 'keys' of shape"):
        model(np.zeros((2, L, D), "float32"),
              initial_state=[np.zeros((2, N + 1, D), "float32")] + [np.zeros(s) for s in ((2, N, L, D),) * 2]
              + [np.zeros((2, N, L)), np.zeros((2, L, D))])


# make check, with the other SavedModel exports: a SavedModel written and
# loaded costs more than make test's time limit.
@pytest.mark.check
def test_saved_model_step_by_segment(tmp_path):
    """SavedModel `step` (with `chunk_length`) fed one segment at a time
    from `initial_state` gives Keras' outputs, padding included."""
    import tensorflow as tf

    from keras_relrec.export import export_saved_model

    inputs = keras.Input((None, D), name="sequence")
    model = keras.Model(inputs, make_cache(summary="bilstm")(keras.layers.Masking(0.0)(inputs)))
    x, valid = masked_input(9, segments=5)
    x = np.where(valid[..., None], x, 0.0).astype("float32")[:, : 4 * L]
    want = model.predict(x, verbose=0)
    assert export_saved_model(model, tmp_path / "sm") == ["serve", "step", "initial_state", "chunk_length"]
    loaded = tf.saved_model.load(str(tmp_path / "sm"))
    np.testing.assert_allclose(loaded.serve({"sequence": x})["output"], want, atol=ATOL)
    np.testing.assert_allclose(stream_saved_model(loaded, x), want, atol=ATOL)


def test_explored_recall_draws_from_alpha_in_training_only():
    """Gumbel-top-k in training: every filled slot is drawn about as often
    as α says, empty ones never; at inference, the top k."""
    model = make_cache(top_k=1, explore_recall=True, seed=3)
    keys = np.zeros((2000, N, model.summary_dim), "float32")
    keys[:, :, 0] = [0.0, 1.0, 2.0]
    slot_mask = np.ones((2000, N, L), "float32")
    slot_mask[:, 0] = 0.0  # an empty slot
    query = np.zeros((2000, model.summary_dim), "float32")
    query[:, 0] = np.sqrt(model.summary_dim)
    alpha, drawn = (ops.convert_to_numpy(t) for t in model.recall(query, keys, slot_mask, training=True))
    counts = np.bincount(drawn[:, 0], minlength=N) / len(drawn)
    assert counts[0] == 0
    np.testing.assert_allclose(counts, alpha[0], atol=0.04)  # α = (0, 0.27, 0.73)
    _, best = model.recall(query, keys, slot_mask)
    assert np.all(ops.convert_to_numpy(best) == 2)


@pytest.mark.parametrize("query", ["standard", "causal", "compute_first"])
def test_a_bad_value_in_one_sample_leaves_the_others_recall(query):
    """NaN (or 1e30, which overflows to NaN in the summary) in one sample:
    its scores over three filled slots are NaN, which compare false with
    every score; the recall still ranks each slot once (NaN ones last), so
    the other sample's outputs are those without it and no offset leaves
    the table."""
    layer = SegmentCacheTransformer(1, 2, 4, 8, 16, segment_len=3, num_slots=3, top_k=2, query=query)
    x = np.random.default_rng(0).normal(size=(2, 15, 8)).astype("float32")
    clean = np.asarray(layer(x))
    for value in (np.nan, 1e30):
        bad = x.copy()
        bad[1, 4] = value
        got = np.asarray(layer(bad))
        np.testing.assert_allclose(got[0], clean[0], atol=1e-6)
