"""Walking a Keras model's graph, and running it with some layers swapped.

The functional graph is run with Keras' own executor, so every layer that is
not swapped runs exactly as in Keras (masks propagate as usual); the export
swaps recurrent layers for its builtins-only loop (sequence mode) and every
stateful layer for its step (streaming), nested functional and sequential
models included.
"""

import collections
import dataclasses
import re

import keras
import tensorflow as tf
from keras import tree

from keras_relrec.export.export_error import ExportError
from keras_relrec.utils import keras_internals


@dataclasses.dataclass
class GraphOperation:
    """An operation of a model's graph, nested models expanded.

    operation: the layer or `keras.ops` operation.
    node: its (first) node in the graph it belongs to.
    prefix: "" at the top level; inside nested models, their names joined
        with "_" and ending in "_" (for unique state names).
    masked: whether a mask may reach it (conservatively: inside a nested
        model that receives a mask, every operation may see one).
    calls: how many times it runs in one call of the model.
    """

    operation: object
    node: object
    prefix: str
    masked: bool
    calls: int


def functional(model):
    """The functional graph of `model` (a Functional or built Sequential)."""
    graph = keras_internals.functional_graph(model)
    if graph is not None:
        return graph
    if isinstance(model, keras.Sequential):
        raise ExportError(
            f"model '{model.name}' is a Sequential model without an Input: "
            "build it with keras.Input so that it has a graph to export"
        )
    raise ExportError(
        f"model '{model.name}' is a subclassed model; export needs a functional or sequential model"
    )


def walk(model):
    """The graph's operations in execution order, nested models expanded,
    each operation once (see `GraphOperation`)."""
    found = {}
    _walk(model, "", False, 1, found)
    return list(found.values())


def _walk(model, prefix, outer_masked, multiplicity, found):
    nodes = keras_internals.graph_nodes(functional(model))
    counts = collections.Counter(id(node.operation) for node in nodes)
    visited = set()
    for node in nodes:
        op = node.operation
        if id(op) in visited:
            continue
        visited.add(id(op))
        calls = multiplicity * counts[id(op)]
        masked = outer_masked or keras_internals.node_receives_mask(node)
        if isinstance(op, keras.Model):
            _walk(op, f"{prefix}{op.name}_", masked, calls, found)
        elif id(op) in found:  # one layer object inside two nested models
            found[id(op)].calls += calls
        else:
            found[id(op)] = GraphOperation(op, node, prefix, masked, calls)


def layer_in_scope(layers, text):
    """The layer of `layers` (an export plan's) whose name scope (`<name>/`,
    or `<name>_<n>/` when traced more than once) appears first in `text` (op
    or tensor names of a converted file, the first being the one at fault),
    or None."""
    found = []
    for layer in layers:
        match = re.search(rf"""(^|[/"'\s]){re.escape(layer.name)}(_\d+)?/""", text)
        if match:
            found.append((match.start(), layer))
    return min(found, key=lambda item: item[0])[1] if found else None


def culprit(layers, text):
    """"layer '<name>' (<class>)" for the layer `layer_in_scope` finds in
    `text`, or "the model" when none is found."""
    return describe(layer_in_scope(layers, text))


def describe(layer):
    """"layer '<name>' (<class>)", or "the model" for None: how an export
    error names the layer at fault."""
    return f"layer '{layer.name}' ({type(layer).__name__})" if layer is not None else "the model"


def run(model, inputs, replacement):
    """Runs `model` on `inputs`.

    `replacement(op)` returns, for an operation to swap, a function
    `(sequences, mask, kwargs) -> outputs` that computes it, or None to run
    the operation as Keras does (in inference mode)."""

    def operation_fn(op):
        swapped = replacement(op)
        if swapped is not None:
            return lambda *args, **kwargs: _swapped_call(op, swapped, args, kwargs)
        if isinstance(op, keras.Model):
            return lambda *args, **kwargs: run(op, args[0] if len(args) == 1 else list(args), replacement)
        if keras_internals.call_has_training_arg(op):
            return lambda *args, **kwargs: op(*args, **{**kwargs, "training": False})
        return op

    return keras_internals.run_through_graph(functional(model), inputs, operation_fn)


def _swapped_call(layer, swapped, args, kwargs):
    sequences = args[0]
    mask = kwargs.pop("mask", None)
    if mask is None:
        mask = keras_internals.get_keras_mask(sequences)
    kwargs.pop("training", None)
    # In the layer's name scope, as Keras calls it: the converter names ops
    # by scope, and export errors name the layer from them.
    with tf.name_scope(layer.name):
        outputs = swapped(sequences, mask, kwargs)
    # A swap that sets its outputs' masks itself keeps them.
    sets_mask = keras_internals.get_keras_mask(tree.flatten(outputs)[0]) is not None
    computes_mask = mask is not None and not sets_mask and hasattr(layer, "compute_mask")
    out_mask = layer.compute_mask(sequences, mask) if computes_mask else None
    if out_mask is not None:
        for tensor, m in zip(tree.flatten(outputs), tree.flatten(out_mask)):
            if m is not None:
                keras_internals.set_keras_mask(tensor, m)
    return outputs
