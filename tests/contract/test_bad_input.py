"""Mistakes refused early, for every entry: a bad constructor argument, an
input of the wrong rank or size, an empty batch or no steps, integer
inputs, and states of another batch size or width raise a `ValueError` that names
what is wrong, or give the right answer; never a backend error or a silent
broadcast."""


import keras
import numpy as np
import pytest

from tests.contract.conformance import STATEFUL_ENTRIES
from tests.contract.conformance import as_list
from tests.contract.conformance import assert_close
from tests.contract.conformance import each_input
from tests.contract.conformance import entries
from tests.contract.conformance import first_input


# Invalid arguments and inputs.
@entries
def test_invalid_constructor_arguments(entry):
    for overrides, name in entry.bad_kwargs:
        with pytest.raises(ValueError, match=name):
            entry.cls(**{**entry.kwargs, **overrides})


@entries
def test_invalid_input_shapes(entry):
    shape = entry.input_shapes[0]
    # Wrong rank (batch, features) of the first input, when the layer is
    # first built.
    others = entry.make_inputs(names=False)[1:]
    with pytest.raises(ValueError, match=entry.bad_rank_match):
        entry.make_layer()(entry.structured([keras.Input(shape[-1:] if len(shape) > 1 else shape + (1,))] + others))
    # Wrong size of the axis the layer was built for (the features, unless
    # the entry says otherwise).
    layer = entry.make_layer()
    layer(entry.make_input())
    if entry.fixed_axis is None:
        # Nothing fixed (token ids): the built layer takes another length.
        assert as_list(layer(entry.make_input(batch=2, length=shape[0] + 1)))[0].shape[1] == shape[0] + 1
        return
    axis = entry.fixed_axis % (len(shape) + 1) - 1  # within one example
    wrong = list(shape)
    wrong[axis] += 1
    with pytest.raises(ValueError, match=f"expected axis .* to have value {shape[axis]}"):
        layer(first_input(entry, entry.make_input(batch=2), np.zeros((2,) + tuple(wrong), "float32")))


def assert_names_the_shape(error):
    assert "shape" in str(error) or "ndim" in str(error), str(error)


@entries
def test_call_time_inputs(entry):
    """Eager calls with inputs of the wrong rank, an empty batch, no steps,
    integer values or initial states of another batch size: a clear
    `ValueError`, or the right answer, never a backend error or a silent
    broadcast."""
    x = entry.make_input(batch=2)
    first = as_list(x)[0]
    rank = first.ndim
    wrong_ranks = [first_input(entry, x, bad) for bad in (first[:, 0], first[..., None])
                   if bad.ndim not in entry.other_ranks]
    # The wrong rank (of the first input) at the first call: the layer's
    # own message.
    for bad in wrong_ranks:
        with pytest.raises(ValueError, match=entry.bad_rank_match):
            entry.make_layer()(bad)
    layer = entry.make_layer()
    want = [np.asarray(o) for o in as_list(layer(x))]
    # The wrong rank once built. Inside keras.layers.RNN a cell sees one step
    # at a time: Keras' RNN slices a sequence of one axis too few before the
    # cell can look at it, and fails in the backend (documented in docs/limits.md).
    for bad in wrong_ranks:
        if entry.is_cell and as_list(bad)[0].ndim < rank:
            with pytest.raises(Exception):  # noqa: B017
                layer(bad)
        else:
            with pytest.raises(ValueError) as info:
                layer(bad)
            assert_names_the_shape(info.value)
    # An empty batch.
    empty = as_list(layer(each_input(entry, x, lambda v: v[:0])))
    assert [tuple(e.shape) for e in empty] == [(0,) + w.shape[1:] for w in want]
    no_steps = each_input(entry, x, lambda v: v[:, :0])
    # No steps: refused by the layer, or (where the layer takes any length)
    # an output of the right shape. keras.layers.RNN itself fails on an
    # empty sequence, before a cell sees it.
    if entry.fixed_length:
        with pytest.raises(ValueError) as info:
            layer(no_steps)
        assert_names_the_shape(info.value)
        with pytest.raises(ValueError, match="at least one"):
            entry.make_layer()(no_steps)
    elif entry.is_cell:
        with pytest.raises(Exception):  # noqa: B017
            layer(no_steps)
    elif entry.recurrent:
        with pytest.raises(ValueError, match="at least one step"):
            layer(no_steps)
    else:
        none = as_list(layer(no_steps))
        shapes = layer.compute_output_shape(entry.structured([v.shape for v in as_list(no_steps)]))
        assert [tuple(n.shape) for n in none] == [tuple(s) for s in (shapes if len(none) > 1 else [shapes])]
        assert all(np.all(np.isfinite(n)) for n in none)
    # Integer inputs are features like any other (token ids are already).
    integers = x if entry.input_dtype == "int32" else each_input(entry, x, lambda v: np.round(v * 2))
    assert_close(layer(each_input(entry, integers, lambda v: v.astype("int32"))),
                 layer(each_input(entry, integers, lambda v: v.astype("float32"))))
    # Initial states of another batch size, or of another width, are
    # refused, not broadcast.
    if entry.recurrent:
        states = [np.ones((1,) + tuple(s.shape[1:]), "float32") for s in layer.get_initial_state(1)]
        with pytest.raises(ValueError, match="batch size"):
            layer(x, initial_state=states)
        batch = as_list(x)[0].shape[0]
        right = [np.zeros(s.shape, "float32") for s in layer.get_initial_state(batch)]
        for k, state in enumerate(right):
            wider = np.zeros(state.shape[:-1] + (state.shape[-1] + 1,), "float32")
            with pytest.raises(ValueError, match=rf"states\[{k}\] of shape"):
                layer(x, initial_state=right[:k] + [wider] + right[k + 1:])


@pytest.mark.parametrize("entry", STATEFUL_ENTRIES, ids=lambda e: e.id)
def test_a_stateful_layer_refuses_another_batch(entry):
    """States kept for one batch size are never broadcast to or cut for
    another (as each replica's share of a batch under tf.distribute): a
    `ValueError` that names both sizes."""
    chunk = getattr(entry.make_layer(), "streaming_chunk_length", None) or 1
    x = entry.make_input(batch=4, length=2 * chunk)
    layer = entry.make_layer(stateful=True)
    layer(x)
    with pytest.raises(ValueError, match=r"batch size.*\b4\b|\b4\b.*batch size") as info:
        layer(x[:2])
    assert "2" in str(info.value)
