"""AdaptiveEmbedding and AdaptiveSoftmax against their equations in float64
NumPy (numpy_reference.py), the ties with the embedding, the loss on
targets, and the checks of their arguments."""

import re

import keras
import numpy as np
import pytest

from keras_relrec.layers import AdaptiveEmbedding
from keras_relrec.layers import AdaptiveSoftmax
from keras_relrec.layers import TransformerXL
from tests.layers.adaptive.numpy_reference import embedding_np
from tests.layers.adaptive.numpy_reference import log_probs_np

ATOL = 1e-5
VOCABULARY, CUTOFFS, D = 30, [6, 12, 20], 8
# Every cluster, its first and last ids.
IDS = np.array([[0, 5, 6, 11, 12, 19], [20, 29, 3, 15, 25, 7]])


def randomize(layer, seed):
    rng = np.random.default_rng(seed)
    for variable in layer.weights:
        variable.assign(rng.normal(size=variable.shape).astype(variable.dtype))


def numpy_weights(layer):
    return [None if w is None else keras.ops.convert_to_numpy(w).astype("float64") for w in layer]


@pytest.mark.parametrize("div_val, embedding_dim", [(2, 8), (1, 4), (1, 8)], ids=["div2", "div1-projected",
                                                                                  "div1-plain"])
def test_embedding_matches_the_equations(div_val, embedding_dim, precision):
    layer = AdaptiveEmbedding(VOCABULARY, D, cutoffs=CUTOFFS, div_val=div_val, embedding_dim=embedding_dim)
    layer(IDS)
    randomize(layer, 0)
    assert [w is None for w in layer.projections] == [div_val == 1 and embedding_dim == D] * len(layer.projections)
    assert [tuple(t.shape) for t in layer.tables] == (
        [(VOCABULARY, embedding_dim)] if div_val == 1 else [(6, 8), (6, 4), (8, 2), (10, 1)])
    want = embedding_np(numpy_weights(layer.tables), numpy_weights(layer.projections), CUTOFFS, VOCABULARY, D,
                        IDS, div_val)
    precision.assert_close(layer(IDS), want, atol=ATOL)


def make_softmax(div_val, tie, embedding_dim=8, seed=0):
    """An AdaptiveSoftmax over D-wide inputs, tied (tables and the
    projections of every cluster but the first) or not, with random
    weights, and its embedding."""
    embedding = AdaptiveEmbedding(VOCABULARY, D, cutoffs=CUTOFFS, div_val=div_val, embedding_dim=embedding_dim)
    embedding(IDS)
    ties = {"tied_embedding": embedding, "tie_projections": [False, True, True, True]} if tie else {}
    softmax = AdaptiveSoftmax(VOCABULARY, cutoffs=CUTOFFS, div_val=div_val, embedding_dim=embedding_dim, **ties)
    softmax.build((None, None, D))
    randomize(embedding, seed)
    randomize(softmax, seed + 1)
    return softmax, embedding


def reference_weights(softmax, embedding, tie):
    """Per cluster: W_i, b_i, P_i (d, d_i) or None, read from the layers'
    variables as the equations name them."""
    clusters = softmax.clusters
    one = clusters.div_val == 1
    tables = numpy_weights(embedding.tables if tie else softmax.kernels)
    biases = numpy_weights(softmax.biases)
    bounds = clusters.bounds
    if one:
        tables = [tables[0][left:right] for left, right in bounds]
        biases = [biases[0][left:right] for left, right in bounds]
    projections = []
    for i in range(clusters.count):
        if not clusters.projects(D):
            projections.append(None)
        elif tie and i > 0:
            projections.append(numpy_weights([embedding.projections[0 if one else i]])[0].T)
        else:
            projections.append(numpy_weights([softmax.projections[i]])[0])
    return tables, biases, projections


@pytest.mark.parametrize("div_val, tie, embedding_dim",
                         [(2, False, 8), (2, True, 8), (1, True, 4), (1, False, 4), (1, False, 8)],
                         ids=["div2", "div2-tied", "div1-projected-tied", "div1-projected", "div1-plain"])
