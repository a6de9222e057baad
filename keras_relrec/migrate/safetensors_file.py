"""Reading a `.safetensors` file (HuggingFace's format for weights) into
NumPy arrays, without torch or the safetensors package.

The format: an unsigned 64-bit little-endian header length n, n bytes of
JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}} (and an
optional "__metadata__"), then the tensors' bytes, little-endian, each at
its offsets from the end of the header."""

import json
import pathlib

import ml_dtypes
import numpy as np

DTYPES = {
    "F64": np.dtype("<f8"), "F32": np.dtype("<f4"), "F16": np.dtype("<f2"),
    "BF16": np.dtype(ml_dtypes.bfloat16), "I64": np.dtype("<i8"), "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"), "I8": np.dtype("i1"), "U8": np.dtype("u1"), "BOOL": np.dtype("bool"),
}


def read_safetensors(path):
    """{name: array} of the tensors in the `.safetensors` file at `path`.

    The header is checked as the format specifies: each tensor an object of
    `dtype`, `shape` (sizes ≥ 0) and `data_offsets` [begin, end] holding
    exactly its bytes, and the tensors' ranges, in order, covering the data
    from its first byte to its last without overlap or gap.

    Raises:
        ValueError: the file is not a safetensors file (a header that is not
            JSON, an entry without those fields, ranges that overlap, leave
            bytes unused or fall outside the data, a size its shape does not
            give) or holds a dtype this reader does not know.
    """
    data = pathlib.Path(path).read_bytes()
    length = int.from_bytes(data[:8], "little") if len(data) >= 8 else -1
    try:
        header = json.loads(data[8 : 8 + length]) if 0 < length <= len(data) - 8 else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        header = None
    if not isinstance(header, dict):
        raise ValueError(f"read_safetensors: {path} is not a safetensors file (no JSON header after 8 bytes).")
    body = memoryview(data)[8 + length :]
    entries = {name: _entry(path, name, entry, len(body)) for name, entry in header.items() if name != "__metadata__"}
    covered = 0
    for name, (_, _, begin, end) in sorted(entries.items(), key=lambda item: item[1][2:]):
        if begin != covered:
            what = (f"overlaps the bytes before {covered}" if begin < covered
                    else f"leaves bytes {covered}..{begin - 1} unused")
            raise ValueError(
                f"read_safetensors: tensor '{name}' in {path} has offsets {[begin, end]}, which {what}: the "
                "tensors' ranges must cover the data in order, without overlap or gap."
            )
        covered = end
    if covered != len(body):
        raise ValueError(
            f"read_safetensors: the tensors in {path} end at byte {covered} of its {len(body)} bytes of data: the "
            "tensors' ranges must cover the data without gap."
        )
    return {name: np.frombuffer(body[begin:end], dtype).reshape(shape).copy()
            for name, (dtype, shape, begin, end) in entries.items()}


def _entry(path, name, entry, data_size):
    """(dtype, shape, begin, end) of a header entry, checked on its own."""
    where = f"read_safetensors: tensor '{name}' in {path}"
    if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= set(entry):
        raise ValueError(f"{where} must be an object of dtype, shape and data_offsets; received {entry!r:.100}.")
    dtype = DTYPES.get(entry["dtype"]) if isinstance(entry["dtype"], str) else None
    if dtype is None:
        raise ValueError(f"{where} has dtype {entry['dtype']!r}; this reader takes {sorted(DTYPES)}.")
    shape, offsets = entry["shape"], entry["data_offsets"]
    if not isinstance(shape, list) or not all(_is_count(size) for size in shape):
        raise ValueError(f"{where} has shape {shape!r}; a shape is a list of sizes ≥ 0.")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_count(offset) for offset in offsets):
        raise ValueError(f"{where} has data_offsets {offsets!r}; they are [begin, end], two byte offsets ≥ 0.")
    begin, end = offsets
    if not begin <= end <= data_size or end - begin != dtype.itemsize * int(np.prod(shape)):
        raise ValueError(
            f"{where} has offsets {[begin, end]} that do not hold {tuple(shape)} of {entry['dtype']} within the "
            f"file's {data_size} bytes of data."
        )
    return dtype, tuple(shape), begin, end


def _is_count(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
