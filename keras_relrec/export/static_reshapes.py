"""RESHAPEs whose target shape the file computes at run time, made
constant where the converter's shape inference leaves one size unknown.

A RESHAPE whose shape input is computed while running (SHAPE →
STRIDED_SLICE → PACK(batch, n, d), what `reshape(x, (batch, n, d))` with a
runtime `batch` converts to) gets a dynamic output: LiteRT sizes it only
while running and puts it on the heap, at an address that changes from run
to run. Inside a WHILE body, XNNPACK's delegated ops have been seen reading
such a tensor's stale address on a fresh interpreter's first invoke: a
wrong answer, the same bytes each time, with nothing to tell a device it
is wrong. A constant shape with -1 for the one unknown size (the batch)
gives a tensor LiteRT plans before running, which no such run has shown
wrong. The layers reshape with -1 themselves; `make_static` rewrites what
the converter still produces (and drops the shape arithmetic left unused),
and `runtime_shaped` finds what is left for the export checks.
"""

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from keras_relrec.export import flatbuffer

# Ops without side effects that computing a shape takes; left without a
# reader after the rewrite, they are removed.
_SHAPE_ARITHMETIC = frozenset(
    getattr(schema.BuiltinOperator, name)
    for name in ("SHAPE", "STRIDED_SLICE", "PACK", "CONCATENATION", "GATHER", "CAST", "SLICE", "SQUEEZE",
                 "EXPAND_DIMS", "MUL", "ADD", "SUB", "FLOOR_DIV", "RESHAPE")
)
_INTEGER_TYPES = {schema.TensorType.INT32: np.int32, schema.TensorType.INT64: np.int64}


def _builtin(model, op):
    code = model.operatorCodes[op.opcodeIndex]
    return max(code.builtinCode, code.deprecatedBuiltinCode)


def _is_constant(model, tensor):
    buffer = model.buffers[tensor.buffer] if tensor.buffer else None
    # offset > 1: the data lies outside the flatbuffer (schema).
    return buffer is not None and ((buffer.data is not None and len(buffer.data) > 0) or (buffer.offset or 0) > 1)


def _signature(tensor):
    """The tensor's shape with -1 for each size unknown before running."""
    shape = tensor.shapeSignature if tensor.shapeSignature is not None and len(tensor.shapeSignature) else tensor.shape
    return [int(d) for d in (shape if shape is not None else [])]


def _rewritable(model):
    """(subgraph, RESHAPE op, its output's signature) for every RESHAPE
    whose shape input is computed at run time while at most one size of
    its output is unknown (a rank-0 output is left: its shape is empty)."""
    for subgraph in model.subgraphs:
        for op in subgraph.operators:
            if _builtin(model, op) != schema.BuiltinOperator.RESHAPE or len(op.inputs) < 2 or op.inputs[1] < 0:
                continue
            if _is_constant(model, subgraph.tensors[op.inputs[1]]):
                continue
            signature = _signature(subgraph.tensors[op.outputs[0]])
            if signature and signature.count(-1) <= 1:
                yield subgraph, op, signature


def runtime_shaped(content):
    """The output names of the RESHAPEs whose shape is computed at run time
    where a constant (with -1 for the one unknown size) would do; empty for
    a file `make_static` has passed over."""
    model = flatbuffer.read(content)
    return [subgraph.tensors[op.outputs[0]].name.decode() for subgraph, op, _ in _rewritable(model)]


def make_static(content):
    """The file with those RESHAPEs given constant shapes, and how many.

    Returns:
        (bytes of the file, the number of RESHAPEs rewritten); the bytes
        are `content` itself where there was none.
    """
    model = flatbuffer.read(content)
    found = list(_rewritable(model))
    for subgraph, op, signature in found:
        shape_input = subgraph.tensors[op.inputs[1]]
        values = np.asarray(signature, _INTEGER_TYPES.get(shape_input.type, np.int32))
        buffer = schema.BufferT()
        buffer.data = np.frombuffer(values.tobytes(), np.uint8)
        model.buffers.append(buffer)
        tensor = schema.TensorT()
        tensor.shape = np.asarray([len(signature)], np.int32)
        tensor.type = shape_input.type
        tensor.buffer = len(model.buffers) - 1
        tensor.name = subgraph.tensors[op.outputs[0]].name + b"/static_shape"
        subgraph.tensors.append(tensor)
        op.inputs[1] = len(subgraph.tensors) - 1
    if not found:
        return content, 0
    for subgraph in {id(s): s for s, _, _ in found}.values():
        _drop_unread_shape_arithmetic(model, subgraph)
    return flatbuffer.write(model, len(content)), len(found)


def _drop_unread_shape_arithmetic(model, subgraph):
    """Removes shape-arithmetic ops none of whose outputs is read, until
    none is left (their tensors stay, unread)."""
    while True:
        read = {int(t) for op in subgraph.operators for t in (op.inputs if op.inputs is not None else [])}
        read.update(int(t) for t in (subgraph.outputs if subgraph.outputs is not None else []))
        unread = [op for op in subgraph.operators
                  if _builtin(model, op) in _SHAPE_ARITHMETIC and not read.intersection(int(t) for t in op.outputs)]
        if not unread:
            return
        subgraph.operators = [op for op in subgraph.operators if all(op is not u for u in unread)]
