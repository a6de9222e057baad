"""GlobalRelation and RegionalRelation against the DRRT's eqs. (3)–(9) in
float64 NumPy, with masks and a region map that is not the default; the
layers run under the float64 policy (tests/layers/float64.py)."""

import re

import keras
import numpy as np
import pytest

from keras_relrec.layers import GlobalRelation
from keras_relrec.layers import InteractionTransformer
from keras_relrec.layers import RegionalRelation
from tests.layers.relation_transformer import reference

# A's 7 positions: two regions, position 3 in both, position 6 in none; B's
# 5 positions: region 1 first, then region 0 (the regions need not be in
# order or contiguous).
REGIONS = ([0, 0, 0, [0, 1], 1, 1, -1], [1, 1, 0, 0, 1])
FORMS = ("concat", "concat_relu", "dot")


def pair(batch=2, n=7, m=5, d_a=4, d_b=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(batch, n, d_a)), rng.normal(size=(batch, m, d_b))


def masks(a, b):
    mask_a, mask_b = np.ones(a.shape[:2], bool), np.ones(b.shape[:2], bool)
    mask_a[0, -2:] = False
    mask_a[1, 2] = False
    mask_b[1, 0] = False
    return mask_a, mask_b


def weights_of(layer):
    return {w.name: np.asarray(w, "float64") for w in layer.relation.weights}


def noisy(x, mask):
    """`x` with large values where it is masked: they must reach nothing."""
    x = x.copy()
    x[~mask] = 1e3
    return x


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("precision", ["float64"], indirect=True)
def test_global_maps_match_the_equations(form, precision):
    a, b = pair()
    mask_a, mask_b = masks(a, b)
    layer = GlobalRelation(6, pairwise=form)
    alpha, beta = (np.asarray(m) for m in layer([noisy(a, mask_a), noisy(b, mask_b)], mask=[mask_a, mask_b]))
    w = weights_of(layer)
    for e in range(len(a)):
        want_alpha, want_beta = reference.global_maps(np.where(mask_a[e, :, None], a[e], 0),
                                                      np.where(mask_b[e, :, None], b[e], 0), w, form,
                                                      mask_a[e], mask_b[e])
        precision.assert_close(alpha[e], want_alpha, atol=reference.ATOL)
        precision.assert_close(beta[e], want_beta, atol=reference.ATOL)
    # α's valid rows and β's valid columns are distributions; padding's are zero.
    np.testing.assert_allclose(alpha[0, :5].sum(-1), 1.0, atol=reference.ATOL)
    np.testing.assert_allclose(beta[1][:, mask_b[1]].sum(0), 1.0, atol=reference.ATOL)
    assert not alpha[0, 5:].any() and not beta[1][:, 0].any()


def test_the_written_form_relates_positions_not_pairs():
    """Eq. (5) as written is g_a·u_i + g_b·v_j: every row of α^g is the same
    distribution over B's positions, every column of β^g the same over A's;
    the other forms relate pairs."""
    a, b = pair()
    alpha, beta = (np.asarray(m) for m in GlobalRelation(6, dtype="float64")([a, b]))
    np.testing.assert_allclose(alpha, np.broadcast_to(alpha[:, :1], alpha.shape), atol=reference.ATOL)
    np.testing.assert_allclose(beta, np.broadcast_to(beta[:, :, :1], beta.shape), atol=reference.ATOL)
    for form in ("concat_relu", "dot"):
        alpha, _ = GlobalRelation(6, pairwise=form, dtype="float64")([a, b])
        assert np.abs(np.asarray(alpha) - np.asarray(alpha)[:, :1]).max() > 1e-3, form


def test_padding_is_as_if_absent_from_the_global_maps():
    a, b = pair(batch=1)
    layer = GlobalRelation(6, pairwise="dot")
    alpha, beta = layer([a, b])
    padded_a = np.concatenate([np.zeros((1, 2, 4)), a], axis=1)
    padded_b = np.concatenate([b[:, :2], np.zeros((1, 3, 3)), b[:, 2:]], axis=1)
    mask_a = np.array([[False] * 2 + [True] * 7])
    mask_b = np.array([[True] * 2 + [False] * 3 + [True] * 3])
    got_alpha, got_beta = layer([padded_a, padded_b], mask=[mask_a, mask_b])
    rows, cols = mask_a[0], mask_b[0]
    np.testing.assert_allclose(np.asarray(got_alpha)[0][rows][:, cols], alpha[0], atol=1e-6)
    np.testing.assert_allclose(np.asarray(got_beta)[0][rows][:, cols], beta[0], atol=1e-6)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("precision", ["float64"], indirect=True)
