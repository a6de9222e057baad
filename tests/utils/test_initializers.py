"""One initializer argument, many weights: each weight draws its own values."""

import keras
import numpy as np

from keras_relrec.layers import PeepholeLSTMCell
from keras_relrec.layers import RelationalMemoryCell
from keras_relrec.utils.initializers import clone_initializer


def built_weights(make):
    cell = make()
    keras.layers.RNN(cell)(np.zeros((1, 2, 3), "float32"))
    # Paths without the cell's own (numbered) name: "block_0_qkv/kernel".
    return {w.path.split("/", 2)[-1]: np.asarray(w) for w in cell.weights}


def test_the_issue_configuration_starts_with_distinct_weights():
    weights = built_weights(lambda: RelationalMemoryCell(mem_slots=4, head_size=8, num_heads=2, num_blocks=2))
    kernels = {name: w for name, w in weights.items() if name.endswith("kernel")}
    pairs = [("input_projection/kernel", "mlp_0/kernel"), ("mlp_0/kernel", "mlp_1/kernel"),
             ("block_0_qkv/kernel", "block_1_qkv/kernel"), ("gate_input/kernel", "gate_memory/kernel")]
    for a, b in pairs:
        name_a = next(n for n in kernels if n.endswith(a))
        name_b = next(n for n in kernels if n.endswith(b))
        assert kernels[name_a].shape != kernels[name_b].shape or not np.array_equal(
            kernels[name_a], kernels[name_b]), (a, b)
    peepholes = [w for name, w in built_weights(lambda: PeepholeLSTMCell(4)).items() if "peephole" in name]
    assert len(peepholes) == 3
    assert not np.array_equal(peepholes[0], peepholes[1]) and not np.array_equal(peepholes[1], peepholes[2])


def test_a_seeded_initializer_is_reproducible_and_still_distinct():
    def make():
        return PeepholeLSTMCell(4, peephole_initializer=keras.initializers.RandomNormal(seed=7))

    first, second = built_weights(make), built_weights(make)
    peepholes = [name for name in first if "peephole" in name]
    assert len(peepholes) == 3
    for name in peepholes:
        np.testing.assert_array_equal(first[name], second[name])
    assert not np.array_equal(first[peepholes[0]], first[peepholes[1]])


def test_clone_keeps_the_kind_and_leaves_strings_alone():
    original = keras.initializers.GlorotUniform(seed=3)
    clone = clone_initializer(original, "kernel")
    assert type(clone) is keras.initializers.GlorotUniform and clone is not original
    assert original.get_config()["seed"] == 3  # the argument itself is untouched
    assert clone_initializer("zeros", "bias") == "zeros"
