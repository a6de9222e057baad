"""RESHAPEs whose target shape the file computes at run time, made
constant where one size alone is unknown before running.

A RESHAPE whose shape input is computed while running (SHAPE →
STRIDED_SLICE → PACK(batch, n, d), what `reshape(x, (batch, n, d))` with a
runtime `batch` converts to; SHAPE → GATHER → REDUCE_PROD → PACK, what a
`tensordot` of a sequence converts to) gets a dynamic output: LiteRT sizes
it only while running and puts it on the heap, at an address that changes
from run to run. Inside a WHILE body, XNNPACK's delegated ops have been
seen reading such a tensor's stale address on a fresh interpreter's first
invoke: a wrong answer, the same bytes each time, with nothing to tell a
device it is wrong. A constant shape with -1 for the one unknown size (the
batch, or a product of it) gives a tensor LiteRT plans before running,
which no such run has shown wrong.

The target shape is worked out from the shape arithmetic that computes it,
each size a known number or unknown (the converter's own annotation of
the output can say unknown for a size it could not follow through a
product); where that arithmetic is out of reach, from the annotation. The
layers reshape with -1 themselves; `make_static` rewrites what the
converter still produces (and drops the shape arithmetic left unread), and
`runtime_shaped` finds what is left, for the export checks and `inspect`.
"""

import math

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from keras_relrec.export.tflite import flatbuffer

_OP = schema.BuiltinOperator
# Ops without side effects that computing a shape takes; left without a
# reader after the rewrite, they are removed.
_SHAPE_ARITHMETIC = frozenset(
    getattr(_OP, name)
    for name in ("SHAPE", "STRIDED_SLICE", "PACK", "CONCATENATION", "GATHER", "CAST", "SLICE", "SQUEEZE",
                 "EXPAND_DIMS", "MUL", "ADD", "SUB", "FLOOR_DIV", "REDUCE_PROD", "RESHAPE")
)
_INTEGER_TYPES = {schema.TensorType.INT32: np.int32, schema.TensorType.INT64: np.int64}
_ELEMENTWISE = {
    _OP.MUL: lambda a, b: a * b,
    _OP.ADD: lambda a, b: a + b,
    _OP.SUB: lambda a, b: a - b,
    _OP.FLOOR_DIV: lambda a, b: a // b,
}


def _builtin(model, op):
    code = model.operatorCodes[op.opcodeIndex]
    return max(code.builtinCode, code.deprecatedBuiltinCode)


def _constant(model, tensor):
    """The tensor's constant integer values, or None for a tensor computed
    while running (or data this reading does not take)."""
    buffer = model.buffers[tensor.buffer] if tensor.buffer else None
    if buffer is None or buffer.data is None or not len(buffer.data) or tensor.type not in _INTEGER_TYPES:
        return None
    shape = [] if tensor.shape is None else [int(d) for d in tensor.shape]
    return np.frombuffer(bytes(buffer.data), _INTEGER_TYPES[tensor.type]).reshape(shape)


def is_constant(model, tensor):
    """Whether a tensor of a `schema.ModelT` holds constant data."""
    buffer = model.buffers[tensor.buffer] if tensor.buffer else None
    # offset > 1: the data lies outside the flatbuffer (schema).
    return buffer is not None and ((buffer.data is not None and len(buffer.data) > 0) or (buffer.offset or 0) > 1)


def _signature(tensor):
    """The tensor's shape with -1 for each size unknown before running
    (None where the file records no shape)."""
    shape = tensor.shapeSignature if tensor.shapeSignature is not None and len(tensor.shapeSignature) else tensor.shape
    return None if shape is None else [int(d) for d in shape]


class _ShapeArithmetic:
    """The values of a subgraph's small integer tensors as far as they are
    known before running: a scalar is an int or None (unknown), a vector a
    list of those; None for a tensor whose value is out of reach."""

    def __init__(self, model, subgraph):
        self.model, self.subgraph = model, subgraph
        self.producers = {int(t): op for op in subgraph.operators for t in op.outputs}
        self.found = {}

    def value(self, index):
        if index not in self.found:
            self.found[index] = None  # a cycle (none is expected) stays unknown
            self.found[index] = self._evaluate(index)
        return self.found[index]

    def _evaluate(self, index):
        tensor = self.subgraph.tensors[index]
        constant = _constant(self.model, tensor)
        if constant is not None:
            return int(constant) if constant.ndim == 0 else [int(v) for v in constant] if constant.ndim == 1 else None
        op = self.producers.get(index)
        if op is None:
            return None
        code, options = _builtin(self.model, op), op.builtinOptions
        inputs = [self.value(int(t)) if t >= 0 else None for t in op.inputs]
        if code == _OP.SHAPE:
            shape = _signature(self.subgraph.tensors[op.inputs[0]])
            return None if shape is None else [d if d >= 0 else None for d in shape]
        if code == _OP.CAST:
            return inputs[0]
        if code in _ELEMENTWISE and len(inputs) == 2 and None not in inputs:
            return _elementwise(_ELEMENTWISE[code], *inputs)
        if code == _OP.GATHER and isinstance(inputs[0], list) and inputs[1] is not None:
            if options is not None and (options.axis or options.batchDims):
                return None
            picks = inputs[1] if isinstance(inputs[1], list) else [inputs[1]]
            if None in picks or any(not -len(inputs[0]) <= p < len(inputs[0]) for p in picks):
                return None
            taken = [inputs[0][p] for p in picks]
            return taken if isinstance(inputs[1], list) else taken[0]
        if code == _OP.REDUCE_PROD and isinstance(inputs[0], list):
            if inputs[1] not in (0, [0], -1, [-1]) or (options is not None and options.keepDims):
                return None
            return None if None in inputs[0] else math.prod(inputs[0])
        if code == _OP.PACK and all(not isinstance(v, list) for v in inputs):
            return None if options is not None and options.axis else list(inputs)
        if code == _OP.CONCATENATION and all(isinstance(v, list) for v in inputs):
            return None if options is not None and options.axis else [d for v in inputs for d in v]
        if code == _OP.STRIDED_SLICE and isinstance(inputs[0], list):
            return _strided_slice(inputs, options)
        if code == _OP.RESHAPE and inputs[0] is not None:
            flat = inputs[0] if isinstance(inputs[0], list) else [inputs[0]]
            shape = _signature(self.subgraph.tensors[op.outputs[0]])
            if shape == []:
                return flat[0] if len(flat) == 1 else None
            return flat if shape is not None and len(shape) == 1 else None
        return None