def test_regional_maps_match_the_equations(form, precision):
    a, b = pair()
    mask_a, mask_b = masks(a, b)
    layer = RegionalRelation(6, regions=REGIONS, pairwise=form)
    alpha, beta = (np.asarray(m) for m in layer([noisy(a, mask_a), noisy(b, mask_b)], mask=[mask_a, mask_b]))
    assert alpha.shape == beta.shape == (2, 2, 7, 5)
    w = weights_of(layer)
    for e in range(len(a)):
        want_alpha, want_beta, _ = reference.regional_maps(
            np.where(mask_a[e, :, None], a[e], 0), np.where(mask_b[e, :, None], b[e], 0), w, form, REGIONS,
            mask_a[e], mask_b[e])
        precision.assert_close(alpha[e], want_alpha, atol=reference.ATOL)
        precision.assert_close(beta[e], want_beta, atol=reference.ATOL)


def test_pairs_outside_a_region_are_masked_out_not_zero_logits():
    """Region k's softmax covers its own pairs only: every other pair has
    weight exactly zero, and each row of a'_i ∈ A'_k sums to 1/C_r, with
    C_r = Σ R / sqrt(d_B') (eq. 9) — 4·2 + 3·3 = 17 pairs here."""
    a, b = pair()
    alpha, beta = (np.asarray(m) for m in RegionalRelation(6, regions=REGIONS, dtype="float64")([a, b]))
    r = reference.region_matrix(REGIONS, 7, 5)
    assert r.sum() == 17
    assert not alpha[:, ~r].any() and not beta[:, ~r].any()
    assert np.all(alpha[:, r] > 0)
    for k in range(2):
        rows = r[k].any(1)
        np.testing.assert_allclose(alpha[:, k][:, rows].sum(-1), np.sqrt(3) / 17, atol=reference.ATOL)
        np.testing.assert_allclose(beta[:, k][:, :, r[k].any(0)].sum(-2), np.sqrt(4) / 17, atol=reference.ATOL)
    # With zero logits for the other pairs (eq. 7 read literally), their
    # weight would not be zero: the two readings differ.
    psi = np.zeros((7, 5)) + r[0] * 1.0
    assert reference.softmax_over(psi, np.ones_like(r[0]), axis=1)[~r[0]].min() > 0


