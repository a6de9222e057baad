"""The export plan: what exporting a model needs, worked out once.

`plan_export(model)` walks the model's graph (nested models included) and
records its inputs and their signature names, the recurrent layers that run
in the builtins-only loop, the stateful layers with their state names and
specs, whether the streaming step's output keeps a time axis, and — when the
model cannot stream frame by frame — the reason, naming the layer at fault.
Every endpoint (`serve`, `step`, `initial_state`), the SavedModel and the
TFLite export read the plan instead of working the model out again. The
plan keeps the model's layers, not the model: the stages that trace the
model (`endpoints.serve_fn`, `step_fn`, `add_endpoints`) take it beside
the plan.

Which layers are stateful and how they stream is the contract of
`keras_relrec.layers.StreamingLayer`, read off each layer by
`stateful_protocol.py`; `keras.layers.RNN` joins it through `RNNStreamer`.
"""

import dataclasses
import re

import keras
import tensorflow as tf
from keras import tree

from keras_relrec.export.export_error import ExportError
from keras_relrec.export.graph import model_graph
from keras_relrec.export.graph import recurrent_loop
from keras_relrec.export.graph import stateful_protocol
from keras_relrec.export.graph.rnn_streamer import RNNStreamer
from keras_relrec.layers.streaming_layer import StreamingLayer
from keras_relrec.utils import keras_internals

# Keras layers that act on each time step on its own, so that a one-step
# sequence through them gives that step's output; other layers say so with
# `acts_per_step` (see `keras_relrec.layers.streaming_layer`).
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


@dataclasses.dataclass(frozen=True)
class StatefulNode:
    """A stateful layer of the model and how it streams.

    layer: the Keras layer.
    streamer: the `StreamingLayer` that steps it: the layer itself, or an
        `RNNStreamer` around a `keras.layers.RNN`.
    state_specs: {state name: `tf.TensorSpec` with a dynamic batch}, in the
        order of the layer's states; the names are unique in the model.
    keeps_time_axis: whether the layer's step output keeps the time axis.
    """

    layer: object
    streamer: object
    state_specs: dict
    keeps_time_axis: bool

    @property
    def state_names(self):
        return list(self.state_specs)


