"""Export to SavedModel and TFLite: the one part of keras_relrec that uses
TensorFlow directly.

- `export_saved_model(model, path)`: `serve` (whole sequences) and, when the
  model can stream, `step` and `initial_state` endpoints.
- `export_tflite(model, path, streaming=..., quantize=...)`: builtins-only
  TFLite, with dynamic batch and length, or the streaming signatures.
- `run_sequence` / `run_streaming`: run such a file in LiteRT.
- `ExportError`: raised, with the layer at fault, when a model cannot be
  exported as asked.
"""

from keras_relrec.export.export_error import ExportError
from keras_relrec.export.litert_runner import run_sequence
from keras_relrec.export.litert_runner import run_streaming
from keras_relrec.export.saved_model import export_saved_model
from keras_relrec.export.tflite import export_tflite
from keras_relrec.export.tflite_inspect import summarize as inspect_tflite
