"""Export to SavedModel and TFLite: the one part of keras_relrec that uses
TensorFlow directly.

- `export_saved_model(model, path)`: `serve` (whole sequences) and, when the
  model can stream, `step` and `initial_state` endpoints.
- `export_tflite(model, path, streaming=..., quantize=..., target=...)`:
  builtins-only TFLite, with dynamic batch and length, or the streaming
  signatures; `target="micro"` for TensorFlow Lite for Microcontrollers
  (fixed shapes, the step alone, checked in the tflite-micro interpreter).
- `micro`: that check (the op TFLM lacks and its layer, the smallest tensor
  arena), `MicroInterpreter` / `MicroStreamer` to run micro files there,
  `io_order` (the positions of a signature's tensors).
- `run_sequence` / `run_streaming`: run such a file in LiteRT, checking the
  inputs against its signature first; both return a dict. `Streamer`: a
  device's loop, one frame per call, allocating once (int8 states kept).
- `target="accelerator"`: GPU / NPU delegates (fixed shapes, loops
  unrolled; `tflite.accelerator.compatibility`); `quantize="int8"` with
  `integer_io` (int8 inputs, outputs and states; `tflite.quantization`);
  `runtime="2.14"` keeps op versions within an older runtime.
- `plan_export(model)`: the `ExportPlan` every export works from (inputs,
  stateful layers and their state names, why a model cannot stream).
- `StatefulLayer`: `keras_relrec.layers.StreamingLayer`, the base of the
  layers that stream with named states (its module documents the
  contract); `keras.layers.RNN` streams through `RNNStreamer`.
- `ExportError`: raised, with the layer at fault, when a model cannot be
  exported as asked.

Layout, in the order an export runs:

- `graph/`: reading the model and tracing it: `export_plan.py` (the
  plan), `stateful_protocol.py` (the streaming contract read off any
  layer), `rnn_streamer.py` (RNN's implementation of it),
  `recurrent_loop.py` (the builtins-only loop), `model_graph.py` (walking
  and running a model's graph), `endpoints.py` (serve / step /
  initial_state, traced from the model and its plan).
- `saved_model.py`: those endpoints written as a SavedModel.
- `tflite/`: conversion and the file's checks: `converter.py`
  (`export_tflite`), `calibration.py` (int8's representative data),
  `targets.py` (LiteRT, Micro, accelerator: what each file fixes and
  checks), `micro_check.py` (the file in TFLM's interpreter: the op it
  lacks and its layer, the arena), `accelerator.py`, `quantization.py`,
  `initial_state_file.py` (the initial states beside a fixed-batch
  streaming file), the passes over a converted file (`static_reshapes.py`,
  `tensor_names.py`, both through `flatbuffer.py`).
- `runtime/`: running and reading the files: `litert_runner.py`,
  `micro_interpreter.py` and `micro_probe.py` (TFLite Micro),
  `tflite_inspect.py`.
- `micro.py`: the public namespace of TFLite Micro's check and runners,
  gathered from `tflite/` and `runtime/`.
- `export_error.py`, `tensorflow_internals.py` (TensorFlow's private API),
  `cli.py` (the `keras-relrec` command).
"""

try:
    import ai_edge_litert  # noqa: F401
    import tensorflow  # noqa: F401
except ImportError as error:
    raise ImportError(
        f"keras_relrec.export needs TensorFlow and LiteRT ({error.name} is missing): install "
        "keras_relrec's `export` extra beside its `tensorflow` or `tensorflow-cpu` extra "
        "(pip install -e '.[tensorflow-cpu,export]' in a checkout)"
    ) from error

from keras_relrec.export import micro
from keras_relrec.export.export_error import ExportError
from keras_relrec.export.graph.export_plan import ExportPlan
from keras_relrec.export.graph.export_plan import plan_export
from keras_relrec.export.graph.stateful_protocol import StatefulLayer
from keras_relrec.export.runtime.litert_runner import Streamer
from keras_relrec.export.runtime.litert_runner import run_sequence
from keras_relrec.export.runtime.litert_runner import run_streaming
from keras_relrec.export.runtime.tflite_inspect import summarize as inspect_tflite
from keras_relrec.export.saved_model import export_saved_model
from keras_relrec.export.tflite import accelerator  # 0.2 named these two `export.accelerator`, `export.quantization`
from keras_relrec.export.tflite import quantization
from keras_relrec.export.tflite.converter import export_tflite
