"""The functions a model is exported with, traced from the model and its
`ExportPlan`.

- `serve`: whole sequences in, the model's outputs out, computed with the
  builtins-only recurrent loop. Batch and (by default) time are dynamic.
  Both trace a layer's loops of a known count unrolled (`ops.loops`).
- `step`: one time step (or one chunk of `plan.chunk_length` steps, for
  layers that step by chunks) and every stateful layer's states in, the
  output for that step (chunk) and the new states out, by name.
- `initial_state`: a batch size in, every state at the start of a stream.
- `chunk_length` (only for a step that takes chunks): no input, the
  number of steps of a chunk out.

State tensors are named `<layer name>_<state>`: `<layer name>_state_<k>` for
the states of a recurrent layer in the order of its Keras states (for an
LSTM: 0 is h, 1 is c), `<layer name>_output` for the previous output of a
masked cell whose output is not its first state (`rnn_streamer`), and what
a `StreamingLayer` names (`keras_relrec.layers.streaming_layer`);
inside a nested model the names start with the model's name. The step
returns the new states under the same names, so a caller feeds each output
back as the next input of the same name.
"""

import keras
import tensorflow as tf
from keras import tree

from keras_relrec.export.graph import model_graph
from keras_relrec.export.graph import recurrent_loop
from keras_relrec.ops import loops
from keras_relrec.utils import keras_internals
from keras_relrec.utils import validation


def output_dict(outputs):
    flat = tree.flatten(outputs)
    if len(flat) == 1:
        return {"output": flat[0]}
    return {f"output_{k}": t for k, t in enumerate(flat)}


def serve_fn(model, plan, unroll=False):
    """Whole sequences through `model` (of `plan`), recurrent layers in the
    loop (unrolled over a static length with `unroll`)."""
    recurrent = {id(layer) for layer in plan.recurrent}

    def sequence_call(layer):
        def call(sequences, mask, kwargs):
            states = kwargs.get("initial_state")
            states = None if states is None else tree.flatten(states)
            return recurrent_loop.sequence(layer, sequences, mask, states, unroll)

        return call

    def serve(inputs):
        args = [inputs[name] for name in plan.inputs]
        with loops.unrolled():
            outputs = model_graph.run(
                model,
                args if len(args) > 1 else args[0],
                lambda op: sequence_call(op) if id(op) in recurrent else _builtin_swap(op),
            )
        return output_dict(outputs)

    return serve


def step_fn(model, plan, check_batch=False):
    """One frame through `model` (of `plan`), every stateful layer through
    its step.

    With `check_batch`, the function fails when a state's batch differs from
    the frame's (a SavedModel then refuses to broadcast; TFLite files are
    checked by `litert_runner` before they run)."""
    plan.require_streaming()
    ((name, _),) = plan.inputs.items()
    nodes = {id(node.layer): node for node in plan.stateful}

    def step(inputs):
        frame = inputs[name]
        if check_batch:
            inputs = {**inputs, **_checked_states(frame, name, {k: inputs[k] for k in plan.state_specs()})}
        new_states = {}

        def step_call(node):
            def call(sequences, mask, kwargs):
                states = [inputs[n] for n in node.state_names]
                output, updated = node.streamer.streaming_step(sequences, states, mask)
                new_states.update(zip(node.state_names, _returned_states(node, "streaming_step", updated)))
                return output

            return call

        with loops.unrolled():
            output = model_graph.run(
                model,
                tf.expand_dims(frame, 1) if plan.chunk_length is None else frame,
                lambda op: step_call(nodes[id(op)]) if id(op) in nodes else _builtin_swap(op),
            )
        if plan.keeps_time_axis:
            output = tf.squeeze(output, 1)  # TFLite Micro slices at most 4-D tensors
        return {"output": output, **new_states}

    return step