def test_softmax_matches_the_equations(div_val, tie, embedding_dim, precision):
    softmax, embedding = make_softmax(div_val, tie, embedding_dim)
    tables, biases, projections = reference_weights(softmax, embedding, tie)
    h = np.random.default_rng(2).normal(size=(2, 6, D))
    kernel, bias = numpy_weights([softmax.cluster_kernel, softmax.cluster_bias])
    want = np.array([[log_probs_np(h[b, t], tables, biases, projections, kernel, bias, CUTOFFS, VOCABULARY)
                      for t in range(6)] for b in range(2)])
    assert np.allclose(np.exp(want).sum(-1), 1.0)
    log_probs = softmax(precision.array(h))
    precision.assert_close(log_probs, want, atol=ATOL)
    # The loss on targets: −log p(target), 0 where masked.
    mask = np.ones((2, 6), bool)
    mask[1, 4:] = False
    nll = softmax(precision.array(h), targets=IDS, mask=mask)
    precision.assert_close(nll, np.where(mask, -np.take_along_axis(want, IDS[..., None], -1)[..., 0], 0.0),
                           atol=ATOL)


def test_one_cluster_is_a_projected_softmax(precision):
    softmax = AdaptiveSoftmax(VOCABULARY, embedding_dim=4)
    h = np.random.default_rng(3).normal(size=(2, 3, D))
    softmax(precision.array(h))
    randomize(softmax, 4)
    (table, bias, projection) = numpy_weights([softmax.kernels[0], softmax.biases[0], softmax.projections[0]])
    logits = h @ projection @ table.T + bias
    want = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    precision.assert_close(softmax(precision.array(h)), want, atol=ATOL)


def test_tied_weights_are_shared_variables():
    """The tied softmax has no table of its own; a step of training on its
    loss alone moves the embedding's tables (in the model through an
    output without a loss)."""
    softmax, embedding = make_softmax(2, True)
    assert softmax.kernels == [None] * 4 and softmax.projections[1:] == [None] * 3
    assert len(softmax.trainable_weights) == 4 + 1 + 2  # biases, projection_0, cluster weights
    hidden, tokens = keras.Input((6, D)), keras.Input((6,), dtype="int32")
    model = keras.Model([hidden, tokens], [softmax(hidden, targets=keras.ops.convert_to_tensor(IDS)),
                                           embedding(tokens)])
    before = [keras.ops.convert_to_numpy(t).copy() for t in embedding.tables]
    model.compile(keras.optimizers.SGD(0.1), loss=[lambda _, nll: nll, None])
    model.fit([np.random.default_rng(5).normal(size=(2, 6, D)), IDS], [np.zeros((2, 6)), np.zeros((2, 6, D))],
              verbose=0)
    after = [keras.ops.convert_to_numpy(t) for t in embedding.tables]
    assert all(not np.array_equal(a, b) for a, b in zip(after, before))


def test_tied_tables_with_projections_of_its_own():
    """HF's tie_word_embeddings=False with tie_projs: the tables are the
    softmax's, the projections the embedding's."""
    embedding = AdaptiveEmbedding(VOCABULARY, D, cutoffs=CUTOFFS, div_val=2)
    embedding(IDS)
    softmax = AdaptiveSoftmax(VOCABULARY, cutoffs=CUTOFFS, div_val=2, tied_embedding=embedding, tie_tables=False,
                              tie_projections=True)
    softmax.build((None, None, D))
    assert all(k is not None for k in softmax.kernels) and softmax.projections == [None] * 4
    projection = softmax.cluster_weights(2)[2]
    np.testing.assert_array_equal(projection, keras.ops.convert_to_numpy(embedding.projections[2]).T)


def test_a_tied_model_saves_and_reloads_with_the_same_outputs(tmp_path):
    softmax, embedding = make_softmax(1, True, embedding_dim=4)
    tokens = keras.Input((6,), dtype="int32")
    model = keras.Model(tokens, softmax(keras.layers.Dense(D)(embedding(tokens))))
    model.save(tmp_path / "tied.keras")
    reloaded = keras.saving.load_model(tmp_path / "tied.keras")
    # Float32 rounding: the reloaded layer reads its projections untransposed.
    np.testing.assert_allclose(reloaded.predict(IDS, verbose=0), model.predict(IDS, verbose=0), rtol=1e-5)


