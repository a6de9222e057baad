"""Running a Keras model's graph with its recurrent layers swapped for the
export loop, in sequence mode or one step at a time.

The functional graph is walked with Keras' own executor, so every other
layer runs exactly as in Keras (masks propagate as usual); recurrent layers,
including those inside nested functional or sequential models, run through
`recurrent_loop`.
"""

import keras
from keras import tree

# Keras' functional executor and mask helpers; the export path pins Keras.
from keras.src.backend import get_keras_mask
from keras.src.backend import set_keras_mask

from keras_relrec.export import recurrent_loop
from keras_relrec.export.export_error import ExportError

# Layers that act on each time step on its own, so that a one-step sequence
# through them gives that step's output: the streaming step may contain only
# these, besides recurrent layers and nested models of them.
PER_STEP_LAYERS = (
    keras.layers.InputLayer,
    keras.layers.Dense,
    keras.layers.EinsumDense,
    keras.layers.Activation,
    keras.layers.ReLU,
    keras.layers.LeakyReLU,
    keras.layers.PReLU,
    keras.layers.ELU,
    keras.layers.Softmax,
    keras.layers.Dropout,
    keras.layers.GaussianNoise,
    keras.layers.GaussianDropout,
    keras.layers.AlphaDropout,
    keras.layers.LayerNormalization,
    keras.layers.BatchNormalization,
    keras.layers.UnitNormalization,
    keras.layers.Normalization,
    keras.layers.Rescaling,
    keras.layers.Masking,
    keras.layers.Embedding,
    keras.layers.TimeDistributed,
    keras.layers.Identity,
    keras.layers.Add,
    keras.layers.Subtract,
    keras.layers.Multiply,
    keras.layers.Average,
    keras.layers.Maximum,
    keras.layers.Minimum,
    keras.layers.Concatenate,
)


def functional(model):
    """The functional graph of `model` (a Functional or built Sequential)."""
    if isinstance(model, keras.Sequential):
        graph = getattr(model, "_functional", None)
        if graph is None:
            raise ExportError(
                f"model '{model.name}' is a Sequential model without an Input: "
                "build it with keras.Input so that it has a graph to export"
            )
        return graph
    if not hasattr(model, "_run_through_graph") or not hasattr(model, "_nodes_by_depth"):
        raise ExportError(
            f"model '{model.name}' is a subclassed model; export needs a "
            "functional or sequential model"
        )
    return model


def nodes_in_order(model):
    """(operation, node) pairs of the graph in execution order, nested
    models expanded; each operation once."""
    graph = functional(model)
    found = []
    for depth in sorted(graph._nodes_by_depth, reverse=True):
        for node in graph._nodes_by_depth[depth]:
            op = node.operation
            if op is None or node.is_input:
                continue
            if isinstance(op, keras.Model):
                inner = nodes_in_order(op)
                found.extend(p for p in inner if all(p[0] is not q for q, _ in found))
            elif all(op is not q for q, _ in found):
                found.append((op, node))
    return found


def layers_in_order(model):
    """Every layer and operation of the graph, in execution order."""
    return [op for op, _ in nodes_in_order(model)]


def recurrent_layers(model):
    return [layer for layer in layers_in_order(model) if recurrent_loop.is_recurrent(layer)]


def run(model, inputs, recurrent_fn):
    """Runs `model` on `inputs`, each recurrent layer through `recurrent_fn`.

    `recurrent_fn(layer, sequences, mask, kwargs)` returns the layer's output.
    """
    graph = functional(model)

    def operation_fn(op):
        if recurrent_loop.is_recurrent(op):
            return lambda *args, **kwargs: _recurrent_call(op, recurrent_fn, args, kwargs)
        if isinstance(op, keras.Model):
            return lambda *args, **kwargs: run(op, args[0] if len(args) == 1 else list(args), recurrent_fn)
        if getattr(op, "_call_has_training_arg", False):
            return lambda *args, **kwargs: op(*args, **{**kwargs, "training": False})
        return op

    return graph._run_through_graph(inputs, operation_fn=operation_fn)


def _recurrent_call(layer, recurrent_fn, args, kwargs):
    sequences = args[0]
    mask = kwargs.pop("mask", None)
    if mask is None:
        mask = get_keras_mask(sequences)
    kwargs.pop("training", None)
    outputs = recurrent_fn(layer, sequences, mask, kwargs)
    out_mask = layer.compute_mask(sequences, mask) if mask is not None else None
    if out_mask is not None:
        for tensor, m in zip(tree.flatten(outputs), tree.flatten(out_mask)):
            if m is not None:
                set_keras_mask(tensor, m)
    return outputs


def check_streamable(model):
    """Raises `ExportError` naming the first layer that cannot stream.

    Returns whether the model's output keeps the time axis."""
    recurrent = recurrent_layers(model)
    if not recurrent:
        raise ExportError(
            f"model '{model.name}' has no recurrent layer, so there is no state to "
            "stream; export it in sequence mode"
        )
    if len(functional(model).inputs) != 1 or len(tree.flatten(model.outputs)) != 1:
        raise ExportError(
            f"model '{model.name}' has several inputs or outputs; streaming needs "
            "one sequence input and one output"
        )
    for layer, node in nodes_in_order(model):
        if recurrent_loop.is_recurrent(layer):
            recurrent_loop.check_can_stream(layer)
        elif isinstance(layer, keras.layers.Layer):
            if not isinstance(layer, PER_STEP_LAYERS) and not getattr(
                layer, "acts_per_step", False
            ):
                raise ExportError(
                    f"layer '{layer.name}' ({layer.__class__.__name__}) is not known "
                    "to act on each time step alone, so the model cannot stream "
                    "frame by frame"
                )
        elif _touches_time_axis(layer, node):
            raise ExportError(
                f"operation '{layer.name}' ({layer.__class__.__name__}) works across "
                "the time axis, so the model cannot stream frame by frame"
            )
    # The step output keeps a time axis of one when every recurrent layer
    # returns sequences; the step signature drops it.
    return all(layer.return_sequences for layer in recurrent)


def _touches_time_axis(op, node):
    """Whether a plain `keras.ops` operation (no layer) reduces, reorders or
    reshapes across axis 1; elementwise operations have no axis and pass."""
    if op.__class__.__name__ in ("Reshape", "Flatten", "Transpose", "Tile"):
        return True
    axes = getattr(op, "axis", getattr(op, "axes", "none"))
    if isinstance(axes, str):  # no axis attribute: elementwise
        return False
    if axes is None:  # all axes
        return True
    rank = len(node.input_tensors[0].shape) if node.input_tensors else 0
    axes = axes if isinstance(axes, (list, tuple)) else [axes]
    return any(a % rank == 1 for a in axes) if rank else True


def state_names(model):
    """{layer: [state names]} in execution order; names are unique."""
    names = {}
    for layer in recurrent_layers(model):
        count = len(recurrent_loop.initial_state(layer, 1))
        names[layer] = [f"{layer.name}_state_{k}" for k in range(count)]
    return names
