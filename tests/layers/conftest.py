import pytest

from tests.layers.float64 import Precision
from tests.layers.float64 import float64_policy


@pytest.fixture(params=["float32", "float64"])
def precision(request):
    """A reference test taking it runs in float32, and again under the
    float64 dtype policy (see tests/layers/float64.py); one that needs the
    float64 run alone parametrizes it indirectly with ["float64"]."""
    if request.param == "float32":
        yield Precision("float32")
        return
    with float64_policy():
        yield Precision("float64")


# The backend-neutral tests of the families, run again on JAX (the suite
# runs on TensorFlow): `jax` in make check, `jax_slow` in make test-slow.
# Below: "file::test" (file below tests/layers) and the ids of its
# parametrizations that run again, or ALL of them. Besides these, every
# float64 run carries `jax_slow` (float64_on_jax).
ALL = None
RERUN_ON_JAX = {
    # One float64 run per family, one that takes most of the family's layers.
    "jax": {
        # Both layers, tied: the tables and projections read across layers.
        "adaptive/test_adaptive_layers.py::test_softmax_matches_the_equations": ["float64-div2-tied"],
        "bag_of_features/test_bag_of_features_equations.py::test_memberships_and_histogram":
            ["float64-l2-per_codeword"],
        "bilinear/test_bilinear_equations.py::test_tabl": ["float64-time-channels_last"],
        # The block runs a LocalRecurrence.
        "local_recurrence/test_r_transformer_goldens.py::test_the_block_equations_with_padding": ["float64"],
        "recurrent/test_lstm_family_equations.py::test_cell_matches_equations": ["float64-coupled_peepholes"],
        "relation_transformer/test_relation_modules.py::test_regional_maps_match_the_equations": ["float64-dot"],
        # Both forms of the regional maps, through every relation module.
        "relation_transformer/test_interaction_transformer.py::test_literal_regional_maps_match_the_equations":
            ["float64"],
        "relational/test_relational_memory_equations.py::test_steps_match_the_reference":
            ["float64-given-two_blocks_memory"],
        # Token ids: the embedding's sqrt(d); blocks, attention, sinusoids.
        "transformer_xl/test_transformer_xl_equations.py::test_backbone_matches_the_segment_recurrence":
            ["float64-tokens"],
        "transformer_xl/test_segment_cache_transformer.py::test_matches_the_equations":
            ["float64-causal-dense-3-False"],
    },
    "jax_slow": {
        # The relation modules in every pairwise form, a region map that is
        # not the default, masking, the interaction transformer, the
        # classifier.
        "relation_transformer/test_relation_modules.py::test_global_maps_match_the_equations": ALL,
        "relation_transformer/test_relation_modules.py::test_regional_maps_match_the_equations": ALL,
        "relation_transformer/test_relation_modules.py::test_the_written_form_relates_positions_not_pairs": ALL,
        "relation_transformer/test_relation_modules.py::test_padding_is_as_if_absent_from_the_global_maps": ALL,
        "relation_transformer/test_relation_modules.py::test_pairs_outside_a_region_are_masked_out_not_zero_logits":
            ALL,
        "relation_transformer/test_relation_modules.py::test_the_default_split_is_equal_and_follows_the_length": ALL,
        "relation_transformer/test_interaction_transformer.py::test_interaction_matches_the_equations": ALL,
        "relation_transformer/test_interaction_transformer.py::test_literal_regional_maps_match_the_equations": ALL,
        "relation_transformer/test_interaction_transformer.py::test_classifier_matches_the_equations": ALL,
        # The window loops, masking, chunking, the DRRT's equations, the
        # block's equations and the goldens of the public R-Transformer code.
        "local_recurrence/test_local_recurrence.py::test_matches_an_explicit_loop_over_windows":
            ["float32-3-simple_rnn", "float32-3-gru", "float32-3-lstm"],
        "local_recurrence/test_local_recurrence.py::test_a_window_longer_than_the_sequence_sees_zeros_before_it": ALL,
        "local_recurrence/test_local_recurrence.py::test_the_seed_equations_1_and_2": ALL,
        "local_recurrence/test_local_recurrence.py::test_masked_steps_are_as_if_absent": ALL,
        "local_recurrence/test_local_recurrence.py::test_chunked_equals_unchunked": ALL,
        "local_recurrence/test_local_recurrence.py::test_stateful_calls_continue_the_stream": ALL,
        "local_recurrence/test_r_transformer_goldens.py::test_the_block_matches_the_reference": ALL,
        "local_recurrence/test_r_transformer_goldens.py::test_the_block_equations_with_padding": ALL,
        "local_recurrence/test_r_transformer_goldens.py::test_keras_layer_norm_is_the_documented_other_choice": ALL,
        "local_recurrence/test_r_transformer_goldens.py::test_a_model_of_blocks_saves_and_reloads": ALL,
        # The segment cache's reduction to Transformer-XL, causality,
        # gradients, empty slots, streaming by segments, explored recall.
        "transformer_xl/test_segment_cache_transformer.py::test_matches_the_equations":
            ["float32-causal", "float32-causal-dense-3-False"],
        "transformer_xl/test_segment_cache_transformer.py::test_reduces_to_transformer_xl": ALL,
        "transformer_xl/test_segment_cache_transformer.py::test_causal_query_is_causal": ALL,
        "transformer_xl/test_segment_cache_transformer.py::test_gradient_reaches_the_summary_through_alpha_only": ALL,
        "transformer_xl/test_segment_cache_transformer.py::test_no_gradient_crosses_a_segment": ALL,
        "transformer_xl/test_segment_cache_transformer.py::test_seed_queries_leak_within_their_segment": ALL,
        "transformer_xl/test_segment_cache_transformer.py::test_empty_slots_are_never_recalled": ALL,
        "transformer_xl/test_segment_cache_transformer.py::test_a_sequence_equals_its_segments_fed_in_turn": ALL,
        "transformer_xl/test_segment_cache_transformer.py::test_short_calls_are_padded_at_the_end": ALL,
        "transformer_xl/test_segment_cache_transformer.py::test_explored_recall_draws_from_alpha_in_training_only": ALL,
    },
}


