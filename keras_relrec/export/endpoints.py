"""The functions a model is exported with, and their signatures.

- `serve`: whole sequences in, the model's outputs out, computed with the
  builtins-only recurrent loop. Batch and (by default) time are dynamic.
- `step`: one time step and every recurrent layer's states in, the output
  for that step and the new states out, by name.
- `initial_state`: a batch size in, every state at the start of a sequence.

State tensors are named `<layer name>_state_<k>` in the order of the
layer's Keras states (for an LSTM: 0 is h, 1 is c); the step returns the new
states under the same names, so a caller feeds each output back as the next
input of the same name.
"""

import re

import keras
import tensorflow as tf
from keras import tree

from keras_relrec.export import model_graph
from keras_relrec.export import recurrent_loop


def _safe_name(name):
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def input_names(model):
    """The names of the model's `keras.Input` layers, as signature names."""
    return [
        _safe_name(t._keras_history.operation.name)
        for t in model_graph.functional(model).inputs
    ]


def output_dict(outputs):
    flat = tree.flatten(outputs)
    if len(flat) == 1:
        return {"output": flat[0]}
    return {f"output_{k}": t for k, t in enumerate(flat)}


def serve_signature(model, dynamic_length=True):
    specs = {}
    for name, tensor in zip(input_names(model), model_graph.functional(model).inputs):
        shape = [None] + list(tensor.shape[1:])
        if dynamic_length and len(shape) >= 2:
            shape[1] = None
        specs[name] = tf.TensorSpec(shape, tensor.dtype, name=name)
    return specs


def serve_fn(model):
    names = input_names(model)

    def sequence_call(layer, sequences, mask, kwargs):
        return recurrent_loop.sequence(
            layer, sequences, mask, _flat_or_none(kwargs.get("initial_state"))
        )

    def serve(inputs):
        args = [inputs[n] for n in names]
        outputs = model_graph.run(model, args if len(args) > 1 else args[0], sequence_call)
        return output_dict(outputs)

    return serve


def _flat_or_none(states):
    return None if states is None else tree.flatten(states)


def state_specs(model):
    """{state name: TensorSpec} of every recurrent layer, in order."""
    specs = {}
    for layer, names in model_graph.state_names(model).items():
        for name, value in zip(names, recurrent_loop.initial_state(layer, 1)):
            specs[name] = tf.TensorSpec(
                [None] + list(value.shape[1:]), value.dtype, name=name
            )
    return specs


def step_signature(model):
    (name,) = input_names(model)
    tensor = model_graph.functional(model).inputs[0]
    frame = tf.TensorSpec([None] + list(tensor.shape[2:]), tensor.dtype, name=name)
    return {name: frame, **state_specs(model)}


def step_fn(model):
    keeps_time = model_graph.check_streamable(model)
    (name,) = input_names(model)
    names = model_graph.state_names(model)

    def step(inputs):
        new_states = {}

        def step_call(layer, sequences, mask, kwargs):
            states = [inputs[n] for n in names[layer]]
            output, updated = recurrent_loop.step(layer, sequences, mask, states)
            new_states.update(zip(names[layer], updated))
            return output

        output = model_graph.run(model, inputs[name][:, None], step_call)
        if keeps_time:
            output = output[:, 0]
        return {"output": output, **new_states}

    return step


def initial_state_fn(model):
    names = model_graph.state_names(model)

    def initial_state(batch_size):
        states = {}
        for layer, layer_names in names.items():
            states.update(zip(layer_names, recurrent_loop.initial_state(layer, batch_size)))
        return states

    return initial_state


def add_endpoints(archive, model, *, sequence=True, streaming=False, dynamic_length=True):
    """Adds `serve`, and with `streaming` `step` and `initial_state`, to a
    `keras.export.ExportArchive` that tracks `model`."""
    if sequence:
        archive.add_endpoint(
            "serve", serve_fn(model), input_signature=[serve_signature(model, dynamic_length)]
        )
    if streaming:
        archive.add_endpoint("step", step_fn(model), input_signature=[step_signature(model)])
        archive.add_endpoint(
            "initial_state",
            initial_state_fn(model),
            input_signature=[tf.TensorSpec((), tf.int32, name="batch_size")],
        )
    return archive


def new_archive(model):
    archive = keras.export.ExportArchive()
    archive.track(model)
    return archive
