"""What a `.tflite` file holds: signatures, op histogram, size.

Reads the flatbuffer with LiteRT's schema, so it needs `ai_edge_litert`
but not TensorFlow.
"""

import collections
import pathlib
import struct

from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter

from keras_relrec.export.tflite import quantization
from keras_relrec.export.tflite import static_reshapes

# The older runtime checked (deployed devices still carry it); files that
# stay within its op versions run there (export_tflite(runtime=...)).
OLDER_RUNTIME = "2.14"

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


def op_versions(content):
    """{op name: the highest version of it in the file}; a runtime older
    than the version's release lacks that kernel."""
    model = schema.Model.GetRootAsModel(content, 0)
    names = operator_names(model)
    versions = {}
    for k in range(model.OperatorCodesLength()):
        versions[names[k]] = max(versions.get(names[k], 1), model.OperatorCodes(k).Version())
    return dict(sorted(versions.items()))


def later_op_versions(content):
    """"OP vN, ..." for every op past its first version: the candidates for
    what makes a file need a newer runtime."""
    return ", ".join(f"{op} v{v}" for op, v in op_versions(content).items() if v > 1)


def min_runtime(content):
    """The oldest TensorFlow Lite / LiteRT runtime that has every op version
    of the file, as the converter records it (`min_runtime_version`), or
    None for a file without the record."""
    model = schema.Model.GetRootAsModel(content, 0)
    for k in range(model.MetadataLength()):
        metadata = model.Metadata(k)
        if metadata.Name() == b"min_runtime_version":
            return bytes(model.Buffers(metadata.Buffer()).DataAsNumpy()).rstrip(b"\0").decode()
    return None


def version_tuple(version):
    """"2.14" or "2.14.0" as (2, 14, 0), to compare."""
    parts = [int(p) for p in version.split(".")]
    return tuple(parts + [0] * (3 - len(parts)))


def runs_on(content, runtime):
    """Whether a TensorFlow Lite runtime of version `runtime` ("2.14") has
    every op version of the file."""
    needed = min_runtime(content)
    return needed is None or version_tuple(needed) <= version_tuple(runtime)


def op_outputs(content):
    """{op name: [the names of its output tensors]} over every subgraph
    (the names carry the layer's scope, to tell which layer an op is of)."""
    model = schema.Model.GetRootAsModel(bytes(content), 0)
    names = operator_names(model)
    found = {}
    for s in range(model.SubgraphsLength()):
        subgraph = model.Subgraphs(s)
        for o in range(subgraph.OperatorsLength()):
            op = subgraph.Operators(o)
            outputs = [subgraph.Tensors(op.Outputs(k)).Name().decode() for k in range(op.OutputsLength())]
            found.setdefault(names[op.OpcodeIndex()], []).extend(outputs)
    return found


def custom_ops(content):
    """The names of custom (including Flex) ops; empty for builtins only."""
    return sorted(op for op in op_histogram(content) if op.startswith("CUSTOM:"))


def read_flatbuffer(path_or_content):
    """The bytes of a `.tflite` file (a path) or the bytes given, once they
    read as a TFLite flatbuffer: a ValueError naming the file and what is
    wrong otherwise (flatbuffers' own reader fails with `struct.error`, or
    reads garbage, on an empty, foreign or truncated file)."""
    if isinstance(path_or_content, (bytes, bytearray)):
        content, what = bytes(path_or_content), "Argument `path_or_content` (bytes)"
    else:
        content, what = pathlib.Path(path_or_content).read_bytes(), str(path_or_content)
    size = len(content)
    root = struct.unpack_from("<I", content)[0] if size >= 4 else None
    if size < 8:
        problem = "it is empty, not a TFLite flatbuffer" if not size else (
            f"truncated: {size} bytes, fewer than a flatbuffer's 8-byte header")
    elif content[4:8] != b"TFL3":
        problem = f"not a TFLite flatbuffer: no file identifier b'TFL3' at bytes 4:8 (found {content[4:8]!r})"
    elif root + 4 > size:
        problem = f"truncated: {size} bytes, its root table at byte {root}"
    else:
        try:
            schema.ModelT.InitFromPackedBuf(content, 0)  # reads every table
            return content
        except (struct.error, ValueError, IndexError):
            problem = f"truncated or corrupt: its tables point past its {size} bytes"
    raise unreadable(what, problem)


def unreadable(what, problem):
    """The ValueError for a `.tflite` file (`what`: its path, or the
    argument that held its bytes) that does not read, and why."""
    return ValueError(
        f"{what} is not a readable .tflite file: {problem}. Give a .tflite file as export_tflite writes it (write "
        "it again if it was cut short)."
    )


