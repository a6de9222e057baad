"""GPU and NPU delegates: whether a `.tflite` file is one they can take
whole.

A delegate that is handed part of a graph runs the rest on the CPU and
copies tensors across at every boundary; what stops it is, in practice,
dynamic shapes (it plans its memory once), control flow (no delegate runs
WHILE or IF) and, for integer-only NPUs (Edge TPU, Ethos-U, Hexagon), any
float tensor. `export_tflite(..., target="accelerator")` writes such files:
a fixed batch and length, the recurrent loop unrolled. TensorFlow Lite's
own GPU-delegate analysis (`tf.lite.experimental.Analyzer`) is run too and
its warnings reported; it does not look inside loops, so the checks here
come first.
"""

import contextlib
import io

import tensorflow as tf
from ai_edge_litert import schema_py_generated as schema

from keras_relrec.export.runtime import tflite_inspect

CONTROL_FLOW = ("WHILE", "IF", "CALL_ONCE")
_FLOAT_TYPES = (schema.TensorType.FLOAT32, schema.TensorType.FLOAT16)


def _gpu_warnings(content):
    """The lines of TensorFlow Lite's GPU-compatibility analysis that say
    an op will not run on the GPU delegate."""
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        tf.lite.experimental.Analyzer.analyze(model_content=bytes(content), gpu_compatibility=True)
    return [line.strip() for line in said.getvalue().splitlines() if "GPU COMPATIBILITY WARNING" in line]


def compatibility(content):
    """{"ready": bool, "reasons": [one line each], "integer_only": bool,
    "tensors": [names], "float_tensors": [names]}: whether a delegate can
    take the whole file, whether every tensor an op reads or writes is an
    integer (what an integer-only NPU needs), the tensors at fault (a
    loop's, the dynamic ones) and the float ones an op reads or writes."""
    content = bytes(content)
    model = schema.Model.GetRootAsModel(content, 0)
    reasons = []
    outputs = tflite_inspect.op_outputs(content)
    flow = sorted(set(outputs) & set(CONTROL_FLOW))
    at = [name for op in flow for name in outputs[op]]
    if flow:
        reasons.append(f"control flow ({', '.join(flow)}), which no delegate runs")
    dynamic, floats = [], []
    for s in range(model.SubgraphsLength()):
        subgraph = model.Subgraphs(s)
        for t in range(subgraph.TensorsLength()):
            tensor = subgraph.Tensors(t)
            if tensor.ShapeSignatureLength() and (tensor.ShapeSignatureAsNumpy() < 0).any():
                dynamic.append(tensor.Name().decode())
        for o in range(subgraph.OperatorsLength()):
            op = subgraph.Operators(o)
            used = list(op.InputsAsNumpy()) + list(op.OutputsAsNumpy())
            floats += [subgraph.Tensors(k).Name().decode() for k in used
                       if k >= 0 and subgraph.Tensors(k).Type() in _FLOAT_TYPES]
    if dynamic:
        reasons.append(f"dynamic shapes ({len(dynamic)} tensors, e.g. '{dynamic[0]}')")
    reasons += _gpu_warnings(content)
    return {"ready": not reasons, "reasons": reasons, "integer_only": not floats, "tensors": at + dynamic,
            "float_tensors": list(dict.fromkeys(floats))}