def float64_on_jax(params):
    """Every float64 run reruns on JAX in make test-slow, but a stream's
    graph of unknown length (TensorFlow's alone: JAX collects none)."""
    return params.get("precision") == "float64" and params.get("stream") != "unknown_length"


def pytest_collection_modifyitems(config, items):
    checked = set()
    marked = set()  # (marker, "file::test", parametrization id)
    collected = set()  # "file::test"
    for item in items:
        if not (isinstance(item, pytest.Function) and item.nodeid.startswith("tests/layers/")):
            continue
        path = item.nodeid.removeprefix("tests/layers/").split("::")[0]
        if path not in checked:
            checked.add(path)
            # A test renamed without its entry here would drop out silently.
            missing = [test for tests in RERUN_ON_JAX.values() for test in tests
                       if test.startswith(f"{path}::") and not hasattr(item.module, test.split("::")[1])]
            if missing:
                raise pytest.UsageError(f"RERUN_ON_JAX names tests that {path} lacks: {missing}")
        callspec = getattr(item, "callspec", None)
        test = f"{path}::{item.originalname}"
        collected.add(test)
        for marker, tests in RERUN_ON_JAX.items():
            runs = tests.get(test, ())
            if runs is ALL or (callspec and callspec.id in runs):
                item.add_marker(marker)
                marked.add((marker, test, callspec.id if callspec else None))
        if callspec and float64_on_jax(callspec.params):
            item.add_marker("jax_slow")
    # A parametrization renamed without its entry here would drop out too;
    # checked where whole files were collected (no node id given).
    if not any("::" in arg for arg in config.args):
        unmatched = [(marker, test, run) for marker, tests in RERUN_ON_JAX.items() for test, runs in tests.items()
                     if runs is not ALL and test in collected for run in runs if (marker, test, run) not in marked]
        if unmatched:
            raise pytest.UsageError(f"RERUN_ON_JAX names parametrizations that are not collected: {unmatched}")
