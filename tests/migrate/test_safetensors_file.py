"""read_safetensors against files written here byte by byte from the
format's description (the HF checkpoint in tests/goldens is read by
test_hf_transfo_xl.py), and the files it refuses."""

import json

import ml_dtypes
import numpy as np
import pytest

from keras_relrec.migrate import read_safetensors


def write(path, tensors, header_extra=None):
    """A .safetensors file: the header's length (8 bytes, little-endian),
    the JSON header, then each tensor's bytes in turn."""
    header, offset, body = dict(header_extra or {}), 0, b""
    for name, (dtype, array) in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        offset, body = offset + len(data), body + data
    return write_header(path, header, body)


def test_every_dtype_reads_back(tmp_path):
    rng = np.random.default_rng(0)
    tensors = {
        "a.weight": ("F32", rng.normal(size=(3, 4)).astype("<f4")),
        "b": ("F64", rng.normal(size=(2,)).astype("<f8")),
        "c": ("BF16", rng.normal(size=(2, 2)).astype(ml_dtypes.bfloat16)),
        "d": ("I64", np.arange(5, dtype="<i8")),
        "e": ("BOOL", np.array([True, False])),
        "scalar": ("F16", np.array(1.5, "<f2")),
    }
    arrays = read_safetensors(write(tmp_path / "m.safetensors", tensors, {"__metadata__": {"format": "pt"}}))
    assert sorted(arrays) == sorted(tensors)
    for name, (_, array) in tensors.items():
        assert arrays[name].dtype == array.dtype and arrays[name].shape == array.shape
        np.testing.assert_array_equal(arrays[name], array)


def test_files_that_are_not_safetensors_are_refused(tmp_path):
    (tmp_path / "text").write_bytes(b"not a safetensors file at all")
    with pytest.raises(ValueError, match="not a safetensors file"):
        read_safetensors(tmp_path / "text")
    path = write(tmp_path / "odd.safetensors", {"x": ("C64", np.zeros(2, np.complex64))})
    with pytest.raises(ValueError, match="dtype 'C64'"):
        read_safetensors(path)
    path = write(tmp_path / "short.safetensors", {"x": ("F32", np.zeros(4, "<f4"))})
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(ValueError, match=r"offsets \[0, 16\]"):
        read_safetensors(path)


def write_header(path, header, body):
    """A .safetensors file of `header` (as given, checked by no one) and
    the data bytes `body`."""
    text = json.dumps(header).encode()
    path.write_bytes(len(text).to_bytes(8, "little") + text + body)
    return path


@pytest.mark.parametrize(("header", "size", "message"), [
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, 8, r"tensor 'b' .*offsets \[0, 8\], which "
                                                                      r"overlaps the bytes before 8"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, 12, r"tensor 'b' .*which overlaps"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, 8, r"tensor 'a' .*which leaves bytes 0\.\.3 "
                                                                       r"unused"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, 8, r"end at byte 4 of its 8 bytes of data"),
    ({"a": {"dtype": "F32", "shape": [1]}}, 4, r"tensor 'a' .*must be an object of dtype, shape and data_offsets"),
    ({"a": {"dtype": "F32", "data_offsets": [0, 4]}}, 4, r"must be an object of dtype, shape and data_offsets"),
    ({"a": "F32"}, 4, r"tensor 'a' .*must be an object of dtype, shape and data_offsets; received 'F32'"),
    ({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, 4, r"has shape \[-1\]; a shape is a list"),
    ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}}, 4, r"has data_offsets \[0\]; they are"),
    ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, 4, r"offsets \[0, 4\] that do not hold \(2,\)"),
], ids=["same-bytes", "overlapping", "gap-before", "gap-after", "no-offsets", "no-shape", "a-string",
        "negative-size", "one-offset", "size-of-another-shape"])
def test_a_header_is_checked_as_the_format_specifies(tmp_path, header, size, message):
    """Offsets in order, covering the data without overlap or gap, and
    every entry whole: else a ValueError naming the file and the tensor."""
    path = write_header(tmp_path / "m.safetensors", header, bytes(size))
    with pytest.raises(ValueError, match=r"read_safetensors: .*" + message) as caught:
        read_safetensors(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)