@dataclasses.dataclass(frozen=True)
class ExportPlan:
    """What exporting a model needs; build it with `plan_export(model)`.
    Printed, it is a summary: inputs, stateful layers and their states,
    whether the model streams and, if not, why.

    inputs: {signature name: symbolic `keras.Input` tensor}, in order.
    num_outputs: how many output tensors the model returns.
    recurrent: the layers that run in the builtins-only loop in sequence
        mode (`keras.layers.RNN`, `Bidirectional`).
    stateful: the `StatefulNode`s in execution order.
    streaming_refusal: why the model cannot stream frame by frame, naming
        the layer at fault (and, for a layer across time, what to do
        instead), or None when it can.
    chunk_length: None when the step takes one frame; L when its stateful
        layers step by chunks of L frames (`streaming_chunk_length`, e.g.
        a Transformer-XL segment): the step then takes and returns L frames.
    layers: every operation of the graph (nested models' too), in the
        order of the walk: the later stages name a layer at fault from
        them (`culprit`) without walking the model again.
    """

    inputs: dict
    num_outputs: int
    recurrent: tuple
    stateful: tuple
    streaming_refusal: str | None
    chunk_length: int | None = None
    layers: tuple = ()

    def __str__(self):
        """A summary, one line each: the inputs, the stateful layers with
        their states, the loop of sequence mode, and whether (and by how many
        frames) the model streams, or why not."""

        def spec(shape, dtype):
            return f"{tuple(shape)} {getattr(dtype, 'name', dtype)}"

        lines = ["ExportPlan", "  inputs:"]
        lines += [f"    {name}: {spec(tensor.shape, tensor.dtype)}" for name, tensor in self.inputs.items()]
        lines.append(f"  outputs: {self.num_outputs}")
        lines.append("  stateful layers:" if self.stateful else "  stateful layers: none")
        for node in self.stateful:
            states = ", ".join(f"{name} {spec(s.shape.as_list(), s.dtype)}" for name, s in node.state_specs.items())
            lines.append(f"    {node.layer.name} ({type(node.layer).__name__}): {states}")
        loop = ", ".join(layer.name for layer in self.recurrent)
        lines.append(f"  sequence mode: {loop} in the builtins-only loop" if loop
                     else "  sequence mode: no keras.layers.RNN (a layer that loops does so in its own call)")
        if not self.can_stream:
            lines.append(f"  streaming: no, {self.streaming_refusal}")
        elif self.chunk_length is None:
            lines.append("  streaming: yes, one frame a step")
        else:
            lines.append(f"  streaming: yes, {self.chunk_length} frames a step (a chunk)")
        return "\n".join(lines)

    # The summary in an interactive session too: the fields hold symbolic
    # tensors and layers, whose own reprs say little.
    __repr__ = __str__

    def layer_in_scope(self, text):
        """The layer whose name scope appears first in `text` (op or tensor
        names of a converted file, or a converter's message), or None."""
        return model_graph.layer_in_scope(self.layers, text)

    def culprit(self, text):
        """"layer '<name>' (<class>)" for the layer at fault in `text`, or
        "the model"."""
        return model_graph.culprit(self.layers, text)

    @property
    def can_stream(self):
        return self.streaming_refusal is None

    def require_streaming(self):
        if self.streaming_refusal is not None:
            raise ExportError(self.streaming_refusal)

    @property
    def keeps_time_axis(self):
        """Whether the step output keeps a time axis of one, which the step
        signature drops: when every stateful layer keeps it."""
        return self.chunk_length is None and all(node.keeps_time_axis for node in self.stateful)

    def stateful_node(self, layer):
        return next(node for node in self.stateful if node.layer is layer)

    def serve_specs(self, dynamic_length=True, batch_size=None, length=None):
        """{name: TensorSpec} of whole sequences: the batch dynamic unless
        `batch_size` is given; the time axis dynamic with `dynamic_length`,
        else `length` or the model's own."""
        specs = {}
        for name, tensor in self.inputs.items():
            shape = [batch_size] + list(tensor.shape[1:])
            if len(shape) >= 2 and (dynamic_length or length is not None):
                shape[1] = None if dynamic_length else length
            specs[name] = tf.TensorSpec(shape, tensor.dtype, name=name)
        return specs

    def frame_specs(self, batch_size=None):
        """{name: TensorSpec} of one frame (the time axis dropped), or of one
        chunk of `chunk_length` frames; the batch dynamic unless given."""
        self.require_streaming()
        ((name, tensor),) = self.inputs.items()
        steps = [] if self.chunk_length is None else [self.chunk_length]
        return {name: tf.TensorSpec([batch_size] + steps + list(tensor.shape[2:]), tensor.dtype, name=name)}

    def state_specs(self, batch_size=None):
        """{state name: TensorSpec} of every stateful layer, in order; the
        batch dynamic unless given."""
        return {
            name: tf.TensorSpec([batch_size] + spec.shape.as_list()[1:], spec.dtype, name=name)
            for node in self.stateful
            for name, spec in node.state_specs.items()
        }