@pytest.mark.parametrize("lengths", [(7, 5), (9, 4)])
@pytest.mark.parametrize("precision", ["float64"], indirect=True)
def test_the_default_split_is_equal_and_follows_the_length(lengths, precision):
    """regions=K splits each sequence into K runs of consecutive positions,
    whatever its length (one layer, two lengths)."""
    n, m = lengths
    layer = RegionalRelation(6, regions=3)
    a, b = pair(n=n, m=m)
    alpha, beta = (np.asarray(x) for x in layer([a, b]))
    want_alpha, want_beta, r = reference.regional_maps(a[0], b[0], weights_of(layer), "concat", 3,
                                                       np.ones(n, bool), np.ones(m, bool))
    precision.assert_close(alpha[0], want_alpha, atol=reference.ATOL)
    precision.assert_close(beta[0], want_beta, atol=reference.ATOL)
    assert [int(r[k].any(1).sum()) for k in range(3)] == [n // 3 + (k >= 3 - n % 3) for k in range(3)]


def test_region_maps_are_checked():
    with pytest.raises(ValueError, match=r"no position of B to region\(s\) \[2\]"):
        RegionalRelation(4, regions=([0, 1, 2], [0, 1, 1]))
    with pytest.raises(ValueError, match="region index"):
        RegionalRelation(4, regions=([0, 1.5], [0, 1]))
    with pytest.raises(ValueError, match="maps 3 positions of A; received input A of shape"):
        RegionalRelation(4, regions=([0, 0, 1], [0, 1]))([np.zeros((1, 4, 2)), np.zeros((1, 2, 2))])
    # Built, it holds to those lengths.
    layer = RegionalRelation(4, regions=([0, 0, 1], [0, 1]))
    layer([np.zeros((1, 3, 2)), np.zeros((1, 2, 2))])
    with pytest.raises(ValueError, match="expected axis 1 of input shape to have value 2"):
        layer([np.zeros((1, 3, 2)), np.zeros((1, 3, 2))])


@pytest.mark.parametrize("cls", [GlobalRelation, RegionalRelation])
def test_two_inputs_are_required(cls):
    with pytest.raises(ValueError, match=rf"{cls.__name__} expects two inputs \[A, B\]"):
        cls(4)(np.zeros((1, 5, 3)))
    with pytest.raises(ValueError, match=rf"{cls.__name__} expects two inputs"):
        cls(4)([np.zeros((1, 5, 3)), np.zeros((1, 5))])
    # Either may have any length; each keeps its width once built.
    layer = cls(4)
    layer([np.zeros((1, 5, 3)), np.zeros((1, 6, 2))])
    with pytest.raises(ValueError, match="expected axis -1 of input shape to have value 2"):
        layer([np.zeros((1, 5, 3)), np.zeros((1, 6, 3))])


def test_mixed_precision_keeps_distributions():
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        alpha, beta = GlobalRelation(6, pairwise="dot")(list(pair(n=40, m=30)))
    finally:
        keras.config.set_dtype_policy(previous)
    assert alpha.dtype == "float16"
    np.testing.assert_allclose(np.asarray(alpha, "float32").sum(-1), 1.0, atol=2e-3)


def test_the_regional_normaliser_holds_in_float16():
    """C_r counts K·n·m pairs: 65,536 at 256 × 256, past float16's largest
    number. Under mixed_float16 the maps must still sum to sqrt(d_B')/C_r per
    row, not collapse to zero."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        alpha, _ = RegionalRelation(4, regions=1)(list(pair(batch=1, n=256, m=256)))
    finally:
        keras.config.set_dtype_policy(previous)
    np.testing.assert_allclose(np.asarray(alpha, "float32").sum(-1), np.sqrt(3) / 65536, rtol=0.1)


def test_more_regions_than_positions_are_refused():
    """An equal split into K regions of fewer than K positions would leave
    regions empty: refused where the lengths are known, at build or call."""
    a, b = np.zeros((1, 4, 3)), np.zeros((1, 6, 3))
    with pytest.raises(ValueError, match=r"`regions` must be at most .* regions=5 where A has 4 positions"):
        RegionalRelation(4, regions=5)([a, b])
    with pytest.raises(ValueError, match=r"regions=5 where A has 4 positions"):
        RegionalRelation(4, regions=5)([keras.Input((4, 3)), keras.Input((6, 3))])
    with pytest.raises(ValueError, match=r"regions=5 where A has 4 positions"):
        InteractionTransformer(4, regions=5)([a, b])
    # Built for any length, the call's lengths are checked.
    layer = RegionalRelation(4, regions=5)
    layer.build([(None, None, 3), (None, None, 3)])
    with pytest.raises(ValueError, match=r"regions=5 where A has 4 positions"):
        layer([a, b])
    alpha, _ = RegionalRelation(4, regions=4)([a, b])
    assert np.all(np.asarray(alpha).any(axis=(2, 3)))


@pytest.mark.parametrize("cls", [GlobalRelation, RegionalRelation, InteractionTransformer])
def test_inputs_of_other_batch_sizes_or_masks_of_other_shapes_are_refused(cls):
    """Never a backend error, nor a batch of one broadcast over the other's."""
    a, b = np.ones((3, 4, 6), "float32"), np.ones((3, 5, 6), "float32")
    with pytest.raises(ValueError, match="received A of batch size 1, B of batch size 3"):
        cls(4)([a[:1], b])
    with pytest.raises(ValueError, match="received A of batch size 3, B of batch size 2"):
        cls(4)([a, b[:2]])
    good = [np.ones((3, 4), bool), np.ones((3, 5), bool)]
    for bad in (np.ones((3, 6), bool), np.ones((3, 5, 1), bool), np.ones((1, 5), bool)):
        received = re.escape(str(bad.shape))
        with pytest.raises(ValueError, match=r"`mask_B` of shape .* received mask_B of shape " + received):
            cls(4)([a, b], mask=[good[0], bad])
    with pytest.raises(ValueError, match=r"expects `mask` \[mask_A, mask_B\]"):
        cls(4)([a, b], mask=good[0])
