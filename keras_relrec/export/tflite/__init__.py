"""From the traced endpoints to a checked `.tflite` file: `export_tflite`,
the passes over the converted file, and each target's check of it (TFLite
Micro's and the accelerators' included).
"""

# Where 0.2 had them (`keras_relrec.export.tflite` was a module).
from keras_relrec.export.tflite.converter import QUANTIZE_MODES  # noqa: F401
from keras_relrec.export.tflite.converter import export_tflite  # noqa: F401
