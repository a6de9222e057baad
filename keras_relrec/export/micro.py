"""TensorFlow Lite for Microcontrollers (TFLM): whether a `.tflite` file runs
there, the tensor arena it needs, and runners, all in the `tflite-micro`
interpreter (extra `[micro]`), the same C++ runtime that runs on the chip.

A microcontroller build has no dynamic shapes and runs one subgraph (the
first; WHILE bodies aside): `export_tflite(..., target="micro")` fixes the
batch (and, in sequence mode, the length) and writes the streaming `step`
as the file's only signature, its initial states in a `.npz` beside it
(`initial_state_path`). TFLM addresses tensors by position, not by name:
`io_order` gives the positions of the step's inputs and outputs.

The public namespace of that part of the export, gathered from where each
piece works: the check from `tflite/micro_check.py` (with the micro
target), the initial-state file from `tflite/initial_state_file.py`, the
runners from `runtime/micro_interpreter.py`.
"""

from keras_relrec.export.runtime.micro_interpreter import MicroInterpreter
from keras_relrec.export.runtime.micro_interpreter import MicroStreamer
from keras_relrec.export.runtime.micro_interpreter import io_order
from keras_relrec.export.runtime.micro_interpreter import run_sequence
from keras_relrec.export.runtime.micro_probe import available
from keras_relrec.export.tflite.initial_state_file import initial_state_path
from keras_relrec.export.tflite.initial_state_file import read_initial_state
from keras_relrec.export.tflite.micro_check import check
from keras_relrec.export.tflite.micro_check import compatibility
from keras_relrec.export.tflite.micro_check import missing_ops

__all__ = [
    "MicroInterpreter",
    "MicroStreamer",
    "available",
    "check",
    "compatibility",
    "initial_state_path",
    "io_order",
    "missing_ops",
    "read_initial_state",
    "run_sequence",
]