def test_the_loss_runs_compiled():
    """The loss on targets in an XLA-compiled step (fixed shapes: every
    cluster's logits at every position). Float32: `predict` feeds floats
    as the backend's floatx."""
    softmax, _ = make_softmax(2, False)
    h = np.random.default_rng(6).normal(size=(2, 6, D)).astype("float32")
    want = softmax(h, targets=IDS)
    hidden, targets = keras.Input((6, D)), keras.Input((6,), dtype="int32")
    model = keras.Model([hidden, targets], softmax(hidden, targets=targets))
    model.jit_compile = True
    np.testing.assert_allclose(model.predict([h, IDS], verbose=0), want, atol=ATOL)


@pytest.mark.parametrize("kwargs, match", [
    ({"cutoffs": [12, 6]}, "cutoffs"),
    ({"cutoffs": [0, 6]}, "cutoffs"),
    ({"cutoffs": [6, 30]}, "cutoffs"),
    ({"cutoffs": "6"}, "cutoffs"),
    ({"div_val": 0}, "div_val"),
    ({"div_val": 4, "embedding_dim": 8}, "div_val"),
    ({"embedding_dim": 0}, "embedding_dim"),
    ({"vocabulary_size": 0}, "vocabulary_size"),
    ({"tie_projections": True}, "tie_projections"),
    ({"tied_embedding": "embedding"}, "tied_embedding"),
])
def test_bad_arguments_are_refused(kwargs, match):
    arguments = {"vocabulary_size": VOCABULARY, "cutoffs": CUTOFFS, "div_val": 2, **kwargs}
    with pytest.raises(ValueError, match=match):
        AdaptiveSoftmax(**arguments)
    if "tie" not in str(kwargs):
        with pytest.raises(ValueError, match=match):
            AdaptiveEmbedding(output_dim=D, **arguments)


def test_mistakes_in_calls_are_refused():
    embedding = AdaptiveEmbedding(VOCABULARY, D, cutoffs=CUTOFFS, div_val=2)
    with pytest.raises(ValueError, match="token id 30"):
        embedding(np.array([[1, 30]]))
    other = AdaptiveEmbedding(VOCABULARY, D, cutoffs=[6, 12], div_val=2)
    with pytest.raises(ValueError, match="tied_embedding"):
        AdaptiveSoftmax(VOCABULARY, cutoffs=CUTOFFS, div_val=2, tied_embedding=other)
    with pytest.raises(ValueError, match="tie_projections"):
        AdaptiveSoftmax(VOCABULARY, cutoffs=CUTOFFS, div_val=2, tied_embedding=embedding, tie_projections=[True])
    tied = AdaptiveSoftmax(VOCABULARY, cutoffs=CUTOFFS, div_val=2, tied_embedding=embedding)
    with pytest.raises(ValueError, match="tied embedding's outputs"):
        tied(np.zeros((1, 2, 4)))
    softmax = AdaptiveSoftmax(VOCABULARY, cutoffs=CUTOFFS, div_val=2)
    with pytest.raises(ValueError, match="targets"):
        softmax(np.zeros((1, 2, D)), targets=np.zeros((1, 3), "int32"))
    with pytest.raises(ValueError, match="token ids in `targets`.*token id -1"):
        softmax(np.zeros((1, 2, D)), targets=np.array([[0, -1]]))
    # Not truncated: float ids, and shapes that differ where both are known.
    with pytest.raises(ValueError, match="integer token ids"):
        softmax(np.zeros((1, 2, D)), targets=np.array([[1.7, 6.9]]))
    with pytest.raises(ValueError, match="targets"):
        softmax(keras.Input((5, D)), targets=keras.Input((4,), dtype="int32"))
    with pytest.raises(ValueError, match="targets"):
        softmax(keras.Input((5, D)), targets=keras.Input((5, 1), dtype="int32"))
    # A mask of the targets' shape, not one that broadcasts or fails in the backend.
    for mask in (np.ones((1, 3), bool), np.ones((2, 2), bool), np.ones((1, 2, 1), bool)):
        with pytest.raises(ValueError, match=rf"`mask` of the targets' shape \(1, 2\).*received mask of shape "
                                             rf"{re.escape(str(mask.shape))}"):
            softmax(np.zeros((1, 2, D)), targets=np.zeros((1, 2), "int32"), mask=mask)


