"""What a `.tflite` file holds: signatures, op histogram, size.

Reads the flatbuffer with LiteRT's schema, so it needs `ai_edge_litert`
but not TensorFlow.
"""

import collections
import pathlib

from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter

_BUILTIN_NAMES = {
    code: name for name, code in vars(schema.BuiltinOperator).items() if not name.startswith("_")
}


def operator_names(model):
    """The op name of each of a flatbuffer `Model`'s operator codes; custom
    and Flex ops are named `CUSTOM:<code>`."""
    names = []
    for k in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(k)
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        if builtin == schema.BuiltinOperator.CUSTOM:
            names.append("CUSTOM:" + code.CustomCode().decode())
        else:
            names.append(_BUILTIN_NAMES.get(builtin, f"BUILTIN_{builtin}"))
    return names


def op_histogram(content):
    """{op name: count} over every subgraph (names as `operator_names`)."""
    model = schema.Model.GetRootAsModel(content, 0)
    names = operator_names(model)
    counts = collections.Counter()
    for s in range(model.SubgraphsLength()):
        subgraph = model.Subgraphs(s)
        for o in range(subgraph.OperatorsLength()):
            counts[names[subgraph.Operators(o).OpcodeIndex()]] += 1
    return dict(sorted(counts.items()))


def custom_ops(content):
    """The names of custom (including Flex) ops; empty for builtins only."""
    return sorted(op for op in op_histogram(content) if op.startswith("CUSTOM:"))


def summarize(path_or_content):
    """A dict: size in bytes, subgraph count, signatures with their inputs
    and outputs (name, shape signature, dtype), and the op histogram."""
    if isinstance(path_or_content, (bytes, bytearray)):
        content = bytes(path_or_content)
    else:
        content = pathlib.Path(path_or_content).read_bytes()
    interpreter = Interpreter(model_content=content)
    signatures = {}
    for key in interpreter.get_signature_list():
        runner = interpreter.get_signature_runner(key)
        signatures[key] = {
            side: {
                name: (tuple(int(d) for d in detail["shape_signature"]), detail["dtype"].__name__)
                for name, detail in sorted(details.items())
            }
            for side, details in (
                ("inputs", runner.get_input_details()),
                ("outputs", runner.get_output_details()),
            )
        }
    model = schema.Model.GetRootAsModel(content, 0)
    return {
        "size_bytes": len(content),
        "subgraphs": model.SubgraphsLength(),
        "signatures": signatures,
        "ops": op_histogram(content),
    }


def format_summary(summary):
    lines = [f"size: {summary['size_bytes']:,} bytes, subgraphs: {summary['subgraphs']}"]
    for key, sides in summary["signatures"].items():
        lines.append(f"signature '{key}':")
        for side, tensors in sides.items():
            for name, (shape, dtype) in tensors.items():
                shape_text = "(" + ", ".join("?" if d < 0 else str(d) for d in shape) + ")"
                lines.append(f"  {side[:-1]:<6} {name:<28} {shape_text:<18} {dtype}")
    lines.append("ops (all subgraphs):")
    for op, count in summary["ops"].items():
        lines.append(f"  {op:<28} {count}")
    micro = summary.get("tflite-micro")
    if micro is not None:
        verdict = f"runs, tensor arena {micro['arena_bytes']:,} bytes" if micro["runs"] else micro["reason"]
        lines.append(f"tflite-micro: {verdict}")
    return "\n".join(lines)
