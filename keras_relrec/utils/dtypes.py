"""Dtypes that layers compute in under mixed precision."""

HALF_PRECISION = ("float16", "bfloat16")


def at_least_float32(dtype):
    """`dtype`, or float32 in place of a half-precision dtype: for sums and
    distances that float16 would round away."""
    return "float32" if dtype in HALF_PRECISION else dtype