def test_a_tied_embedding_not_yet_built_is_built_with_the_softmax():
    embedding = AdaptiveEmbedding(VOCABULARY, D, cutoffs=CUTOFFS, div_val=2)
    softmax = AdaptiveSoftmax(VOCABULARY, cutoffs=CUTOFFS, div_val=2, tied_embedding=embedding)
    softmax.build((None, None, D))
    assert embedding.built and softmax.cluster_weights(3)[0].shape == (10, 1)


def test_mixed_precision_sums_a_large_cluster_in_float32():
    """Under mixed_float16 a cluster of more tokens than float16's largest
    number still sums: zero inputs and biases make each softmax uniform,
    −log p = log(shortlist + 1) + log(cluster size)."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        softmax = AdaptiveSoftmax(70_000, cutoffs=[100], embedding_dim=4)
        nll = softmax(np.zeros((1, 2, 4), "float32"), targets=np.array([[5, 50_000]]))
        log_probs = softmax(np.zeros((1, 1, 4), "float32"))
    finally:
        keras.config.set_dtype_policy(previous)
    np.testing.assert_allclose(np.asarray(nll, "float64"), [[np.log(101), np.log(101) + np.log(69_900)]], rtol=1e-3)
    assert np.all(np.isfinite(np.asarray(log_probs, "float32")))


def test_transformer_xl_embeds_through_it_and_the_model_saves(tmp_path):
    """TransformerXL(embedding=AdaptiveEmbedding(...)): the backbone's first
    hidden states are the embedding's (no second sqrt(d)), its config holds
    the embedding, and a tied language model reloads from `.keras` with the
    same log-probabilities."""
    embedding = AdaptiveEmbedding(VOCABULARY, D, cutoffs=CUTOFFS, div_val=2)
    backbone = TransformerXL(num_layers=1, num_heads=2, head_size=4, hidden_dim=D, intermediate_dim=16,
                             segment_len=3, mem_len=3, embedding=embedding)
    assert backbone.vocabulary_size == VOCABULARY
    softmax = AdaptiveSoftmax(VOCABULARY, cutoffs=CUTOFFS, div_val=2, tied_embedding=embedding,
                              tie_projections=True)
    tokens = keras.Input((None,), dtype="int32")
    model = keras.Model(tokens, softmax(backbone(tokens)))
    randomize(embedding, 7)
    np.testing.assert_allclose(backbone._embed(IDS, False), embedding(IDS), atol=0)
    clone = TransformerXL.from_config(backbone.get_config())
    assert clone.get_config() == backbone.get_config() and isinstance(clone.embedding, AdaptiveEmbedding)
    model.save(tmp_path / "lm.keras")
    reloaded = keras.saving.load_model(tmp_path / "lm.keras")
    np.testing.assert_allclose(reloaded.predict(IDS, verbose=0), model.predict(IDS, verbose=0), rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize("kwargs, match", [
    ({"embedding": AdaptiveEmbedding(VOCABULARY, 6)}, "output_dim"),
    ({"embedding": AdaptiveEmbedding(VOCABULARY, D), "dtype": "float64"}, "dtype policy"),
    ({"embedding": AdaptiveEmbedding(VOCABULARY, D), "vocabulary_size": 31}, "vocabulary_size"),
    ({"embedding": keras.layers.Dense(D)}, "embedding"),
])
def test_transformer_xl_refuses_an_embedding_that_does_not_fit(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TransformerXL(num_layers=1, num_heads=2, head_size=4, hidden_dim=D, intermediate_dim=16, segment_len=3,
                      mem_len=3, **kwargs)
