"""Every use of Keras' private API in keras_relrec, in one module.

keras_relrec needs a few pieces of Keras that are not exported under
`keras.*`:

- `DropoutRNNCell`: `keras.layers.RNN` draws dropout masks before its loop
  only for cells that derive from this mixin; a mask drawn inside the
  cell's `call` breaks under JAX's `lax.scan`. A layer that runs a cell in
  its own loop draws and resets them the same way (`draw_dropout_masks`,
  `reset_dropout_masks`).
- `ConvLSTMCell`: the convolution plumbing (padding, strides, data formats,
  output shapes) of `keras.layers.ConvLSTM2D`, whose step
  `PeepholeConvLSTM2D` replaces.
- `untracked`: Keras' decorator that keeps variables made in a method out
  of the layer's weights, as `keras.layers.RNN` keeps a stateful layer's
  states (they are not weights: saving and `set_weights` skip them).
- The functional graph of a model (its nodes by depth, Keras' executor
  `_run_through_graph`) and the masks Keras attaches to tensors: the export
  path runs a model's graph with its stateful layers swapped for builtins-
  only loops and steps.
- `train_validation_split`: how `fit(validation_split=...)` splits arrays,
  so that work done on the training part alone (the k-means codebook of a
  tuning trial) sees exactly the examples `fit` trains on.
- `float64_results`: Keras' type promotion maps every 64-bit result type to
  its 32-bit one on JAX (to follow JAX's default), even with JAX's 64-bit
  types on, so `tanh`, `sin`, `maximum`... of float64 tensors are float32;
  the float64 reference tests lift that mapping for float64 while they run.
- `symbolic_build`: Keras' build of a compiled model's training state (the
  optimizer's slots, the compiled metrics and loss) from the shapes of a
  batch, which its TensorFlow trainer runs before the first step only
  under a distribution strategy (JAX's and torch's always): otherwise the
  variables are made inside the first step's trace, and TensorFlow traces
  the step again (`keras_relrec.models.build_training_state`).

Keras is held to one minor version in `setup.py` because of them; moving to
the next Keras is this file's work.
"""

import contextlib
from unittest import mock

import keras
from keras.src.backend import get_keras_mask
from keras.src.backend import set_keras_mask
from keras.src.backend.common import dtypes as _dtypes
from keras.src.layers.rnn.conv_lstm import ConvLSTMCell
from keras.src.layers.rnn.dropout_rnn_cell import DropoutRNNCell
from keras.src.trainers.data_adapters.array_slicing import train_validation_split
from keras.src.utils.tracking import no_automatic_dependency_tracking as untracked

__all__ = [
    "ConvLSTMCell",
    "DropoutRNNCell",
    "draw_dropout_masks",
    "float64_results",
    "reset_dropout_masks",
    "get_keras_mask",
    "set_keras_mask",
    "train_validation_split",
    "untracked",
    "functional_graph",
    "graph_nodes",
    "node_receives_mask",
    "run_through_graph",
    "call_has_training_arg",
    "input_layer_name",
    "sublayers",
    "symbolic_build",
]


@contextlib.contextmanager
def float64_results():
    """Within the block, float64 results stay float64 on every backend (on
    JAX, with its 64-bit types on)."""
    with mock.patch.dict(_dtypes.BIT64_TO_BIT32_DTYPE, {"float64": "float64"}):
        yield


def draw_dropout_masks(cell, step_inputs, states):
    """Draws a cell's dropout masks for `step_inputs` (batch, features) and
    `states` (its state list) before a loop, as `keras.layers.RNN` does, so
    that the loop itself draws no random numbers (stacked cells included)."""
    keras.layers.RNN._maybe_config_dropout_masks(_MASK_DRAWER, cell, step_inputs, states)


def reset_dropout_masks(cell):
    """Forgets the masks `draw_dropout_masks` drew, after the loop."""
    keras.layers.RNN._maybe_reset_dropout_masks(_MASK_DRAWER, cell)


class _MaskDrawer:
    # Keras' two RNN methods recurse through `self` and use nothing else of it.
    _maybe_config_dropout_masks = keras.layers.RNN._maybe_config_dropout_masks
    _maybe_reset_dropout_masks = keras.layers.RNN._maybe_reset_dropout_masks


_MASK_DRAWER = _MaskDrawer()


def functional_graph(model):
    """The functional graph behind `model`, or None if it has none: a
    Functional model is its own graph, a Sequential one built with an
    `Input` has one inside, a subclassed model has none."""
    if isinstance(model, keras.Sequential):
        return getattr(model, "_functional", None)
    if hasattr(model, "_run_through_graph") and hasattr(model, "_nodes_by_depth"):
        return model
    return None


def graph_nodes(graph):
    """The nodes of a functional graph that call an operation, in execution
    order (the deepest first); a node has `.operation` and `.input_tensors`."""
    by_depth = graph._nodes_by_depth
    return [
        node
        for depth in sorted(by_depth, reverse=True)
        for node in by_depth[depth]
        if node.operation is not None and not node.is_input
    ]


def node_receives_mask(node):
    """Whether a mask reaches the node's operation: passed as its `mask`
    argument, or attached to its first input tensor."""
    if node.arguments.kwargs.get("mask") is not None:
        return True
    return bool(node.input_tensors) and get_keras_mask(node.input_tensors[0]) is not None


def run_through_graph(graph, inputs, operation_fn):
    """Runs a functional graph on `inputs`, each operation `op` replaced by
    `operation_fn(op)`; masks propagate as in Keras."""
    return graph._run_through_graph(inputs, operation_fn=operation_fn)


def call_has_training_arg(operation):
    return getattr(operation, "_call_has_training_arg", False)


def input_layer_name(tensor):
    """The name of the `keras.Input` layer a symbolic input tensor comes from."""
    return tensor._keras_history.operation.name


def sublayers(layer):
    """Every layer inside `layer`, recursively, not `layer` itself."""
    return layer._flatten_layers(include_self=False)


def symbolic_build(model, batch):
    """Makes the training state of compiled `model` (optimizer, compiled
    metrics and loss) for `batch`, a tuple `(x, y, sample_weight)` of
    arrays or Keras tensors; only their shapes and dtypes are read."""
    # Within the model's strategy, as Keras' TensorFlow trainer builds
    # (the other trainers have none).
    strategy = getattr(model, "distribute_strategy", None)
    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        model._symbolic_build(data_batch=batch)
