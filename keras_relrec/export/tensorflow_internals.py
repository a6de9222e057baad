"""Every use of TensorFlow's private API in keras_relrec, in one module.

The export path needs two pieces of TensorFlow that are not exported under
`tf.*`, and the layers' training one:

- `dynamic_update_slice`: XLA's op, from `tensorflow.compiler.tf2xla`. The
  export's recurrent loop writes each step's output into a plain tensor
  with it, which the converter keeps as the builtin DYNAMIC_UPDATE_SLICE,
  where a `TensorArray` (Keras' own loop) converts only to Flex TensorList
  ops that LiteRT cannot run.
- `quantize_dense_weights_per_tensor`: the converter's switch that keeps
  Dense kernels quantized per tensor, for runtimes older than
  FULLY_CONNECTED version 12 (TensorFlow 2.17), which per-channel weights
  need.
- `GraphOrParentsInXlaContext`: whether a trace is XLA's. `traced_once`
  (the hook of `keras_relrec.ops.loops`) shares one trace of a training
  segment between the segments of a step in TensorFlow's graph; under XLA
  it does not, because the gradient's reshapes of such a function's inputs
  make XLA's constant analysis key its cache on the inputs' values, and
  the step would compile at every call.

TensorFlow is pinned in constraints.txt; moving to the next TensorFlow is
this file's work (tests/test_repository.py keeps the private API here).
"""

import weakref

import tensorflow as tf
from tensorflow.compiler.tf2xla.python.xla import dynamic_update_slice
from tensorflow.python.ops.control_flow_util import GraphOrParentsInXlaContext

# One shared function per owner (a layer) and method name; weak, so that
# a layer is not kept alive by its traces.
_SHARED = weakref.WeakKeyDictionary()


class _SharedTrace:
    """A `tf.function` that runs the method given at each call: it holds
    no reference to the owner between calls."""

    def __init__(self):
        self.call = None
        self.function = tf.function(self._run, autograph=False)

    def _run(self, *args):
        return self.call(*args)

    def __call__(self, call, *args):
        self.call = call
        try:
            return self.function(*tf.nest.map_structure(_as_argument, args))
        finally:
            self.call = None


def _as_argument(value):
    """Python values key the trace; anything else is passed as a tensor (a
    stateful layer's states are Keras variables, which `tf.function`
    cannot take as arguments: read where they are passed)."""
    return value if value is None or isinstance(value, (bool, int, float)) else tf.convert_to_tensor(value)


def traced_once(owner, call):
    """`call` (a method of `owner`) as one `tf.function` per owner and
    method, traced once per signature of its arguments, where the caller is
    being traced in TensorFlow's graph; `call` itself eagerly and under XLA."""
    if not tf.inside_function() or GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()):
        return call
    functions = _SHARED.setdefault(owner, {})
    if call.__name__ not in functions:
        functions[call.__name__] = _SharedTrace()
    shared = functions[call.__name__]
    return lambda *args: shared(call, *args)


def quantize_dense_weights_per_tensor(converter):
    """Sets `converter` (a `tf.lite.TFLiteConverter`) to quantize Dense
    kernels per tensor instead of per channel."""
    converter._experimental_disable_per_channel_quantization_for_dense_layers = True


__all__ = ["dynamic_update_slice", "quantize_dense_weights_per_tensor", "traced_once"]