def _builtin_swap(op):
    """Keras layers and ops computed with ops every runtime has: `Masking`'s
    mask and `keras.ops.any` (a mask built in a model) are reduce-anys, which
    TFLite Micro lacks. None for every other operation (Keras computes it)."""
    if type(op).__name__ == "Any" and not isinstance(op, keras.layers.Layer):
        return lambda values, mask, kwargs: recurrent_loop.reduce_any(values, op.axis, op.keepdims)
    if not isinstance(op, keras.layers.Masking):
        return None

    def masking(sequences, mask, kwargs):
        kept = tf.not_equal(sequences, tf.cast(op.mask_value, sequences.dtype))
        keep = recurrent_loop.reduce_any(kept, -1, keepdims=True)
        outputs = recurrent_loop.keep_valid(keep, sequences)
        keras_internals.set_keras_mask(outputs, tf.squeeze(keep, -1))
        return outputs

    return masking


def _checked_states(frame, frame_name, states):
    """The states, each readable only after its batch is checked: without
    the dependency the runtime may run a concat of mismatched batches first,
    whose error names no state."""
    batch = tf.shape(frame)[0]
    checked = {}
    for state_name, state in states.items():
        check = tf.debugging.assert_equal(
            tf.shape(state)[0], batch,
            message=f"state '{state_name}' must have the batch size of input '{frame_name}'",
        )
        with tf.control_dependencies([check]):
            checked[state_name] = tf.identity(state)
    return checked


def _returned_states(node, method, states):
    """The states a stateful layer's `method` returned, refused unless they
    are its `streaming_state_specs()`, which the file's signatures declare."""
    specs = [(name, spec.shape, spec.dtype.name) for name, spec in node.state_specs.items()]
    return validation.check_returned_states(f"{type(node.streamer).__name__}.{method}", states, specs,
                                            "streaming_state_specs()")


def initial_state_fn(plan):
    plan.require_streaming()

    def initial_state(batch_size):
        states = {}
        for node in plan.stateful:
            initial = node.streamer.streaming_initial_state(batch_size)
            states.update(zip(node.state_names, _returned_states(node, "streaming_initial_state", initial)))
        return states

    return initial_state


def add_endpoints(archive, model, plan, *, sequence=True, streaming=False, dynamic_length=True,
                  check_batch=False, batch_size=None, length=None, step_only=False, unroll=False):
    """Adds `serve`, and with `streaming` `step` and `initial_state`, of
    `model` (of `plan`) to a `keras.export.ExportArchive` that tracks it
    (`new_archive(model)`).

    `batch_size` fixes the batch of every signature, `length` the time axis
    of `serve` (with `dynamic_length=False`). `step_only` leaves out every
    streaming signature but `step` (a runtime that runs one subgraph);
    `unroll` traces `serve`'s recurrent loops unrolled (a fixed length).

    Returns:
        The names of the endpoints added.
    """
    names = []
    if sequence:
        archive.add_endpoint("serve", serve_fn(model, plan, unroll),
                             input_signature=[plan.serve_specs(dynamic_length, batch_size, length)])
        names.append("serve")
    if streaming:
        archive.add_endpoint(
            "step",
            step_fn(model, plan, check_batch),
            input_signature=[{**plan.frame_specs(batch_size), **plan.state_specs(batch_size)}],
        )
        names.append("step")
    if streaming and not step_only:
        archive.add_endpoint(
            "initial_state",
            initial_state_fn(plan),
            input_signature=[tf.TensorSpec((), tf.int32, name="batch_size")],
        )
        names.append("initial_state")
        if plan.chunk_length is not None:
            # Says the step takes chunks, and how long (runners read it).
            archive.add_endpoint(
                "chunk_length",
                lambda: {"chunk_length": tf.constant(plan.chunk_length, tf.int32)},
                input_signature=[],
            )
            names.append("chunk_length")
    return names


def new_archive(model):
    archive = keras.export.ExportArchive()
    archive.track(model)
    return archive
