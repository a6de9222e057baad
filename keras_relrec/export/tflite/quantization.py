"""Integer tensors of a fully integer `.tflite` file (`quantize="int8"`
with `integer_io`): real value = scale × (integer − zero_point), with the
scale and zero point the file records for each input and output
(`inspect_tflite(...)["quantization"]`)."""

import numpy as np


def parameters(detail):
    """(scale, zero_point) of a tensor's details (LiteRT's or the
    tflite-micro interpreter's), or None for a tensor that is not
    quantized."""
    found = detail.get("quantization_parameters") or {}
    scales = found.get("scales", [])
    if len(scales) == 0 or not np.issubdtype(detail["dtype"], np.integer):
        return None
    return float(scales[0]), int(found["zero_points"][0])


def quantize(values, scale_zero_point, dtype=np.int8):
    """Real values as the integers of `dtype` that stand for them."""
    scale, zero_point = scale_zero_point
    info = np.iinfo(dtype)
    return np.clip(np.round(np.asarray(values, np.float64) / scale) + zero_point, info.min, info.max).astype(dtype)


def dequantize(values, scale_zero_point):
    """Integers as the real values they stand for (float32)."""
    scale, zero_point = scale_zero_point
    return (scale * (np.asarray(values, np.float64) - zero_point)).astype(np.float32)


def carried(value, source, target, dtype):
    """A state a step returned (with parameters `source`, None for a float
    tensor) as the next step's input (parameters `target`, of `dtype`): the
    same integers when the parameters agree, as the converter makes them
    when it calibrates a stream; else converted."""
    if source == target:
        return value
    if source is None:
        return quantize(value, target, dtype)
    if target is None:
        return dequantize(value, source)
    return quantize(dequantize(value, source), target, dtype)
