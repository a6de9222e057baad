"""The micro target's check of a converted file: whether it runs in
TensorFlow Lite for Microcontrollers (TFLM) and the tensor arena it needs,
found in the `tflite-micro` interpreter (extra `[micro]`), the same C++
runtime that runs on the chip. An op TFLM lacks is named with its layer.
"""

import json
import pathlib
import re
import subprocess
import sys
import tempfile

from keras_relrec.export.export_error import ExportError
from keras_relrec.export.graph import model_graph
from keras_relrec.export.runtime import micro_probe
from keras_relrec.export.runtime import tflite_inspect


def missing_ops(message):
    """The builtin ops TFLM said it lacks."""
    return sorted(set(re.findall(r"Didn't find op for builtin opcode '(\w+)'", message)))


def _refusal(content, message, plan):
    """One line: why TFLM cannot run the file, naming the op and the layer."""
    missing = missing_ops(message)
    failed = re.findall(r"Node (\w+) \(number \d+\) failed", message)
    if not missing and not failed:
        return f"the tflite-micro interpreter cannot run the file: {message}"
    op = (missing or failed)[0]
    names = " ".join(tflite_inspect.op_outputs(content).get(op, []))
    layer = plan.layer_in_scope(names) if plan is not None else None
    where = model_graph.describe(layer)
    if missing:
        return (f"{where} needs the op {op}, which TensorFlow Lite for Microcontrollers lacks; export for "
                "target='litert', which runs every builtin op")
    return f"{where} uses the op {op} in a way TensorFlow Lite for Microcontrollers does not run: {message}"


def check(content, plan=None):
    """Runs the file on zeros in the tflite-micro interpreter, in a child
    process (TFLM's native code may crash on a file it does not support),
    and finds the smallest tensor arena it runs in.

    Args:
        content: The `.tflite` file's bytes.
        plan: The `ExportPlan` of the model it was exported from, to name
            the layer of an op that TFLM lacks.

    Returns:
        {"arena_bytes": the smallest arena (to 16 bytes) in which the
        interpreter allocates and invokes the file}.

    Raises:
        ExportError: TFLM cannot run the file (an op it lacks, named with
            its layer, or what TFLM said).
    """
    if not micro_probe.available():
        raise ExportError(micro_probe.NOT_INSTALLED)
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "model.tflite"
        path.write_bytes(bytes(content))
        done = subprocess.run([sys.executable, "-P", micro_probe.__file__, str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise ExportError(f"the tflite-micro check failed: {said}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    if "error" in found:
        raise ExportError(_refusal(content, found["error"], plan))
    return found


def compatibility(content):
    """{"runs": bool, "arena_bytes": int or None, "reason": str or None}:
    what the tflite-micro interpreter makes of the file."""
    try:
        return {"runs": True, "reason": None, **check(content)}
    except ExportError as error:
        return {"runs": False, "arena_bytes": None, "reason": str(error)}
