"""The float64 runs of the families' NumPy reference tests (tests/layers/
float64.py) again on JAX, in one process: in make test one run per family
(one that takes most of the family's layers), in make test-slow every one.
The families' other JAX reruns leave the float64 runs to this one."""

import pathlib

import pytest

from tests.jax_rerun import pytest_on_jax

HERE = pathlib.Path(__file__).parent
FILES = [
    "bag_of_features/test_bag_of_features_equations.py",
    "bilinear/test_bilinear_equations.py",
    "local_recurrence/test_local_recurrence.py",
    "local_recurrence/test_r_transformer_goldens.py",
    "recurrent/test_lstm_family_equations.py",
    "relation_transformer/test_interaction_transformer.py",
    "relation_transformer/test_relation_modules.py",
    "relational/test_relational_memory_equations.py",
    "transformer_xl/test_segment_cache_transformer.py",
    "transformer_xl/test_transformer_xl_equations.py",
]
QUICK = [
    "bag_of_features/test_bag_of_features_equations.py::test_memberships_and_histogram[float64-l2-per_codeword]",
    "bilinear/test_bilinear_equations.py::test_tabl[float64-time-channels_last]",
    # The block runs a LocalRecurrence.
    "local_recurrence/test_r_transformer_goldens.py::test_the_block_equations_with_padding[float64]",
    "recurrent/test_lstm_family_equations.py::test_cell_matches_equations[float64-coupled_peepholes]",
    "relation_transformer/test_relation_modules.py::test_regional_maps_match_the_equations[float64-dot]",
    # Both forms of the regional maps, through every relation module.
    "relation_transformer/test_interaction_transformer.py::test_literal_regional_maps_match_the_equations[float64]",
    "relational/test_relational_memory_equations.py::test_steps_match_the_reference[float64-given-two_blocks_memory]",
    # Token ids: the embedding's sqrt(d); blocks, attention, sinusoids.
    "transformer_xl/test_transformer_xl_equations.py::test_backbone_matches_the_segment_recurrence[float64-tokens]",
    "transformer_xl/test_segment_cache_transformer.py::test_matches_the_equations[float64-causal-dense-3-False]",
]


def test_float64_on_jax():
    output = pytest_on_jax([HERE / node for node in QUICK], "float64")
    assert f"{len(QUICK)} passed" in output, output[-500:]


@pytest.mark.slow
def test_every_float64_run_on_jax():
    output = pytest_on_jax([HERE / name for name in FILES], "float64")
    # Every float64 run of the files, as on TensorFlow but for its graphs of
    # unknown length (JAX has none).
    assert "95 passed" in output, output[-500:]
