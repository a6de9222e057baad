"""Every use of TensorFlow's private API in keras_relrec, in one module.

The export path needs two pieces of TensorFlow that are not exported under
`tf.*`:

- `dynamic_update_slice`: XLA's op, from `tensorflow.compiler.tf2xla`. The
  export's recurrent loop writes each step's output into a plain tensor
  with it, which the converter keeps as the builtin DYNAMIC_UPDATE_SLICE,
  where a `TensorArray` (Keras' own loop) converts only to Flex TensorList
  ops that LiteRT cannot run.
- `quantize_dense_weights_per_tensor`: the converter's switch that keeps
  Dense kernels quantized per tensor, for runtimes older than
  FULLY_CONNECTED version 12 (TensorFlow 2.17), which per-channel weights
  need.

TensorFlow is pinned in constraints.txt; moving to the next TensorFlow is
this file's work (tests/test_repository.py keeps the private API here).
"""

from tensorflow.compiler.tf2xla.python.xla import dynamic_update_slice


def quantize_dense_weights_per_tensor(converter):
    """Sets `converter` (a `tf.lite.TFLiteConverter`) to quantize Dense
    kernels per tensor instead of per channel."""
    converter._experimental_disable_per_channel_quantization_for_dense_layers = True


__all__ = ["dynamic_update_slice", "quantize_dense_weights_per_tensor"]
