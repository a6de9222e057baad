"""InteractionTransformer and drrt_classifier against the DRRT's eqs.
(1)–(15) in float64 NumPy, with masks and a region map that is not the
default."""

import keras
import numpy as np
import pytest

from keras_relrec.layers import InteractionTransformer
from keras_relrec.layers import LocalRecurrence
from keras_relrec.models import drrt_classifier
from tests.layers.relation_transformer import reference
from tests.layers.relation_transformer.test_relation_modules import REGIONS
from tests.layers.relation_transformer.test_relation_modules import masks
from tests.layers.relation_transformer.test_relation_modules import noisy
from tests.layers.relation_transformer.test_relation_modules import weights_of

RANDOM = {"bias_initializer": "random_normal", "recurrent_initializer": "random_normal"}


def as_numpy(layer):
    return {w.name: np.asarray(w, "float64") for w in layer.weights}


def recurrence(maps, row_mask, layer, window):
    """α' = σ(W h + b) over rows, h the local tanh RNN (eqs. 1–2 on a map)."""
    cell, dense = as_numpy(layer.local.cell), as_numpy(layer.output_dense)
    h = reference.local_rnn(maps, row_mask, window, cell["kernel"], cell["recurrent_kernel"], cell["bias"])
    return reference.sigmoid(h @ dense["kernel"] + dense["bias"])


def interaction(block, a, b, mask_a, mask_b, window, fusion, form, confine=True):
    """Z_ab, Z_ba of one example, eqs. (3)–(15); `confine`: α'^{r(k)} and
    β'^{r(k)} confined to region k, or eqs. (10)–(11) as written."""
    a, b = np.where(mask_a[:, None], a, 0.0), np.where(mask_b[:, None], b, 0.0)
    alpha_g, beta_g = reference.global_maps(a, b, weights_of(block.global_relation), form, mask_a, mask_b)
    alpha_r, beta_r, r = reference.regional_maps(a, b, weights_of(block.regional_relation), form,
                                                 block.regions, mask_a, mask_b)
    valid = mask_a[:, None] & mask_b[None, :]
    if window:
        rec = block.map_recurrences
        alpha_g = recurrence(alpha_g, mask_a, rec["global_alpha"], window)
        beta_g = recurrence(beta_g.T, mask_b, rec["global_beta"], window).T
        alpha_r = np.stack([recurrence(m, mask_a, rec["regional_alpha"], window) for m in alpha_r])
        beta_r = np.stack([recurrence(m.T, mask_b, rec["regional_beta"], window).T for m in beta_r])
    w_a, w_b = np.asarray(block.transform_a.kernel, "float64"), np.asarray(block.transform_b.kernel, "float64")
    w_t = np.asarray(block.output_dense.kernel, "float64")
    values_a, values_b = a @ w_a, b @ w_b
    t_ab_g, t_ba_g = reference.transforms(alpha_g[None], beta_g[None], values_a, values_b, valid[None])  # σ = g
    regional_pairs = r & valid if confine else np.broadcast_to(valid, r.shape)
    t_ab_r, t_ba_r = reference.transforms(alpha_r, beta_r, values_a, values_b, regional_pairs)  # Σ_k, σ = r(k)

    def fuse(g, regional):
        return {"sum": g + regional, "maxout": np.maximum(g, regional),
                "concat": np.concatenate([g, regional], -1)}[fusion]

    z_ab = a + fuse(t_ab_g, t_ab_r) @ w_t                                        # eqs. (12), (14)
    z_ba = b + fuse(t_ba_g, t_ba_r) @ w_t                                        # eqs. (13), (15)
    return z_ab * mask_a[:, None], z_ba * mask_b[:, None]


# (map window, map units, fusion, pairwise form)
CASES = [(None, None, "sum", "concat"), (2, None, "sum", "concat"), (3, 4, "maxout", "dot"),
         (2, None, "concat", "concat_relu")]


@pytest.mark.parametrize("window, units, fusion, form", CASES)
def test_interaction_matches_the_equations(window, units, fusion, form):
    a, b = (np.random.default_rng(1).normal(size=(2, 7, 4)), np.random.default_rng(2).normal(size=(2, 5, 4)))
    mask_a, mask_b = masks(a, b)
    block = InteractionTransformer(6, regions=REGIONS, fusion=fusion, pairwise=form, transform_units=3,
                                   map_window_size=window, map_units=units, dtype="float64", **RANDOM)
    z_ab, z_ba = (np.asarray(z) for z in block([noisy(a, mask_a), noisy(b, mask_b)], mask=[mask_a, mask_b]))
    for e in range(2):
        want_ab, want_ba = interaction(block, a[e], b[e], mask_a[e], mask_b[e], window, fusion, form)
        np.testing.assert_allclose(z_ab[e], want_ab, atol=reference.ATOL)
        np.testing.assert_allclose(z_ba[e], want_ba, atol=reference.ATOL)