def _safe_name(name):
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def plan_export(model):
    """Works out the `ExportPlan` of a functional or sequential model.

    Raises:
        ExportError: the model has no graph to export (subclassed, or a
            Sequential model without an `Input`).
    """
    graph = model_graph.functional(model)
    inputs = {_safe_name(keras_internals.input_layer_name(t)): t for t in graph.inputs}
    num_outputs = len(tree.flatten(model.outputs))
    recurrent, stateful, refusals, used_names, layers = [], [], [], set(), []
    last_stateful = None
    for position, item in enumerate(model_graph.walk(model)):
        op = item.operation
        layers.append(op)
        if recurrent_loop.is_recurrent(op):
            recurrent.append(op)
        if isinstance(op, keras.layers.Bidirectional):
            refusals.append(recurrent_loop.streaming_refusal(op))
            continue
        streamer = _streamer(item)
        if streamer is None:
            # Worded once the walk knows whether a stateful layer follows.
            refusals.append((position, item))
            continue
        refusals.append(stateful_protocol.streaming_refusal(streamer))
        if item.calls > 1:
            refusals.append(
                f"layer '{op.name}' is called {item.calls} times in the model; streaming "
                "needs each stateful layer called once, so that it has one set of states"
            )
        specs = {}
        for state, shape, dtype in streamer.streaming_state_specs():
            name = _unique(_safe_name(f"{item.prefix}{op.name}_{state}"), used_names)
            specs[name] = tf.TensorSpec([None] + list(shape), dtype, name=name)
        keeps_time = op.return_sequences if isinstance(op, keras.layers.RNN) else True
        stateful.append(StatefulNode(op, streamer, specs, keeps_time))
        last_stateful = position

    refusals = [
        _per_step_refusal(r[1], after_last_stateful=last_stateful is not None and r[0] > last_stateful)
        if isinstance(r, tuple) else r
        for r in refusals
    ]
    model_refusals = []
    if not stateful and not recurrent:
        model_refusals.append(
            f"model '{model.name}' has no recurrent layer, so there is no state to "
            "stream; export it in sequence mode"
        )
    if len(inputs) != 1 or num_outputs != 1:
        model_refusals.append(
            f"model '{model.name}' has several inputs or outputs; streaming needs "
            "one sequence input and one output"
        )
    node_chunks = [stateful_protocol.chunk_length(node.streamer) for node in stateful]
    chunks = set(node_chunks)
    if len(chunks) > 1:
        steps = ", ".join(f"'{node.layer.name}' by {chunk or 1}" for node, chunk in zip(stateful, node_chunks))
        model_refusals.append(
            f"the stateful layers of model '{model.name}' step by different numbers of frames "
            f"({steps}); a streaming step takes one chunk for all"
        )
    # A layer that cannot stream is the most useful thing to name first.
    reasons = [r for r in refusals + model_refusals if r is not None]
    return ExportPlan(
        inputs=inputs,
        num_outputs=num_outputs,
        recurrent=tuple(recurrent),
        layers=tuple(layers),
        stateful=tuple(stateful),
        streaming_refusal=reasons[0] if reasons else None,
        chunk_length=next(iter(chunks)) if len(chunks) == 1 else None,
    )


def _streamer(item):
    """What streams a graph operation: an `RNNStreamer` for an RNN, the layer
    itself if it is a `StreamingLayer`, None for a stateless operation."""
    op = item.operation
    if isinstance(op, keras.layers.RNN):
        return RNNStreamer(op, item.node.input_tensors[0].shape, item.masked)
    if isinstance(op, StreamingLayer):
        return op
    return None


def _unique(name, used):
    candidate, k = name, 2
    while candidate in used:
        candidate, k = f"{name}_{k}", k + 1
    used.add(candidate)
    return candidate


def _per_step_refusal(item, after_last_stateful):
    """Why a stateless operation cannot run on one frame, and what to do
    instead, or None. `after_last_stateful`: whether it runs after the
    graph's last stateful layer, so that the model could stream without
    it."""
    op = item.operation
    if isinstance(op, keras.layers.Layer):
        if isinstance(op, PER_STEP_LAYERS) or stateful_protocol.acts_per_step(op):
            return None
        reason = "is not known to act on each time step alone"
    elif _touches_time_axis(op, item.node):
        reason = "works across the time axis"
    else:
        return None
    kind = "layer" if isinstance(op, keras.layers.Layer) else "operation"
    fixes = "export it in sequence mode (streaming=False)"
    if after_last_stateful:
        fixes += (
            f", or stream the model without '{op.name}', ending at its last recurrent (stateful) layer (the step "
            f"returns that layer's output at each frame), and apply '{op.name}' outside"
        )
    if isinstance(op, keras.layers.Lambda):
        # A Lambda saves its function, not attributes set on it.
        fixes += (", or, if its function acts on each step alone, write it as a layer class that sets "
                  "acts_per_step = True")
    elif kind == "layer" and not type(op).__module__.startswith(("keras.", "keras_relrec.")):
        # Keras' and this package's classes are not the user's to change.
        fixes += ", or, if it acts on each step alone, set acts_per_step = True on its class"
    return (
        f"{kind} '{op.name}' ({op.__class__.__name__}) {reason}, so the model cannot stream frame by frame; {fixes}"
    )


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