def summarize(path_or_content):
    """A dict: size in bytes, subgraph count, signatures with their inputs
    and outputs (name, shape signature, dtype), and the op histogram.

    Raises:
        ValueError: not a TFLite flatbuffer (see `read_flatbuffer`).
    """
    content = read_flatbuffer(path_or_content)
    interpreter = Interpreter(model_content=content)
    signatures, quantized_signatures = {}, {}
    for key in interpreter.get_signature_list():
        runner = interpreter.get_signature_runner(key)
        sides = (("inputs", runner.get_input_details()), ("outputs", runner.get_output_details()))
        signatures[key] = {
            side: {
                name: (tuple(int(d) for d in detail["shape_signature"]), detail["dtype"].__name__)
                for name, detail in sorted(details.items())
            }
            for side, details in sides
        }
        quantized = {
            side: {name: {"scale": q[0], "zero_point": q[1]} for name, detail in sorted(details.items())
                   if (q := quantization.parameters(detail))}
            for side, details in sides
        }
        if any(quantized.values()):
            quantized_signatures[key] = quantized
    model = schema.Model.GetRootAsModel(content, 0)
    return {
        "size_bytes": len(content),
        "subgraphs": model.SubgraphsLength(),
        "signatures": signatures,
        # Scale and zero point of every integer input and output: real value
        # = scale × (integer − zero_point).
        "quantization": quantized_signatures,
        "ops": op_histogram(content),
        "op_versions": op_versions(content),
        "min_runtime": min_runtime(content),
        # RESHAPEs sized at run time where a constant shape would do: 0 for
        # files this package writes (see `static_reshapes`).
        "runtime_shaped_reshapes": len(static_reshapes.runtime_shaped(content)),
    }


def format_summary(summary):
    lines = [f"size: {summary['size_bytes']:,} bytes, subgraphs: {summary['subgraphs']}"]
    for key, sides in summary["signatures"].items():
        lines.append(f"signature '{key}':")
        for side, tensors in sides.items():
            for name, (shape, dtype) in tensors.items():
                shape_text = "(" + ", ".join("?" if d < 0 else str(d) for d in shape) + ")"
                q = summary.get("quantization", {}).get(key, {}).get(side, {}).get(name)
                q_text = f" scale {q['scale']:.6g} zero_point {q['zero_point']}" if q else ""
                lines.append(f"  {side[:-1]:<6} {name:<28} {shape_text:<18} {dtype}{q_text}")
    for key, order in summary.get("positions", {}).items():
        # For runtimes that address tensors by position (TFLM's GetInput(k)).
        for side, names in order.items():
            lines.append(f"'{key}' {side} by position: {', '.join(names)}")
    if "reshapes_made_static" in summary:
        lines.append(f"RESHAPEs given constant shapes: {summary['reshapes_made_static']}")
    if summary.get("runtime_shaped_reshapes"):
        lines.append(f"RESHAPEs sized at run time where a constant shape would do: "
                     f"{summary['runtime_shaped_reshapes']} (re-export with this package's export_tflite)")
    lines.append("ops (all subgraphs), version:")
    for op, count in summary["ops"].items():
        lines.append(f"  {op:<28} {count:<4} v{summary['op_versions'].get(op, 1)}")
    runtimes = summary.get("runtimes")
    if runtimes is not None:
        lines.append(f"runtimes (min_runtime_version {summary['min_runtime']}):")
        for name, verdict in runtimes.items():
            lines.append(f"  {name + ':':<22} {verdict}")
    return "\n".join(lines)


def runtime_verdicts(content, micro=None, accelerator=None):
    """{runtime: one line}, each runtime's verdict on the file: LiteRT and
    TensorFlow Lite 2.14 (by op versions), TFLite Micro (`micro`, the
    interpreter's own verdict) and GPU/NPU delegates (`accelerator`)."""
    needed = min_runtime(content)
    verdicts = {"LiteRT / TF Lite": f"runs from {needed}" if needed else "runs"}
    verdicts[f"tflite-runtime {OLDER_RUNTIME}"] = (
        "runs" if runs_on(content, OLDER_RUNTIME) else f"needs {needed} (op versions: {later_op_versions(content)})"
    )
    if micro is not None:
        verdicts["tflite-micro"] = (
            f"runs, tensor arena {micro['arena_bytes']:,} bytes" if micro["runs"] else micro["reason"]
        )
    if accelerator is not None:
        verdicts["GPU / NPU delegate"] = "ready" if accelerator["ready"] else "; ".join(accelerator["reasons"])
    return verdicts