@pytest.mark.parametrize("precision", ["float64"], indirect=True)
def test_literal_regional_maps_match_the_equations(precision):
    """confine_regional_maps=False sums α'^{r(k)} over every valid j and
    β'^{r(k)} over every valid i, as eqs. (10)–(11) are written; the
    default confines them to region k. After the recurrence the two
    differ (A's position 6 is in no region; the others see B' beyond
    their region). Under the float64 policy (tests/layers/float64.py)."""
    a, b = (np.random.default_rng(1).normal(size=(2, 7, 4)), np.random.default_rng(2).normal(size=(2, 5, 4)))
    mask_a, mask_b = masks(a, b)
    inputs = [noisy(a, mask_a), noisy(b, mask_b)]
    literal = InteractionTransformer(6, regions=REGIONS, pairwise="dot", transform_units=3, map_window_size=2,
                                     confine_regional_maps=False, **RANDOM)
    confined = InteractionTransformer.from_config({**literal.get_config(), "confine_regional_maps": True})
    assert InteractionTransformer(6).confine_regional_maps is True
    got = {}
    for confine, block in ((False, literal), (True, confined)):
        block(inputs, mask=[mask_a, mask_b])
        if confine:
            block.set_weights(literal.get_weights())
        got[confine] = block(inputs, mask=[mask_a, mask_b])
        for e in range(2):
            want = interaction(block, a[e], b[e], mask_a[e], mask_b[e], 2, "sum", "dot", confine=confine)
            precision.assert_close(got[confine][0][e], want[0], atol=reference.ATOL)
            precision.assert_close(got[confine][1][e], want[1], atol=reference.ATOL)
    for z_literal, z_confined in zip(got[False], got[True]):
        assert np.abs(np.asarray(z_literal) - np.asarray(z_confined)).max() > 1e-2


def test_regional_transforms_stay_in_their_region():
    """After the recurrence (which runs down a whole map), α'^{r(k)} is
    confined to region k's pairs again, whatever B holds: T^{r(k)} of a
    position outside A'_k is zero, and no position reads a b'_j outside
    B'_k through region k."""
    block = InteractionTransformer(6, regions=([0, 0, 1, 1], [0, 1, 1, 1]), map_window_size=2, dtype="float64",
                                   **RANDOM)
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(1, 4, 3)), rng.normal(size=(1, 4, 3))
    block([a, b])
    moved = b.copy()
    moved[0, 0] += 1.0  # b'_0 is in region 0 only
    for maps in (block._recur(block.relation_maps([a, x]), a, x, None, None, False) for x in (b, moved)):
        assert not np.asarray(maps["regional_alpha"])[0, 0, 2:].any()  # a'_2, a'_3 are not in region 0
        assert not np.asarray(maps["regional_alpha"])[0, 1, :, 0].any()  # b'_0 is not in region 1


def test_widths_and_lengths_are_checked():
    with pytest.raises(ValueError, match="same width"):
        InteractionTransformer(4)([np.zeros((1, 5, 3)), np.zeros((1, 5, 2))])
    inputs = [keras.Input((None, 3)), keras.Input((6, 3))]
    with pytest.raises(ValueError, match="needs inputs of a known length"):
        InteractionTransformer(4, map_window_size=2)(inputs)
    # Without the recurrence any lengths work, one layer for all.
    z_ab, z_ba = InteractionTransformer(4)(inputs)
    assert tuple(z_ab.shape) == (None, None, 3) and tuple(z_ba.shape) == (None, 6, 3)


@pytest.mark.parametrize("local_recurrence", [True, False])
def test_classifier_matches_the_equations(local_recurrence):
    """The whole model: eqs. (1)–(2) on each input (DRRT) or a Dense alone
    (DRT), the interaction transformer, average fusion and three layers."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("float64")
    try:
        model = drrt_classifier(((7, 2), (5, 3)), 3, feature_units=4, window_size=3, relation_units=5,
                                regions=REGIONS, fusion="concat", pairwise="dot", map_window_size=2,
                                local_recurrence=local_recurrence, hidden_units=(6, 4))
    finally:
        keras.config.set_dtype_policy(previous)
    assert any(isinstance(layer, LocalRecurrence) for layer in model.layers) == local_recurrence
    rng = np.random.default_rng(3)
    for w in model.weights:  # random biases too
        w.assign(rng.normal(size=w.shape) * 0.5)
    x_a, x_b = rng.normal(size=(2, 7, 2)), rng.normal(size=(2, 5, 3))
    got = np.asarray(model([x_a, x_b]))
    block = model.get_layer("interaction_0")
    for e in range(2):
        features = []
        for x, side in ((x_a[e], "a"), (x_b[e], "b")):
            if local_recurrence:
                cell = as_numpy(model.get_layer(f"local_{side}").cell)
                x = reference.local_rnn(x, np.ones(len(x), bool), 3, cell["kernel"], cell["recurrent_kernel"],
                                        cell["bias"])                                   # eq. (1)
            dense = as_numpy(model.get_layer(f"features_{side}"))
            features.append(np.tanh(x @ dense["kernel"] + dense["bias"]))              # eq. (2)
        z_ab, z_ba = interaction(block, *features, np.ones(7, bool), np.ones(5, bool),
                                 2 if local_recurrence else None, "concat", "dot")
        h = (z_ab.mean(0) + z_ba.mean(0)) / 2                                            # average fusion
        for name in ("hidden_1", "hidden_2"):
            dense = as_numpy(model.get_layer(name))
            h = np.maximum(h @ dense["kernel"] + dense["bias"], 0.0)
        dense = as_numpy(model.get_layer("logits"))
        np.testing.assert_allclose(got[e], h @ dense["kernel"] + dense["bias"], atol=reference.ATOL)


def test_classifier_arguments_are_checked():
    with pytest.raises(ValueError, match="input_shapes"):
        drrt_classifier((7, 2), 3)
    with pytest.raises(ValueError, match="hidden_units"):
        drrt_classifier(((7, 2), (5, 2)), 3, hidden_units=32)
    with pytest.raises(ValueError, match="fusion"):
        drrt_classifier(((7, 2), (5, 2)), 3, fusion="mean")