def _elementwise(fn, a, b):
    def one(x, y):
        return None if x is None or y is None else int(fn(x, y))

    if isinstance(a, list) or isinstance(b, list):
        a_list = a if isinstance(a, list) else [a] * len(b)
        b_list = b if isinstance(b, list) else [b] * len(a)
        return [one(x, y) for x, y in zip(a_list, b_list, strict=True)] if len(a_list) == len(b_list) else None
    return one(a, b)


def _strided_slice(inputs, options):
    """A strided slice of a vector by constant bounds (what slicing a shape
    takes), or None."""
    vector, begin, end, strides = (inputs + [None] * 4)[:4]
    if not all(isinstance(v, list) and len(v) == 1 and v[0] is not None for v in (begin, end, strides)):
        return None
    masks = options if options is not None else schema.StridedSliceOptionsT()
    if masks.ellipsisMask or masks.newAxisMask or masks.offset:
        return None
    start = None if masks.beginMask & 1 else begin[0]
    stop = None if masks.endMask & 1 else end[0]
    if masks.shrinkAxisMask & 1:
        return vector[start] if start is not None and -len(vector) <= start < len(vector) else None
    return vector[slice(start, stop, strides[0])]


def _rewritable(model):
    """(subgraph, RESHAPE op, constant shape) for every RESHAPE whose shape
    input is computed at run time while at most one size of its target is
    unknown (a rank-0 target is left: its shape is empty; so is a target
    with a size 0 beside the unknown one, which -1 cannot resolve)."""
    for subgraph in model.subgraphs:
        arithmetic = None
        for op in subgraph.operators:
            if _builtin(model, op) != _OP.RESHAPE or len(op.inputs) < 2 or op.inputs[1] < 0:
                continue
            if is_constant(model, subgraph.tensors[op.inputs[1]]):
                continue
            arithmetic = arithmetic or _ShapeArithmetic(model, subgraph)
            target = arithmetic.value(int(op.inputs[1]))
            if not isinstance(target, list):
                signature = _signature(subgraph.tensors[op.outputs[0]])
                target = None if signature is None else [d if d >= 0 else None for d in signature]
            if not target:
                continue
            target = [None if d is None or d < 0 else d for d in target]
            if target.count(None) <= 1 and not (None in target and 0 in target):
                yield subgraph, op, [-1 if d is None else d for d in target]


def _name(tensor):
    return (tensor.name or b"").decode(errors="replace")


def runtime_shaped(content):
    """The output names of the RESHAPEs whose shape is computed at run time
    where a constant (with -1 for the one unknown size) would do; empty for
    a file `make_static` has passed over."""
    model = flatbuffer.read(content)
    return [_name(subgraph.tensors[op.outputs[0]]) for subgraph, op, _ in _rewritable(model)]


def make_static(content):
    """The file with those RESHAPEs given constant shapes, and how many.

    Returns:
        (bytes of the file, the number of RESHAPEs rewritten); the bytes
        are `content` itself where there was none.
    """
    model = flatbuffer.read(content)
    found = list(_rewritable(model))
    for subgraph, op, shape in found:
        buffer = schema.BufferT()
        buffer.data = np.frombuffer(np.asarray(shape, np.int32).tobytes(), np.uint8)
        model.buffers.append(buffer)
        tensor = schema.TensorT()
        tensor.shape = np.asarray([len(shape)], np.int32)
        tensor.type = schema.TensorType.INT32
        tensor.buffer = len(model.buffers) - 1
        tensor.name = (subgraph.tensors[op.outputs[0]].name or b"reshape") + b"/static_shape"
        subgraph.tensors.append(tensor)
        op.inputs[1] = len(subgraph.tensors) - 1
    if not found:
        return content, 0
    for subgraph in {id(s): s for s, _, _ in found}.values():
        _drop_unread_shape_arithmetic(model, subgraph)
    return flatbuffer.write(model, len(content)), len(found)


def _drop_unread_shape_arithmetic(model, subgraph):
    """Removes shape-arithmetic ops none of whose outputs is read, until
    none is left (their tensors stay, unread and unallocated)."""
    while True:
        read = {int(t) for op in subgraph.operators for t in (op.inputs if op.inputs is not None else [])}
        read.update(int(t) for t in (subgraph.outputs if subgraph.outputs is not None else []))
        unread = [op for op in subgraph.operators
                  if _builtin(model, op) in _SHAPE_ARITHMETIC and not read.intersection(int(t) for t in op.outputs)]
        if not unread:
            return
        subgraph.operators = [op for op in subgraph.operators if all(op is not u for u in unread)]
