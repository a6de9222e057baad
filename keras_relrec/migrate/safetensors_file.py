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

    Raises:
        ValueError: the file is not a safetensors file (a header that is not
            JSON, a tensor outside the data or of a size its shape does not
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
    arrays = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = DTYPES.get(entry.get("dtype"))
        if dtype is None:
            raise ValueError(
                f"read_safetensors: tensor '{name}' in {path} has dtype {entry.get('dtype')!r}; this reader "
                f"takes {sorted(DTYPES)}."
            )
        begin, end = entry["data_offsets"]
        shape = tuple(entry["shape"])
        if not 0 <= begin <= end <= len(body) or end - begin != dtype.itemsize * int(np.prod(shape)):
            raise ValueError(
                f"read_safetensors: tensor '{name}' in {path} has offsets {[begin, end]} that do not hold "
                f"{shape} of {entry['dtype']} within the file's {len(body)} bytes of data."
            )
        arrays[name] = np.frombuffer(body[begin:end], dtype).reshape(shape).copy()
    return arrays
